package state

import (
	"errors"
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/flowplane/flowplane/internal/job"
)

func TestCompatible(t *testing.T) {
	plan := func() *job.Plan {
		return &job.Plan{
			JobID: "orders", Version: 2, MaxParallelism: 128, FormatVersion: 1,
			Operators: []job.Operator{
				{ID: "src", Kind: "source", Parallelism: 1},
				{ID: "clean", Kind: "map", Parallelism: 2},
				{ID: "agg", Kind: "aggregate", Parallelism: 2, Stateful: true},
				{ID: "win", Kind: "window", Parallelism: 2, Stateful: true},
			},
		}
	}
	manifest := func() *Manifest {
		return &Manifest{
			Kind: KindCheckpoint, ID: 4, JobID: "orders", JobVersion: 1, FormatVersion: 1, MaxParallelism: 128,
			Operators: []string{"src", "clean", "agg"},
			Tasks: []TaskArtifact{
				{Task: "agg#0", Operators: []string{"agg"}, KeyGroups: job.RangeOf(0, 2, 128)},
				{Task: "agg#1", Operators: []string{"agg"}, Subtask: 1, KeyGroups: job.RangeOf(1, 2, 128)},
			},
		}
	}
	tests := []struct {
		name   string
		change func(m *Manifest, p *job.Plan)
		want   *IncompatibleError // nil: compatible
	}{
		{"same", func(*Manifest, *job.Plan) {}, nil},
		{"new stateful operator in the plan", func(m *Manifest, p *job.Plan) {
			p.Operators = append(p.Operators, job.Operator{ID: "more", Kind: "aggregate", Stateful: true})
		}, nil},
		{"other job version", func(m *Manifest, p *job.Plan) { p.Version = 9 }, nil},
		{"job id", func(m *Manifest, p *job.Plan) { m.JobID = "payments" },
			&IncompatibleError{Field: "job_id", Have: `"payments"`, Want: `"orders"`}},
		{"format version", func(m *Manifest, p *job.Plan) { p.FormatVersion = 2 },
			&IncompatibleError{Field: "format_version", Have: "1", Want: "2"}},
		{"max parallelism", func(m *Manifest, p *job.Plan) { p.MaxParallelism = 256 },
			&IncompatibleError{Field: "max_parallelism", Have: "128", Want: "256"}},
		{"operator removed", func(m *Manifest, p *job.Plan) { p.Operators = p.Operators[:2] },
			&IncompatibleError{Field: "operators", Have: `state of operator "agg"`, Want: `no operator "agg"`}},
		{"operator no longer stateful", func(m *Manifest, p *job.Plan) {
			p.Operators[2] = job.Operator{ID: "agg", Kind: "map"}
		}, &IncompatibleError{Field: "operators", Have: `state of operator "agg"`, Want: `operator "agg" as a stateless map`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, p := manifest(), plan()
			tc.change(m, p)
			err := m.Compatible(p)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Compatible = %v, want nil", err)
				}
				return
			}
			var ie *IncompatibleError
			if !errors.As(err, &ie) {
				t.Fatalf("Compatible = %v, want an *IncompatibleError", err)
			}
			if diff := cmp.Diff(tc.want, ie); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExpiredExamples(t *testing.T) {
	ms := func(ids ...int64) []*Manifest {
		var out []*Manifest
		for _, id := range ids {
			out = append(out, &Manifest{Kind: KindCheckpoint, ID: id})
		}
		return out
	}
	ids := func(ms []*Manifest) []int64 {
		var out []int64
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	tests := []struct {
		in     []int64
		keep   int
		pinned map[int64]bool
		want   []int64
	}{
		{nil, 3, nil, nil},
		{[]int64{1, 2}, 3, nil, nil},
		{[]int64{5, 1, 4, 2, 3}, 2, nil, []int64{1, 2, 3}},
		{[]int64{1, 2, 3, 4, 5}, 2, map[int64]bool{2: true, 5: true}, []int64{1, 3}},
		{[]int64{1, 2, 3}, 0, nil, []int64{1, 2, 3}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.in, tc.keep, tc.pinned), func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ids(Expired(ms(tc.in...), tc.keep, tc.pinned))); diff != "" {
				t.Fatalf("Expired (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExpiredProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ids := rapid.SliceOfNDistinct(rapid.Int64Range(0, 1000), 0, 30, rapid.ID[int64]).Draw(t, "ids")
		keep := rapid.IntRange(0, 10).Draw(t, "keep")
		pinned := map[int64]bool{}
		for _, id := range ids {
			if rapid.Bool().Draw(t, "pin") {
				pinned[id] = true
			}
		}
		var in []*Manifest
		for _, id := range ids {
			in = append(in, &Manifest{Kind: KindCheckpoint, ID: id})
		}
		got := Expired(in, keep, pinned)

		sorted := append([]int64(nil), ids...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
		newest := map[int64]bool{}
		for _, id := range sorted[max(0, len(sorted)-keep):] {
			newest[id] = true
		}
		returned := map[int64]bool{}
		for i, m := range got {
			if pinned[m.ID] {
				t.Fatalf("returned pinned %d", m.ID)
			}
			if newest[m.ID] {
				t.Fatalf("returned %d, one of the newest %d", m.ID, keep)
			}
			if i > 0 && got[i-1].ID >= m.ID {
				t.Fatalf("not oldest first: %d then %d", got[i-1].ID, m.ID)
			}
			returned[m.ID] = true
		}
		for _, id := range ids {
			if !pinned[id] && !newest[id] && !returned[id] {
				t.Fatalf("kept %d, neither pinned nor among the newest %d", id, keep)
			}
		}
	})
}
