package job_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/job"
)

// oneOp is a job src -> x -> out where x is the operator given in YAML
// flow form; it is operators[1].
func oneOp(op string) string {
	return fmt.Sprintf(`
id: j
version: 1
parallelism: 1
max_parallelism: 128
operators:
  - {id: src, kind: source}
  - %s
  - {id: out, kind: sink}
edges: [{from: src, to: x}, {from: x, to: out}]
sources: [{operator_id: src, input_type: memory}]
sinks: [{operator_id: out, output_type: drop}]
`, op)
}

// want is one expected problem: its path and a substring of its message.
type want struct{ path, msg string }

func TestBuildProblems(t *testing.T) {
	const op = "jobs[3].operators[1].config"
	tests := []struct {
		name string
		doc  string
		want []want
	}{
		// map, filter and udf
		{"map without expression", oneOp(`{id: x, kind: map}`), []want{{op + ".expression", "required field is missing"}}},
		{"map empty expression", oneOp(`{id: x, kind: map, config: {expression: " "}}`), []want{{op + ".expression", "must not be empty"}}},
		{"map expression not a string", oneOp(`{id: x, kind: map, config: {expression: 3}}`), []want{{op + ".expression", "must be a string, got an integer"}}},
		{"map expression does not compile", oneOp(`{id: x, kind: map, config: {expression: "this.v +* 2"}}`), []want{{op + ".expression", `unexpected token Operator("*") (1:9)`}}},
		{"map expression names an unknown variable", oneOp(`{id: x, kind: map, config: {expression: "that.v"}}`), []want{{op + ".expression", "unknown name that"}}},
		{"map unknown field", oneOp(`{id: x, kind: map, config: {expresion: this}}`), []want{
			{op + ".expresion", `unknown field; did you mean "expression"?`},
			{op + ".expression", "required field is missing"},
		}},
		{"map unknown field far from any", oneOp(`{id: x, kind: map, config: {expression: this, zzzzzz: 1}}`), []want{{op + ".zzzzzz", "unknown field; known fields: expression"}}},
		{"filter without condition", oneOp(`{id: x, kind: filter, config: {}}`), []want{{op + ".condition", "required field is missing"}}},
		{"filter condition does not compile", oneOp(`{id: x, kind: filter, config: {condition: "this.a =="}}`), []want{{op + ".condition", "unexpected token EOF"}}},
		{"udf without module and function", oneOp(`{id: x, kind: udf, config: {}}`), []want{
			{op + ".function", "required field is missing"},
			{op + ".module", "required field is missing"},
		}},
		{"udf with a stray field", oneOp(`{id: x, kind: udf, config: {module: a.wasm, function: f, entry: g}}`), []want{{op + ".entry", "unknown field"}}},

		// aggregate
		{"aggregate without key", oneOp(`{id: x, kind: aggregate, config: {aggregations: [{name: n, function: count}]}}`), []want{{op + ".key", "required field is missing"}}},
		{"aggregate key does not compile", oneOp(`{id: x, kind: aggregate, config: {key: "this.(", aggregations: []}}`), []want{{op + ".key", "(1:"}}},
		{"aggregations not a list", oneOp(`{id: x, kind: aggregate, config: {key: this.k, aggregations: {name: n}}}`), []want{{op + ".aggregations", "must be an array, got an object"}}},
		{"aggregation not an object", oneOp(`{id: x, kind: aggregate, config: {key: this.k, aggregations: [count]}}`), []want{{op + ".aggregations[0]", "must be an object, got a string"}}},
		{"aggregation unknown function", oneOp(`{id: x, kind: aggregate, config: {key: this.k, aggregations: [{name: n, function: cout}]}}`), []want{{op + ".aggregations[0].function", `"cout" is not one of count, sum, min, max, avg, first, last; did you mean "count"?`}}},
		{"aggregation without function", oneOp(`{id: x, kind: aggregate, config: {key: this.k, aggregations: [{name: n}]}}`), []want{{op + ".aggregations[0].function", "required field is missing"}}},
		{"sum without expression", oneOp(`{id: x, kind: aggregate, config: {key: this.k, aggregations: [{name: n, function: sum}]}}`), []want{{op + ".aggregations[0].expression", "sum needs the expression it aggregates"}}},
		{"count with expression", oneOp(`{id: x, kind: aggregate, config: {key: this.k, aggregations: [{name: n, function: count, expression: this.v}]}}`), []want{{op + ".aggregations[0].expression", "count counts records and takes no expression"}}},
		{"aggregation expression does not compile", oneOp(`{id: x, kind: aggregate, config: {key: this.k, aggregations: [{name: n, function: max, expression: "this.v +"}]}}`), []want{{op + ".aggregations[0].expression", "unexpected token EOF"}}},
		{"aggregation without name", oneOp(`{id: x, kind: aggregate, config: {key: this.k, aggregations: [{function: count}]}}`), []want{{op + ".aggregations[0].name", "required field is missing"}}},
		{"aggregation with empty name", oneOp(`{id: x, kind: aggregate, config: {key: this.k, aggregations: [{name: "", function: count}]}}`), []want{{op + ".aggregations[0].name", "must not be empty"}}},
		{"duplicate aggregation names", oneOp(`{id: x, kind: aggregate, config: {key: this.k, aggregations: [{name: n, function: count}, {name: n, function: last, expression: this.v}]}}`), []want{{op + ".aggregations[1].name", `duplicate aggregation name "n" (also jobs[3].operators[1].config.aggregations[0])`}}},
		{"aggregation named key", oneOp(`{id: x, kind: aggregate, config: {key: this.k, aggregations: [{name: key, function: count}]}}`), []want{{op + ".aggregations[0].name", `"key" is a result field of its own`}}},
		{"aggregation named window_end", oneOp(`{id: x, kind: window, config: {key: this.k, window: {type: tumbling, size_ms: 1}, aggregations: [{name: window_end, function: count}]}}`), []want{{op + ".aggregations[0].name", `"window_end" is a result field`}}},
		{"aggregation unknown field", oneOp(`{id: x, kind: aggregate, config: {key: this.k, aggregations: [{name: n, function: count, as: m}]}}`), []want{{op + ".aggregations[0].as", "unknown field"}}},

		// window
		{"window without window", oneOp(`{id: x, kind: window, config: {key: this.k}}`), []want{{op + ".window", "required field is missing"}}},
		{"window not an object", oneOp(`{id: x, kind: window, config: {key: this.k, window: tumbling}}`), []want{{op + ".window", "must be an object, got a string"}}},
		{"window without type", oneOp(`{id: x, kind: window, config: {key: this.k, window: {size_ms: 10}}}`), []want{{op + ".window.type", "required field is missing"}}},
		{"window unknown type", oneOp(`{id: x, kind: window, config: {key: this.k, window: {type: tumbling2, size_ms: 10}}}`), []want{{op + ".window.type", `"tumbling2" is not one of tumbling, sliding, session; did you mean "tumbling"?`}}},
		{"tumbling without size", oneOp(`{id: x, kind: window, config: {key: this.k, window: {type: tumbling}}}`), []want{{op + ".window.size_ms", "a tumbling window needs size_ms > 0"}}},
		{"tumbling size zero", oneOp(`{id: x, kind: window, config: {key: this.k, window: {type: tumbling, size_ms: 0}}}`), []want{{op + ".window.size_ms", "must be > 0, got 0"}}},
		{"tumbling size negative", oneOp(`{id: x, kind: window, config: {key: this.k, window: {type: tumbling, size_ms: -5}}}`), []want{{op + ".window.size_ms", "must be > 0, got -5"}}},
		{"size not an integer", oneOp(`{id: x, kind: window, config: {key: this.k, window: {type: tumbling, size_ms: 1.5}}}`), []want{{op + ".window.size_ms", "must be an integer, got a number"}}},
		{"size a string", oneOp(`{id: x, kind: window, config: {key: this.k, window: {type: tumbling, size_ms: 10s}}}`), []want{{op + ".window.size_ms", "must be an integer, got a string"}}},
		{"tumbling with slide and gap", oneOp(`{id: x, kind: window, config: {key: this.k, window: {type: tumbling, size_ms: 10, slide_ms: 5, gap_ms: 1}}}`), []want{
			{op + ".window.gap_ms", "does not apply to a tumbling window"},
			{op + ".window.slide_ms", "does not apply to a tumbling window"},
		}},
		{"sliding without slide", oneOp(`{id: x, kind: window, config: {key: this.k, window: {type: sliding, size_ms: 10}}}`), []want{{op + ".window.slide_ms", "a sliding window needs slide_ms > 0"}}},
		{"sliding slide beyond size", oneOp(`{id: x, kind: window, config: {key: this.k, window: {type: sliding, size_ms: 10, slide_ms: 11}}}`), []want{{op + ".window.slide_ms", "must not exceed size_ms (10), got 11"}}},
		{"sliding with gap", oneOp(`{id: x, kind: window, config: {key: this.k, window: {type: sliding, size_ms: 10, slide_ms: 3, gap_ms: 1}}}`), []want{{op + ".window.gap_ms", "does not apply to a sliding window"}}},
		{"session without gap", oneOp(`{id: x, kind: window, config: {key: this.k, window: {type: session}}}`), []want{{op + ".window.gap_ms", "a session window needs gap_ms > 0"}}},
		{"session with size", oneOp(`{id: x, kind: window, config: {key: this.k, window: {type: session, gap_ms: 5, size_ms: 10}}}`), []want{{op + ".window.size_ms", "does not apply to a session window"}}},
		{"window stray field", oneOp(`{id: x, kind: window, config: {key: this.k, window: {type: session, gap_ms: 5, gap_m: 1}}}`), []want{{op + ".window.gap_m", `unknown field; did you mean "gap_ms"?`}}},

		// source and sink
		{"source with config", strings.Replace(oneOp(`{id: x, kind: map, config: {expression: this}}`), "{id: src, kind: source}", "{id: src, kind: source, config: {count: 1}}", 1), []want{{"jobs[3].operators[0].config", "a source operator takes no config: its component's settings go in sources[].config"}}},
		{"sink with config", strings.Replace(oneOp(`{id: x, kind: map, config: {expression: this}}`), "{id: out, kind: sink}", "{id: out, kind: sink, config: {path: a}}", 1), []want{{"jobs[3].operators[2].config", "sinks[].config"}}},

		// edges and parallelism
		{"partitioned edge into a map", strings.Replace(oneOp(`{id: x, kind: map, config: {expression: this}}`), "{from: src, to: x}", "{from: src, to: x, partitioned: true}", 1), []want{{"jobs[3].edges[0].partitioned", `"x" is a map operator, which has no key`}}},
		{"keyed operator at parallelism 2 without partitioned edge", oneOp(`{id: x, kind: aggregate, parallelism: 2, config: {key: this.k}}`), []want{{"jobs[3].edges[0]", `"x" is a keyed aggregate operator at parallelism 2: every edge into it must be partitioned: true`}}},
		{"parallelism beyond max_parallelism", oneOp(`{id: x, kind: map, parallelism: 129, config: {expression: this}}`), []want{{"jobs[3].operators[1].parallelism", "129 exceeds max_parallelism 128"}}},
		{"job parallelism beyond max_parallelism", strings.Replace(oneOp(`{id: x, kind: map, parallelism: 1, config: {expression: this}}`), "parallelism: 1\nmax_parallelism: 128", "parallelism: 2\nmax_parallelism: 1", 1), []want{
			{"jobs[3].parallelism", "2 exceeds max_parallelism 1"},
		}},
		{"max_parallelism out of range", strings.Replace(oneOp(`{id: x, kind: map, config: {expression: this}}`), "max_parallelism: 128", "max_parallelism: 40000", 1), []want{{"jobs[3].max_parallelism", "must be between 1 and 32768, got 40000"}}},
		{"edge into a source", strings.Replace(oneOp(`{id: x, kind: map, config: {expression: this}}`), "{from: x, to: out}", "{from: x, to: out}, {from: x, to: src}", 1), []want{
			{"jobs[3].edges", "the operator graph must be acyclic"},
			{"jobs[3].edges[2].to", `"src" is a source operator and has no inputs`},
		}},
		{"edge out of a sink", strings.Replace(oneOp(`{id: x, kind: map, config: {expression: this}}`), "{from: x, to: out}", "{from: x, to: out}, {from: out, to: x}", 1), []want{
			{"jobs[3].edges", "the operator graph must be acyclic"},
			{"jobs[3].edges[2].from", `"out" is a sink operator and has no outputs`},
		}},
		{"edge to nowhere", strings.Replace(oneOp(`{id: x, kind: map, config: {expression: this}}`), "{from: x, to: out}", "{from: x, to: nowhere}", 1), []want{{"jobs[3].edges[1].to", `no operator "nowhere" in this job`}}},
		{"duplicate operator", strings.Replace(oneOp(`{id: x, kind: map, config: {expression: this}}`), "{id: out, kind: sink}", "{id: out, kind: sink}\n  - {id: x, kind: filter}", 1), []want{{"jobs[3].operators[3].id", `duplicate operator id "x"`}}},
		{"duplicate edge", strings.Replace(oneOp(`{id: x, kind: map, config: {expression: this}}`), "{from: x, to: out}", "{from: x, to: out}, {from: x, to: out}", 1), []want{{"jobs[3].edges[2].id", `duplicate edge id "x->out"`}}},
		{"unknown kind", oneOp(`{id: x, kind: mapp}`), []want{{"jobs[3].operators[1].kind", `unknown operator kind "mapp"`}}},
		{"unbound source", strings.Replace(oneOp(`{id: x, kind: map, config: {expression: this}}`), "sources: [{operator_id: src, input_type: memory}]", "sources: []", 1), []want{{"jobs[3].operators[0]", `source operator "src" has no entry in sources`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ps := job.Build("jobs[3]", decodeJob(t, tt.doc))
			config.SortProblems(ps)
			var got []want
			for _, pr := range ps {
				got = append(got, want{pr.Path, pr.Message})
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(got), len(tt.want), ps)
			}
			for i, w := range tt.want {
				if got[i].path != w.path || !strings.Contains(got[i].msg, w.msg) {
					t.Errorf("problem %d = %s: %s\nwant %s: ...%s...", i, got[i].path, got[i].msg, w.path, w.msg)
				}
			}
			if p != nil {
				t.Error("a plan with problems")
			}
		})
	}
}
