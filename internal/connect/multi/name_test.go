package multi_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/message"
)

func named(name string, in map[string]any) map[string]any {
	in["name"] = name
	return in
}

// TestNames: a named child's messages carry input_name besides
// input_index; an unnamed child's carry input_index only.
func TestNames(t *testing.T) {
	in := build(t, named("orders", memory("o1", "o2", "o3")), memory("x"), named("shipments", memory("s1")))
	if err := in.Connect(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	type row struct {
		Payload string
		Fields  map[string]string
	}
	var got []row
	for {
		b, ack, err := in.Read(testCtx(t))
		if errors.Is(err, message.ErrEndOfInput) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range b.Messages {
			got = append(got, row{payload(t, m), m.Meta.Fields})
		}
		if err := ack(testCtx(t), nil); err != nil {
			t.Fatal(err)
		}
	}
	slices.SortFunc(got, func(a, b row) int { return strings.Compare(a.Payload, b.Payload) })
	want := []row{
		{"o1", map[string]string{"input_index": "0", "input_name": "orders"}},
		{"o2", map[string]string{"input_index": "0", "input_name": "orders"}},
		{"o3", map[string]string{"input_index": "0", "input_name": "orders"}},
		{"s1", map[string]string{"input_index": "2", "input_name": "shipments"}},
		{"x", map[string]string{"input_index": "1"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

// TestNameErrors: every rule on names, from the constructor and from
// --validate, named by its path.
func TestNameErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inputs []any
		want   string
	}{
		{"not a string", []any{named("x", memory()), map[string]any{"type": "memory", "messages": []any{}, "name": 3}},
			"inputs[1].name: must be a string"},
		{"not an identifier", []any{named("order-lines", memory())},
			`inputs[0].name: "order-lines" is not a name (letters, digits and _, not starting with a digit, at most 128)`},
		{"empty", []any{named("", memory())}, `inputs[0].name: "" is not a name (letters, digits and _, not starting with a digit, at most 128)`},
		{"duplicate", []any{named("a", memory()), memory(), named("a", memory())},
			`inputs[2].name: duplicate name "a" (also inputs[0])`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := component.Default.NewInput("multiple_inputs", map[string]any{"inputs": tc.inputs}, component.Resources{})
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ input, want string }{
		{`{type: multiple_inputs, inputs: [{type: memory, name: 3, messages: []}]}`,
			"streams[0].input.inputs[0].name: got number, want string"},
		{`{type: multiple_inputs, inputs: [{type: memory, name: a, messages: [], nope: 1}]}`,
			`streams[0].input.inputs[0].nope: unknown field`},
		{`{type: multiple_inputs, inputs: [{type: multiple_inputs, name: outer, inputs: [{type: memory, name: inner, batch_size: 0, messages: []}]}]}`,
			"streams[0].input.inputs[0].inputs[0].batch_size:"},
	} {
		_, err := componenttest.Materialize(`streams:
  - input: ` + tc.input + `
    pipeline: {processors: []}
    output: {type: drop}
`)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want exactly one starting %q", tc.input, err, tc.want)
		}
	}
	// Named children validate and build; the document keeps the names.
	cfg, err := componenttest.Materialize(`streams:
  - input: {type: multiple_inputs, inputs: [{type: memory, name: a, messages: [x]}, {type: generate, name: b, context: x, count: 1}]}
    pipeline: {processors: []}
    output: {type: drop}
`)
	if err != nil {
		t.Fatal(err)
	}
	if ps := engine.Check(cfg, component.Default); len(ps) > 0 {
		t.Errorf("deep build: %v", ps)
	}
	kids := cfg.Streams[0].Input.Fields["inputs"].([]any)
	if got := []any{kids[0].(map[string]any)["name"], kids[1].(map[string]any)["name"]}; !cmp.Equal(got, []any{"a", "b"}) {
		t.Errorf("names in the configuration: %v", got)
	}
}
