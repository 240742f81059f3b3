package job_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/job"
)

// twoSources is a job a, b -> u (a union map) -> w (a window) -> out, with
// late -> a sink for late events; timeA and timeB are the sources' time
// objects in YAML flow form ("" for none).
func twoSources(timeA, timeB string) string {
	ta, tb := "", ""
	if timeA != "" {
		ta = ", time: " + timeA
	}
	if timeB != "" {
		tb = ", time: " + timeB
	}
	return fmt.Sprintf(`
id: j
version: 1
parallelism: 1
max_parallelism: 128
operators:
  - {id: late, kind: sink}
  - {id: a, kind: source}
  - {id: b, kind: source}
  - {id: u, kind: map, config: {expression: this}}
  - {id: w, kind: window, config: {key: this.k, window: {type: tumbling, size_ms: 1000}}}
  - {id: out, kind: sink}
edges: [{from: a, to: u}, {from: b, to: u}, {from: u, to: w}, {from: w, to: out}]
sources:
  - {operator_id: a, input_type: memory%s}
  - {operator_id: b, input_type: memory%s}
sinks: [{operator_id: out, output_type: drop}, {operator_id: late, output_type: drop}]
`, ta, tb)
}

const (
	eventTime = `{mode: event_time, timestamp_field: ts, watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: 10}}`
	routeLate = `{mode: event_time, timestamp_field: ts, late_event_policy: route, late_event_route: %s}`
)

func TestBuildTimeProblems(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []want
	}{
		{"sources with different time", twoSources(eventTime, `{mode: processing_time}`), []want{{"jobs[0].operators[3]", `operator "u" has sources "a" and "b" upstream whose time declarations (sources[].time) differ`}}},
		{"one source without time", twoSources(eventTime, ""), []want{{"jobs[0].operators[3]", `sources "a" and "b"`}}},
		{"late route is a source", twoSources(fmt.Sprintf(routeLate, "b"), fmt.Sprintf(routeLate, "b")), []want{
			{"jobs[0].sources[0].time.late_event_route", `"b" is a source operator and cannot receive late events`},
			{"jobs[0].sources[1].time.late_event_route", `"b" is a source operator and cannot receive late events`},
		}},
		{"late route upstream of the window", twoSources(fmt.Sprintf(routeLate, "u"), fmt.Sprintf(routeLate, "u")), []want{
			{"jobs[0].sources[0].time.late_event_route", `late events of window "w" cannot go to "u": it is upstream of (or is) the window`},
			{"jobs[0].sources[1].time.late_event_route", `late events of window "w" cannot go to "u"`},
		}},
		{"late route is the window", twoSources(fmt.Sprintf(routeLate, "w"), ""), []want{
			{"jobs[0].operators[3]", `sources "a" and "b"`},
			{"jobs[0].sources[0].time.late_event_route", `late events of window "w" cannot go to "w"`},
		}},
		{"late route to nowhere", twoSources(fmt.Sprintf(routeLate, "nope"), fmt.Sprintf(routeLate, "nope")), []want{
			{"jobs[0].sources[0].time.late_event_route", `no operator "nope" in this job`},
			{"jobs[0].sources[1].time.late_event_route", `no operator "nope" in this job`},
		}},
		{"late route missing", twoSources(`{mode: event_time, late_event_policy: route}`, `{mode: event_time, late_event_policy: route}`), []want{
			{"jobs[0].sources[0].time.late_event_route", "late_event_policy route needs late_event_route"},
			{"jobs[0].sources[1].time.late_event_route", "late_event_policy route needs late_event_route"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ps := job.Build("jobs[0]", decodeJob(t, tt.doc))
			config.SortProblems(ps)
			if len(ps) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(tt.want), ps)
			}
			for i, w := range tt.want {
				if ps[i].Path != w.path || !strings.Contains(ps[i].Message, w.msg) {
					t.Errorf("problem %d = %s: %s\nwant %s: ...%s...", i, ps[i].Path, ps[i].Message, w.path, w.msg)
				}
			}
			if p != nil {
				t.Error("a plan with problems")
			}
		})
	}
}

func TestBuildTimeInheritance(t *testing.T) {
	p, ps := job.Build("jobs[0]", decodeJob(t, twoSources(fmt.Sprintf(routeLate, "late"), fmt.Sprintf(routeLate, "late"))))
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	want := &job.TimePolicy{Mode: "event_time", TimestampField: "ts", LatePolicy: "route", LateRoute: "late"}
	for _, op := range p.Operators {
		if diff := cmp.Diff(want, op.Time); diff != "" {
			t.Errorf("%s time (-want +got):\n%s", op.ID, diff)
		}
	}
	// One late edge, though both sources route: w -> late, and late, the
	// first operator configured, comes after w in the plan.
	var ids []string
	for _, op := range p.Operators {
		ids = append(ids, op.ID)
	}
	if diff := cmp.Diff([]string{"a", "b", "u", "w", "late", "out"}, ids); diff != "" {
		t.Errorf("operator order (-want +got):\n%s", diff)
	}
	late := job.Edge{ID: "w->late->late", From: "w", To: "late", Mode: job.Late}
	if diff := cmp.Diff(late, p.Edges[len(p.Edges)-1]); diff != "" || len(p.Edges) != 5 {
		t.Errorf("late edge (-want +got):\n%s\nedges: %+v", diff, p.Edges)
	}
	if lo := p.Operator("late"); !cmp.Equal(lo.Inputs, []int{4}) || lo.Chain != "late" {
		t.Errorf("late operator = %+v", lo)
	}
	if w := p.Operator("w"); !cmp.Equal(w.Outputs, []int{3, 4}) {
		t.Errorf("w outputs = %v: the late edge counts as an output but does not break the w -> out chain", w.Outputs)
	}
	if !p.Edges[3].Chained {
		t.Error("w -> out is not chained: the late edge must not count against chaining")
	}

	// A source without time and one declaring processing time with the
	// defaults agree.
	defaults := `{mode: processing_time, watermark: {strategy: bounded_out_of_orderness}, late_event_policy: drop}`
	if _, ps := job.Build("jobs[0]", decodeJob(t, twoSources("", defaults))); len(ps) > 0 {
		t.Errorf("no time and default processing time: %v", ps)
	}

	// Processing time everywhere: no time policy downstream either.
	p, ps = job.Build("jobs[0]", decodeJob(t, twoSources("", "")))
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	for _, op := range p.Operators {
		if op.Time != nil {
			t.Errorf("%s time = %+v, want nil", op.ID, op.Time)
		}
	}
}
