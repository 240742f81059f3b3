package schema_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/schema"
)

// jobWithOp is a configuration whose job has src -> op -> out, op given in
// JSON; op is jobs[0].operators[1].
func jobWithOp(op string) string {
	return fmt.Sprintf(`{"streams": [], "jobs": [{"id": "j", "version": 1, "operators": [
		{"id": "src", "kind": "source"}, %s, {"id": "out", "kind": "sink"}],
		"edges": [{"from": "src", "to": "x"}, {"from": "x", "to": "out"}]}]}`, op)
}

func TestOperatorConfigSchema(t *testing.T) {
	v, err := schema.Compile(schema.Generate(reflect.TypeFor[config.Config](), component.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	const at = "jobs[0].operators[1].config"
	tests := []struct {
		name string
		op   string
		want []schema.Problem
	}{
		{"map", `{"id": "x", "kind": "map", "config": {"expression": "this"}}`, nil},
		{"map without config", `{"id": "x", "kind": "map"}`, nil}, // the plan reports it
		{"map unknown field", `{"id": "x", "kind": "map", "config": {"expresion": "this"}}`, []schema.Problem{
			{Path: at + ".expresion", Message: `unknown field; did you mean "expression"?`},
			{Path: at + ".expression", Message: "required field is missing"},
		}},
		{"filter", `{"id": "x", "kind": "filter", "config": {"condition": "this.ok"}}`, nil},
		{"filter condition not a string", `{"id": "x", "kind": "filter", "config": {"condition": true}}`, []schema.Problem{
			{Path: at + ".condition", Message: "got boolean, want string"},
		}},
		{"aggregate", `{"id": "x", "kind": "aggregate", "config": {"key": "this.k", "aggregations": [{"name": "n", "function": "count"}, {"name": "s", "function": "sum", "expression": "this.v"}]}}`, nil},
		{"aggregate sum without expression", `{"id": "x", "kind": "aggregate", "config": {"key": "this.k", "aggregations": [{"name": "s", "function": "sum"}]}}`, []schema.Problem{
			{Path: at + ".aggregations[0].expression", Message: "required field is missing"},
		}},
		{"aggregate count with expression", `{"id": "x", "kind": "aggregate", "config": {"key": "this.k", "aggregations": [{"name": "n", "function": "count", "expression": "this.v"}]}}`, []schema.Problem{
			{Path: at + ".aggregations[0].expression", Message: "field not allowed here"},
		}},
		{"aggregate unknown function", `{"id": "x", "kind": "aggregate", "config": {"key": "this.k", "aggregations": [{"name": "n", "function": "cout"}]}}`, []schema.Problem{
			{Path: at + ".aggregations[0].expression", Message: "required field is missing"},
			{Path: at + ".aggregations[0].function", Message: `"cout" is not one of count, sum, min, max, avg, first, last; did you mean "count"?`},
		}},
		{"window", `{"id": "x", "kind": "window", "config": {"key": "this.k", "window": {"type": "sliding", "size_ms": 10, "slide_ms": 5}}}`, nil},
		{"window without size", `{"id": "x", "kind": "window", "config": {"key": "this.k", "window": {"type": "tumbling"}}}`, []schema.Problem{
			{Path: at + ".window.size_ms", Message: "required field is missing"},
		}},
		{"window size zero and a gap", `{"id": "x", "kind": "window", "config": {"key": "this.k", "window": {"type": "tumbling", "size_ms": 0, "gap_ms": 5}}}`, []schema.Problem{
			{Path: at + ".window.gap_ms", Message: "field not allowed here"},
			{Path: at + ".window.size_ms", Message: "minimum: got 0, want 1"},
		}},
		{"window without window", `{"id": "x", "kind": "window", "config": {"key": "this.k"}}`, []schema.Problem{
			{Path: at + ".window", Message: "required field is missing"},
		}},
		{"udf", `{"id": "x", "kind": "udf", "config": {"module": "m.wasm", "function": "f"}}`, nil},
		{"udf without function", `{"id": "x", "kind": "udf", "config": {"module": "m.wasm"}}`, []schema.Problem{
			{Path: at + ".function", Message: "required field is missing"},
		}},
		{"source with config", `{"id": "x", "kind": "source", "config": {"count": 1}}`, []schema.Problem{
			{Path: at, Message: "field not allowed here"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tree any
			if err := json.Unmarshal([]byte(jobWithOp(tt.op)), &tree); err != nil {
				t.Fatal(err)
			}
			got := v.Validate(tree)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOperatorConfigExamples: every kind's config schema has an example,
// and the example is valid.
func TestOperatorConfigExamples(t *testing.T) {
	doc := schema.Generate(reflect.TypeFor[config.Config](), component.NewRegistry())
	v, err := schema.Compile(doc)
	if err != nil {
		t.Fatal(err)
	}
	defs := doc["$defs"].(map[string]any)
	for _, kind := range []string{"map", "filter", "aggregate", "window", "udf"} {
		d, _ := defs["operator."+kind].(map[string]any)
		ex, _ := d["examples"].([]any)
		if len(ex) == 0 {
			t.Errorf("operator.%s has no example", kind)
			continue
		}
		b, _ := json.Marshal(map[string]any{"id": "x", "kind": kind, "config": ex[0]})
		var tree any
		if err := json.Unmarshal([]byte(jobWithOp(string(b))), &tree); err != nil {
			t.Fatal(err)
		}
		if ps := v.Validate(tree); len(ps) > 0 {
			t.Errorf("operator.%s example: %v", kind, ps)
		}
		if !strings.Contains(fmt.Sprint(d["description"]), kind) {
			t.Errorf("operator.%s description = %v", kind, d["description"])
		}
	}
}
