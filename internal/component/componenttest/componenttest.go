package componenttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/flowplane/flowplane/internal/component"
)

// Validate checks conf (the component object without "type") against the
// spec's schema and returns the validation error, if any.
func Validate(spec component.Spec, conf map[string]any) error {
	c := jsonschema.NewCompiler()
	sch := map[string]any{"$schema": "https://json-schema.org/draft/2020-12/schema"}
	for k, v := range spec.Schema {
		sch[k] = v
	}
	// A component's schema may refer to another component by kind
	// (#/$defs/component.<kind>: an input's codec, multiple_inputs'
	// children); alone, such a reference accepts any component object.
	defs := map[string]any{}
	if d, ok := sch["$defs"].(map[string]any); ok {
		for k, v := range d {
			defs[k] = v
		}
	}
	for _, k := range component.Kinds {
		if _, ok := defs["component."+string(k)]; !ok {
			defs["component."+string(k)] = map[string]any{"type": "object", "required": []any{"type"}}
		}
	}
	sch["$defs"] = defs
	// Round-trip through JSON so the schema holds only JSON types.
	raw, err := json.Marshal(sch)
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	if err := c.AddResource("spec.json", doc); err != nil {
		return err
	}
	s, err := c.Compile("spec.json")
	if err != nil {
		return fmt.Errorf("schema of %s %q does not compile: %w", spec.Kind, spec.Name, err)
	}
	inst, err := toJSON(conf)
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// Example returns the example of a registered component as a configuration
// map (without "type"), failing the test when the example does not parse,
// names another type, or does not satisfy the schema.
func Example(t testing.TB, reg *component.Registry, kind component.Kind, name string) map[string]any {
	t.Helper()
	spec, ok := reg.Lookup(kind, name)
	if !ok {
		t.Fatalf("%s %q is not registered", kind, name)
	}
	if spec.Summary == "" || spec.Example == "" {
		t.Fatalf("%s %q: spec needs a summary and an example", kind, name)
	}
	var conf map[string]any
	if err := yaml.Unmarshal([]byte(spec.Example), &conf); err != nil {
		t.Fatalf("%s %q: example is not YAML: %v", kind, name, err)
	}
	if conf["type"] != name {
		t.Fatalf("%s %q: example has type %v", kind, name, conf["type"])
	}
	delete(conf, "type")
	if err := Validate(spec, conf); err != nil {
		t.Fatalf("%s %q: example does not satisfy the schema: %v", kind, name, err)
	}
	return conf
}

func toJSON(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}
