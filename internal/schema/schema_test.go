package schema_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/schema"
)

type inner struct {
	N    int    `json:"n" min:"1" default:"1" doc:"A count."`
	Mode string `json:"mode" enum:"a|b" default:"a"`
}

type root struct {
	Name  string              `json:"name" required:"true" doc:"The name."`
	In    inner               `json:"inner"`
	Items []inner             `json:"items,omitempty"`
	Comp  *struct{ X string } `json:"comp,omitempty" component:"processor"`
	Skip  string              `json:"-"`
}

func testRegistry() *component.Registry {
	reg := component.NewRegistry()
	reg.RegisterProcessor(component.Spec{
		Name: "json", Summary: "Parses JSON.",
		Schema:  map[string]any{"type": "object", "properties": map[string]any{"operation": map[string]any{"type": "string", "enum": []any{"parse", "serialize"}, "description": "What to do."}}},
		Example: "type: json",
	}, func(map[string]any, component.Resources) (component.Processor, error) { return nil, nil })
	return reg
}

func validate(t *testing.T, doc string) []schema.Problem {
	t.Helper()
	v, err := schema.Compile(schema.Generate(reflect.TypeFor[root](), testRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	var tree any
	if err := json.Unmarshal([]byte(doc), &tree); err != nil {
		t.Fatal(err)
	}
	return v.Validate(tree)
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []schema.Problem
	}{
		{"valid", `{"name": "x", "inner": {"n": 2}, "comp": {"type": "json", "operation": "parse"}}`, nil},
		{"missing required", `{}`, []schema.Problem{{Path: "name", Message: "required field is missing"}}},
		{"unknown field with suggestion", `{"name": "x", "inner": {"mod": "a"}}`, []schema.Problem{{Path: "inner.mod", Message: `unknown field; did you mean "mode"?`}}},
		{"unknown field far from any", `{"name": "x", "zzzzzzzz": 1}`, []schema.Problem{{Path: "zzzzzzzz", Message: "unknown field"}}},
		{"removed field hint", `{"name": "x", "hub_url": "h"}`, []schema.Problem{{Path: "hub_url", Message: schema.Removed["hub_url"]}}},
		{"array index path", `{"name": "x", "items": [{"n": 1}, {"mode": "c"}]}`, []schema.Problem{{Path: "items[1].mode", Message: `"c" is not one of a, b`}}},
		{"unknown component", `{"name": "x", "comp": {"type": "jsno"}}`, []schema.Problem{{Path: "comp.type", Message: `unknown processor "jsno"; did you mean "json"?`}}},
		{"component field", `{"name": "x", "comp": {"type": "json", "operation": "parsee"}}`, []schema.Problem{{Path: "comp.operation", Message: `"parsee" is not one of parse, serialize; did you mean "parse"?`}}},
		{"component unknown field", `{"name": "x", "comp": {"type": "json", "operaton": "parse"}}`, []schema.Problem{{Path: "comp.operaton", Message: `unknown field; did you mean "operation"?`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, validate(t, tt.doc)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
	// Messages of kinds without special wording still carry the path.
	ps := validate(t, `{"name": 3, "inner": {"n": 0}}`)
	if len(ps) != 2 || ps[0].Path != "inner.n" || ps[1].Path != "name" || !strings.Contains(ps[1].Message, "string") {
		t.Errorf("problems = %v", ps)
	}
}

func TestGenerateDefaultsAndDescriptions(t *testing.T) {
	doc := schema.Generate(reflect.TypeFor[root](), testRegistry())
	defs := doc["$defs"].(map[string]any)
	in := defs["inner"].(map[string]any)["properties"].(map[string]any)
	if got := in["n"].(map[string]any); got["default"] != 1 || got["minimum"] != 1 || got["description"] != "A count." {
		t.Errorf("inner.n = %v", got)
	}
	if _, ok := doc["properties"].(map[string]any)["Skip"]; ok {
		t.Error(`json:"-" field in schema`)
	}
	if defs["processor.json"] == nil || defs["component.processor"] == nil {
		t.Errorf("component defs missing: %v", defs)
	}
}

func TestPath(t *testing.T) {
	for in, want := range map[string]string{
		"":                   "",
		"streams":            "streams",
		"streams/1/pipeline": "streams[1].pipeline",
		"a/0/1/b":            "a[0][1].b",
	} {
		var elems []string
		if in != "" {
			elems = strings.Split(in, "/")
		}
		if got := schema.Path(elems); got != want {
			t.Errorf("Path(%q) = %q, want %q", in, got, want)
		}
	}
}
