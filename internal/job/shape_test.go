package job

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestShape(t *testing.T) {
	p := &Plan{
		JobID: "orders", MaxParallelism: 128, FormatVersion: 2,
		Operators: []Operator{
			{ID: "src", Kind: "source"},
			{ID: "agg", Kind: "aggregate", Stateful: true},
		},
	}
	want := Shape{
		FormatVersion: 2, MaxParallelism: 128,
		Operators: map[string]bool{"src": false, "agg": true},
		Kinds:     map[string]string{"src": "source", "agg": "aggregate"},
	}
	if diff := cmp.Diff(want, p.Shape()); diff != "" {
		t.Fatalf("Shape (-want +got):\n%s", diff)
	}
}

func TestRestorable(t *testing.T) {
	shape := Shape{
		FormatVersion: 1, MaxParallelism: 128,
		Operators: map[string]bool{"src": false, "clean": false, "agg": true, "win": true},
		Kinds:     map[string]string{"src": "source", "clean": "map", "agg": "aggregate", "win": "window"},
	}
	noKinds := shape
	noKinds.Kinds = nil
	tests := []struct {
		name     string
		shape    Shape
		format   int
		maxPar   int
		stateful []string
		want     *Incompatibility
	}{
		{"same", shape, 1, 128, []string{"agg", "win"}, nil},
		{"no state at all", shape, 1, 128, nil, nil},
		{"plan has more stateful operators", shape, 1, 128, []string{"agg"}, nil},
		{"format version", shape, 2, 128, []string{"agg"},
			&Incompatibility{Field: "format_version", Have: "2", Want: "1"}},
		{"format version before max parallelism", shape, 2, 64, nil,
			&Incompatibility{Field: "format_version", Have: "2", Want: "1"}},
		{"max parallelism", shape, 1, 256, []string{"agg"},
			&Incompatibility{Field: "max_parallelism", Have: "256", Want: "128"}},
		{"operator gone", shape, 1, 128, []string{"agg", "dedupe"},
			&Incompatibility{Field: "operators", Have: `state of operator "dedupe"`, Want: `no operator "dedupe"`}},
		{"operator no longer stateful", shape, 1, 128, []string{"clean", "dedupe"},
			&Incompatibility{Field: "operators", Have: `state of operator "clean"`, Want: `operator "clean" as a stateless map`}},
		{"stateless, kind unknown", noKinds, 1, 128, []string{"src"},
			&Incompatibility{Field: "operators", Have: `state of operator "src"`, Want: `operator "src" as a stateless operator`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.shape.Restorable(tc.format, tc.maxPar, tc.stateful)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("Restorable (-want +got):\n%s", diff)
			}
		})
	}
}
