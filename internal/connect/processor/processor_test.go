package processor_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/connect/processor"
	"github.com/flowplane/flowplane/internal/message"
)

func build(t *testing.T, name string, conf map[string]any) component.Processor {
	t.Helper()
	p, err := component.Default.NewProcessor(name, conf, component.Resources{})
	if err != nil {
		t.Fatalf("NewProcessor(%s, %v): %v", name, conf, err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

func batchOf(payloads ...string) message.Batch {
	b := message.Batch{Messages: make([]message.Message, len(payloads))}
	for i, p := range payloads {
		b.Messages[i] = message.New([]byte(p))
	}
	return b
}

// values returns the structured value of every message of every batch.
func values(t *testing.T, bs []message.Batch) []any {
	t.Helper()
	var out []any
	for _, b := range bs {
		for i := range b.Messages {
			v, err := b.Messages[i].Structured()
			if err != nil {
				t.Fatalf("Structured: %v", err)
			}
			out = append(out, v)
		}
	}
	return out
}

func payloadsOf(t *testing.T, bs []message.Batch) []string {
	t.Helper()
	var out []string
	for _, b := range bs {
		for i := range b.Messages {
			p, err := b.Messages[i].Payload()
			if err != nil {
				t.Fatalf("Payload: %v", err)
			}
			out = append(out, string(p))
		}
	}
	return out
}

// TestExamples builds every processor from its documented example and runs
// it over a batch.
func TestExamples(t *testing.T) {
	for _, name := range []string{"json", "mapping", "filter", "batch", "log"} {
		t.Run(name, func(t *testing.T) {
			conf := componenttest.Example(t, component.Default, component.KindProcessor, name)
			p := build(t, name, conf)
			in := batchOf(`{"id": 1, "v": 600000}`, `{"id": 2, "v": 10}`)
			m := &in.Messages[0]
			m.SetMeta("source", "test")
			out, err := p.Process(context.Background(), in)
			if err != nil {
				t.Fatalf("Process: %v", err)
			}
			if n := len(values(t, out)); n == 0 {
				t.Errorf("Process returned no messages")
			}
		})
	}
}

func TestMapping(t *testing.T) {
	tests := []struct {
		name string
		expr string
		in   []message.Message
		want []any
		err  string // substring of the error; "" for success
	}{
		{
			name: "merge adds a field",
			expr: `merge(this, {"w": this.v * 2})`,
			in:   []message.Message{message.New([]byte(`{"id": 1, "v": 2}`))},
			want: []any{map[string]any{"id": 1.0, "v": 2.0, "w": 4.0}},
		},
		{
			name: "merge of several literal fields and a nested object",
			expr: `merge(this, {"a": upper(this.s), "n": {"x": 1}})`,
			in:   []message.Message{message.New([]byte(`{"s": "hi"}`))},
			want: []any{map[string]any{"s": "hi", "a": "HI", "n": map[string]any{"x": 1}}},
		},
		{
			name: "merge of two objects, later wins",
			expr: `merge(this, this.patch)`,
			in:   []message.Message{message.New([]byte(`{"a": 1, "patch": {"a": 2}}`))},
			want: []any{map[string]any{"a": 2.0, "patch": map[string]any{"a": 2.0}}},
		},
		{
			name: "merge nested in the result copies",
			expr: `{"old": this, "new": merge(this, {"b": 2})}`,
			in:   []message.Message{message.New([]byte(`{"a": 1}`))},
			want: []any{map[string]any{
				"old": map[string]any{"a": 1.0},
				"new": map[string]any{"a": 1.0, "b": 2},
			}},
		},
		{
			name: "object holding this is not a cycle",
			expr: `merge(this, {"self": this})`,
			in:   []message.Message{message.New([]byte(`{"a": 1}`))},
			want: []any{map[string]any{"a": 1.0, "self": map[string]any{"a": 1.0}}},
		},
		{
			name: "merge inside a closure sees the original each time",
			expr: `map([1, 2], merge(this, {"i": #}))`,
			in:   []message.Message{message.New([]byte(`{"a": 1}`))},
			want: []any{[]any{map[string]any{"a": 1.0, "i": 1}, map[string]any{"a": 1.0, "i": 2}}},
		},
		{
			name: "metadata",
			expr: `{"src": meta.source, "missing": meta.nope}`,
			in: func() []message.Message {
				m := message.New([]byte(`{}`))
				m.SetMeta("source", "kafka")
				return []message.Message{m}
			}(),
			want: []any{map[string]any{"src": "kafka", "missing": ""}},
		},
		{
			name: "any JSON value may result",
			expr: `this.items`,
			in:   []message.Message{message.New([]byte(`{"items": [1, 2]}`))},
			want: []any{[]any{1.0, 2.0}},
		},
		{
			name: "uuid",
			expr: `len(uuid())`,
			in:   []message.Message{message.New([]byte(`{}`))},
			want: []any{36},
		},
		{
			name: "runtime type error names the message",
			expr: `merge(this, {"w": this.v * 2})`,
			in:   []message.Message{message.New([]byte(`{"v": 1}`)), message.New([]byte(`{"v": "x"}`))},
			err:  "mapping: message 1: invalid operation: string * int (1:26)",
		},
		{
			name: "merge of a non-object",
			expr: `merge(this.list, {"a": 1})`,
			in:   []message.Message{message.New([]byte(`{"list": [1]}`))},
			err:  "merge: argument 1 is []interface {}: not an object",
		},
		{
			name: "missing field is nil",
			expr: `{"x": this.nope, "y": this["v"]}`,
			in:   []message.Message{message.New([]byte(`{"v": 1}`))},
			want: []any{map[string]any{"x": nil, "y": 1.0}},
		},
		{
			name: "optional chaining",
			expr: `{"b": this?.a?.b ?? 0}`,
			in:   []message.Message{message.New([]byte(`{}`)), message.New([]byte(`null`))},
			want: []any{map[string]any{"b": 0}, map[string]any{"b": 0}},
		},
		{
			name: "field of a value that is not an object",
			expr: `this.v`,
			in:   []message.Message{message.New([]byte(`[1]`))},
			err:  "mapping: message 0: invalid operation: int(string) (1:6)",
		},
		{
			name: "payload that is not JSON",
			expr: `this`,
			in:   []message.Message{message.New([]byte(`not json`))},
			err:  "mapping: message 0: payload is not valid JSON",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(t, "mapping", map[string]any{"expression": tt.expr})
			out, err := p.Process(context.Background(), message.Batch{Messages: tt.in})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want it to contain %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, values(t, out)); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
			if _, err := out[0].Messages[0].Payload(); err != nil {
				t.Errorf("result does not serialize: %v", err)
			}
		})
	}
}

// TestMappingLeavesSharedValues checks that a structured value the message
// already had (which copies of the message may share) is not modified.
func TestMappingLeavesSharedValues(t *testing.T) {
	p := build(t, "mapping", map[string]any{"expression": `merge(this, {"w": 1})`})
	shared := map[string]any{"v": 1.0}
	in := message.Batch{Messages: []message.Message{message.NewStructured(shared)}}
	out, err := p.Process(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"v": 1.0}, shared); diff != "" {
		t.Errorf("shared value changed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{map[string]any{"v": 1.0, "w": 1}}, values(t, out)); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		proc, field, src string
		err              string
	}{
		{"mapping", "expression", ``, "expression: required"},
		{"mapping", "expression", `this.`, "expression: unexpected end of expression (1:5)"},
		{"mapping", "expression", `nope.x`, "expression: unknown name nope (1:1)"},
		{"mapping", "expression", `1 + "a"`, "expression: invalid operation: + (mismatched types int and string)"},
		{"mapping", "expression", `merge(this, 1)`, "expression: cannot use int as argument (type map[string]interface {}) to call merge"},
		{"mapping", "expression", `meta.k * 2`, "expression: invalid operation: * (mismatched types string and int)"},
		{"filter", "condition", ``, "condition: required"},
		{"filter", "condition", `1 + 1`, "condition: condition did not return a boolean: it returns int"},
		{"filter", "condition", `this.v >`, "condition: unexpected token EOF (1:8)"},
		{"log", "message", `this.(`, "message: "},
	}
	for _, tt := range tests {
		t.Run(tt.proc+" "+tt.src, func(t *testing.T) {
			_, err := component.Default.NewProcessor(tt.proc, map[string]any{tt.field: tt.src}, component.Resources{})
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.err)
			}
		})
	}
}

func TestFilter(t *testing.T) {
	tests := []struct {
		name string
		cond string
		in   []string
		want []string // payloads kept, byte for byte
		err  error
	}{
		{"keeps true, in order", `this.v > 1`, []string{`{"v": 1}`, `{"v":  2}`, `{"v": 3}`}, []string{`{"v":  2}`, `{"v": 3}`}, nil},
		{"drops all", `this.v > 10`, []string{`{"v": 1}`, `{"v": 2}`}, nil, nil},
		{"keeps all", `true`, []string{`{"v": 1}`}, []string{`{"v": 1}`}, nil},
		{"metadata", `meta.k == ""`, []string{`{}`}, []string{`{}`}, nil},
		{"number is not a boolean", `this.v`, []string{`{"v": 1}`}, nil, processor.ErrNotBool},
		{"missing field is not a boolean", `this.flag`, []string{`{"v": 1}`}, nil, processor.ErrNotBool},
		{"missing field with a default", `this.flag ?? false`, []string{`{"v": 1}`}, nil, nil},
		{"not JSON", `true`, []string{`{`}, nil, new(message.ParseError)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(t, "filter", map[string]any{"condition": tt.cond})
			in := batchOf(tt.in...)
			out, err := p.Process(context.Background(), in)
			var pe *message.ParseError
			switch {
			case tt.err == nil && err != nil:
				t.Fatal(err)
			case errors.Is(tt.err, processor.ErrNotBool) && !errors.Is(err, processor.ErrNotBool),
				errors.As(tt.err, &pe) && !errors.As(err, &pe):
				t.Fatalf("error = %v, want %v", err, tt.err)
			case tt.err != nil:
				return
			}
			if len(tt.want) == 0 && len(out) != 0 {
				t.Fatalf("got %d batches, want none", len(out))
			}
			if diff := cmp.Diff(tt.want, payloadsOf(t, out)); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			for _, b := range out {
				for i := range b.Messages {
					if b.Messages[i].HasStructured() {
						t.Errorf("filter cached a structured value: it would re-serialize the payload")
					}
				}
			}
		})
	}
}

func TestJSON(t *testing.T) {
	ctx := context.Background()
	t.Run("parse", func(t *testing.T) {
		p := build(t, "json", map[string]any{})
		out, err := p.Process(ctx, batchOf(`{"a": [1, "x"]}`, `2`))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range out {
			for i := range b.Messages {
				if !b.Messages[i].HasStructured() {
					t.Errorf("message %d not parsed", i)
				}
			}
		}
		if diff := cmp.Diff([]any{map[string]any{"a": []any{1.0, "x"}}, 2.0}, values(t, out)); diff != "" {
			t.Errorf("values (-want +got):\n%s", diff)
		}
	})
	t.Run("parse failure fails the batch", func(t *testing.T) {
		p := build(t, "json", map[string]any{"operation": "parse"})
		_, err := p.Process(ctx, batchOf(`{}`, `{"a":`))
		var pe *message.ParseError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "json: message 1:") {
			t.Fatalf("error = %v, want a ParseError for message 1", err)
		}
	})
	t.Run("serialize", func(t *testing.T) {
		p := build(t, "json", map[string]any{"operation": "serialize"})
		in := message.Batch{Messages: []message.Message{
			message.NewStructured(map[string]any{"b": 1, "a": "x"}),
			message.New([]byte(`{"kept":  "as is"}`)),
		}}
		out, err := p.Process(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{`{"a":"x","b":1}`, `{"kept":  "as is"}`}, payloadsOf(t, out)); diff != "" {
			t.Errorf("payloads (-want +got):\n%s", diff)
		}
	})
	t.Run("serialize failure fails the batch", func(t *testing.T) {
		p := build(t, "json", map[string]any{"operation": "serialize"})
		in := message.Batch{Messages: []message.Message{message.NewStructured(map[string]any{"f": func() {}})}}
		if _, err := p.Process(ctx, in); err == nil || !strings.Contains(err.Error(), "json: message 0:") {
			t.Fatalf("error = %v, want a serialization error for message 0", err)
		}
	})
	t.Run("unknown operation", func(t *testing.T) {
		_, err := component.Default.NewProcessor("json", map[string]any{"operation": "pretty"}, component.Resources{})
		if err == nil || !strings.Contains(err.Error(), `operation: "pretty"`) {
			t.Fatalf("error = %v", err)
		}
	})
}

func TestBatch(t *testing.T) {
	tests := []struct {
		count, n int
		want     []int // sizes of the output batches
	}{
		{2, 5, []int{2, 2, 1}},
		{2, 4, []int{2, 2}},
		{10, 3, []int{3}},
		{1, 3, []int{1, 1, 1}},
		{3, 0, nil},
	}
	for _, tt := range tests {
		p := build(t, "batch", map[string]any{"count": float64(tt.count), "timeout_ms": 50.0})
		in := message.Batch{Messages: make([]message.Message, tt.n)}
		for i := range in.Messages {
			in.Messages[i] = message.New([]byte{byte('a' + i)})
		}
		out, err := p.Process(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		var sizes []int
		var all string
		for _, b := range out {
			sizes = append(sizes, b.Len())
			for _, p := range payloadsOf(t, []message.Batch{b}) {
				all += p
			}
		}
		if diff := cmp.Diff(tt.want, sizes); diff != "" {
			t.Errorf("count %d over %d messages: sizes (-want +got):\n%s", tt.count, tt.n, diff)
		}
		if want := "abcde"[:tt.n]; all != want {
			t.Errorf("messages %q, want %q in order", all, want)
		}
		if len(out) > 1 {
			// Appending to one part must not overwrite the next.
			_ = append(out[0].Messages, message.New([]byte("!")))
			if got := payloadsOf(t, out[1:2])[0]; got != string(rune('a'+tt.count)) {
				t.Errorf("append to batch 0 overwrote batch 1: %q", got)
			}
		}
	}
	if _, err := component.Default.NewProcessor("batch", map[string]any{"count": 0.0}, component.Resources{}); err == nil {
		t.Error("count 0 was accepted")
	}
}

// TestConcurrentProcess runs one mapping and one filter from several
// goroutines, as thread_num workers do (meaningful under -race).
func TestConcurrentProcess(t *testing.T) {
	m := build(t, "mapping", map[string]any{"expression": `merge(this, {"w": this.v * 2})`})
	f := build(t, "filter", map[string]any{"condition": `this.w > 10`})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				in := batchOf(`{"v": 1}`, `{"v": 6}`)
				out, err := m.Process(context.Background(), in)
				if err == nil {
					out, err = f.Process(context.Background(), out[0])
				}
				if err == nil && (len(out) != 1 || out[0].Len() != 1) {
					err = errors.New("wrong result")
				}
				if err != nil {
					errs <- err
					return
				}
				_ = g + i
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
