package job

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/config"
)

func TestTypeCheck(t *testing.T) {
	spec := func(ops ...config.Operator) config.Job {
		all := append([]config.Operator{{ID: "src", Kind: "source"}}, ops...)
		all = append(all, config.Operator{ID: "out", Kind: "sink"})
		var edges []config.Edge
		for i := 1; i < len(all); i++ {
			edges = append(edges, config.Edge{From: all[i-1].ID, To: all[i].ID})
		}
		return config.Job{
			ID: "j", Version: 1, Parallelism: 1, MaxParallelism: 128, Recovery: "latest_checkpoint",
			Operators: all, Edges: edges,
			Sources: []config.Source{{OperatorID: "src", InputType: "generate"}},
			Sinks:   []config.Sink{{OperatorID: "out", OutputType: "drop"}},
			State:   &config.JobState{Backend: "embedded_kv", Durability: "ephemeral", FormatVersion: 1, MaxPendingTransactions: 1},
		}
	}
	mapOp := func(id, e string) config.Operator {
		return config.Operator{ID: id, Kind: "map", Config: map[string]any{"expression": e}}
	}
	agg := config.Operator{ID: "agg", Kind: "aggregate", Config: map[string]any{
		"key": "this.user", "aggregations": []any{map[string]any{"name": "s", "function": "sum", "expression": "this.m"}},
	}}
	sample := map[string]any{"n": float64(3), "user": "u1"}
	tests := []struct {
		name    string
		job     config.Job
		samples map[string]any
		errs    []config.Problem
		warns   []config.Problem
	}{
		{"modulo of a JSON number", spec(mapOp("mod", `merge(this, {"m": this.n % 7})`)), map[string]any{"src": sample},
			[]config.Problem{{Path: "jobs[0].operators[1].config.expression", Message: `invalid operation: % (mismatched types float64 and int) (1:26)
 | merge(this, {"m": this.n % 7})
 | .........................^ (checked against the records this operator receives, for example {"n":3,"user":"u1"})`}}, nil},
		{"converted first, then a field the map made", spec(
			config.Operator{ID: "some", Kind: "filter", Config: map[string]any{"condition": `this.user != ""`}},
			mapOp("mod", `merge(this, {"m": int(this.n) % 7})`), agg), map[string]any{"src": sample}, nil, nil},
		{"a field the map made, misused", spec(mapOp("mod", `merge(this, {"m": "x" + this.user})`),
			config.Operator{ID: "half", Kind: "map", Config: map[string]any{"expression": `this.m / 2`}}),
			map[string]any{"src": sample},
			[]config.Problem{{Path: "jobs[0].operators[2].config.expression"}}, nil},
		{"unknown shape warns", spec(mapOp("mod", `this.n % 7`)), nil, nil,
			[]config.Problem{{Path: "jobs[0].operators[1].config"}}},
		{"after an aggregate the shape is unknown", spec(agg, mapOp("after", `this.s % 2`)), map[string]any{"src": sample}, nil,
			[]config.Problem{{Path: "jobs[0].operators[2].config"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ps := Build("jobs[0]", tt.job)
			if len(ps) > 0 {
				t.Fatal(ps)
			}
			errs, warns := TypeCheck("jobs[0]", tt.job, p, tt.samples)
			// Messages are compared where the test gives one.
			trim := func(got, want []config.Problem) []config.Problem {
				if len(got) == 0 {
					return nil
				}
				out := make([]config.Problem, len(got))
				for i, g := range got {
					out[i] = g
					if i < len(want) && want[i].Message == "" {
						out[i].Message = ""
					}
				}
				return out
			}
			if diff := cmp.Diff(tt.errs, trim(errs, tt.errs)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.warns, trim(warns, tt.warns)); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}
