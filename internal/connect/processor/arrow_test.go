package processor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	_ "github.com/flowplane/flowplane/internal/connect/input"
	_ "github.com/flowplane/flowplane/internal/connect/output"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/stream"
)

// tableOf is the batch json_to_arrow makes of payloads, for tests that
// need a table.
func tableOf(t *testing.T, payloads ...string) message.Batch {
	t.Helper()
	b := make([][]byte, len(payloads))
	for i, p := range payloads {
		b[i] = []byte(p)
	}
	rec, err := columnar.FromJSON(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return message.Batch{Table: rec}
}

func schemaOf(bs []message.Batch) string {
	var s []string
	for _, b := range bs {
		if b.Table == nil {
			s = append(s, "messages")
			continue
		}
		var names []string
		for _, f := range b.Table.Schema().Fields() {
			names = append(names, f.Name+":"+f.Type.String())
		}
		s = append(s, strings.Join(names, ","))
	}
	return strings.Join(s, "|")
}

func TestJSONToArrow(t *testing.T) {
	rawTable := func(t *testing.T, payloads ...string) message.Batch {
		b := batchOf(payloads...)
		b.Messages[0].Meta.Source = "dropped"
		rec, err := columnar.FromMessages(b.Messages)
		if err != nil {
			t.Fatal(err)
		}
		return message.Batch{Table: rec}
	}
	tests := []struct {
		name   string
		conf   map[string]any
		in     func(t *testing.T) message.Batch
		schema string
		rows   []string
	}{
		{
			name: "messages",
			conf: map[string]any{},
			in: func(*testing.T) message.Batch {
				b := batchOf(`{"device":"a","reading":21,"tags":["x"]}`, `{"device":"b","reading":21.5}`)
				b.Messages[0].Meta.Source = "dropped"
				return b
			},
			schema: "device:utf8,reading:float64,tags:utf8",
			rows:   []string{`{"device":"a","reading":21,"tags":["x"]}`, `{"device":"b","reading":21.5,"tags":null}`},
		},
		{
			name:   "fields_to_include",
			conf:   map[string]any{"fields_to_include": []any{"reading", "device"}},
			in:     func(*testing.T) message.Batch { return batchOf(`{"device":"a","reading":21,"x":1}`) },
			schema: "device:utf8,reading:int64",
			rows:   []string{`{"device":"a","reading":21}`},
		},
		{
			name:   "a binary table: its __value__ column",
			conf:   map[string]any{},
			in:     func(t *testing.T) message.Batch { return rawTable(t, `{"a":1}`, `{"a":2}`) },
			schema: "a:int64",
			rows:   []string{`{"a":1}`, `{"a":2}`},
		},
		{
			name:   "a table: value_field names the column",
			conf:   map[string]any{"value_field": "raw"},
			in:     func(t *testing.T) message.Batch { return tableOf(t, `{"raw":"{\"n\":true}","k":1}`) },
			schema: "n:bool",
			rows:   []string{`{"n":true}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(t, "json_to_arrow", tt.conf)
			if !component.IsColumnar(p) {
				t.Fatal("json_to_arrow is not Columnar")
			}
			out, err := p.Process(context.Background(), tt.in(t))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.schema, schemaOf(out)); diff != "" {
				t.Errorf("schema (-want +got):\n%s", diff)
			}
			rows, err := columnar.ToJSON(out[0].Table, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, len(rows))
			for i := range rows {
				got[i] = string(rows[i])
			}
			if diff := cmp.Diff(tt.rows, got); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
		})
	}
}

func TestArrowToJSON(t *testing.T) {
	withMeta := func(t *testing.T) message.Batch {
		return tableOf(t, `{"__meta_source":"s","__meta_partition":4,"id":1,"v":{"k":[1]}}`, `{"id":2,"v":"x"}`)
	}
	tests := []struct {
		name string
		conf map[string]any
		in   func(t *testing.T) message.Batch
		want []string
		meta []message.Metadata
	}{
		{
			name: "every column but __meta_*, which set the metadata",
			conf: map[string]any{},
			in:   withMeta,
			want: []string{`{"id":1,"v":{"k":[1]}}`, `{"id":2,"v":"x"}`},
			meta: []message.Metadata{{Source: "s", Partition: 4}, {}},
		},
		{
			name: "fields_to_include, a __meta_* column among them",
			conf: map[string]any{"fields_to_include": []any{"v", "__meta_partition"}, "value_field": "ignored"},
			in:   withMeta,
			want: []string{`{"__meta_partition":4,"v":{"k":[1]}}`, `{"__meta_partition":null,"v":"x"}`},
			meta: []message.Metadata{{Source: "s", Partition: 4}, {}},
		},
		{
			name: "messages pass unchanged",
			conf: map[string]any{"fields_to_include": []any{"x"}},
			in: func(*testing.T) message.Batch {
				b := batchOf(`not json`, `{"y":1}`)
				b.Messages[1].Meta.Offset = 9
				return b
			},
			want: []string{`not json`, `{"y":1}`},
			meta: []message.Metadata{{}, {Offset: 9}},
		},
		{
			name: "a binary table is written as rows too",
			conf: map[string]any{},
			in: func(t *testing.T) message.Batch {
				b := batchOf(`{"a":1}`)
				b.Messages[0].Meta.Key = []byte("k")
				rec, err := columnar.FromMessages(b.Messages)
				if err != nil {
					t.Fatal(err)
				}
				return message.Batch{Table: rec}
			},
			want: []string{`{"__value__":"{\"a\":1}"}`},
			meta: []message.Metadata{{Key: []byte("k")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(t, "arrow_to_json", tt.conf)
			if !component.IsColumnar(p) {
				t.Fatal("arrow_to_json is not Columnar")
			}
			out, err := p.Process(context.Background(), tt.in(t))
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != 1 || out[0].Table != nil {
				t.Fatalf("out = %d batches, table %v", len(out), out[0].Table != nil)
			}
			if diff := cmp.Diff(tt.want, payloadsOf(t, out)); diff != "" {
				t.Errorf("payloads (-want +got):\n%s", diff)
			}
			var meta []message.Metadata
			for _, m := range out[0].Messages {
				meta = append(meta, m.Meta)
			}
			if diff := cmp.Diff(tt.meta, meta); diff != "" {
				t.Errorf("metadata (-want +got):\n%s", diff)
			}
		})
	}
}

func TestArrowProcessorErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		conf map[string]any
		want string
	}{
		{"json_to_arrow", map[string]any{"value_field": ""}, "value_field: must not be empty"},
		{"json_to_arrow", map[string]any{"fields_to_include": []any{"a", ""}}, "fields_to_include[1]: must not be empty"},
		{"arrow_to_json", map[string]any{"fields_to_include": []any{""}}, "fields_to_include[0]: must not be empty"},
		{"arrow_to_json", map[string]any{"nope": 1}, `unknown field "nope"`},
	} {
		_, err := component.Default.NewProcessor(tt.name, tt.conf, component.Resources{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %v: err = %v, want %q", tt.name, tt.conf, err, tt.want)
		}
	}

	ctx := context.Background()
	toArrow := build(t, "json_to_arrow", map[string]any{})
	for _, tt := range []struct {
		in   message.Batch
		want string
	}{
		{batchOf(`{"a":1}`, `[1,2]`), "json_to_arrow: message 1: want a JSON object, got array"},
		{batchOf(`{"a":`), "json_to_arrow: message 0: invalid JSON"},
		{tableOf(t, `{"a":1}`), `json_to_arrow: the table has no column "__value__"`},
		{tableOf(t, `{"__value__":5}`), `json_to_arrow: column "__value__" is int64, want binary or utf8`},
	} {
		_, err := toArrow.Process(ctx, tt.in)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("json_to_arrow: err = %v, want %q", err, tt.want)
		}
	}
	toJSON := build(t, "arrow_to_json", map[string]any{})
	_, err := toJSON.Process(ctx, tableOf(t, `{"__meta_offset":"x"}`))
	if want := `arrow_to_json: column "__meta_offset", row 0: want an integer, got string`; err == nil || err.Error() != want {
		t.Errorf("arrow_to_json: err = %v, want %q", err, want)
	}
}

func TestArrowExamples(t *testing.T) {
	for _, name := range []string{"json_to_arrow", "arrow_to_json"} {
		conf := componenttest.Example(t, component.Default, component.KindProcessor, name)
		build(t, name, conf)
	}
}

// arrowStream runs generate (count rows of context) -> processors -> file
// and returns the file's lines once the stream completed.
func arrowStream(t *testing.T, context string, count int, processors ...map[string]any) []string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.jsonl")
	procs := make([]any, len(processors))
	for i := range processors {
		procs[i] = processors[i]
	}
	doc, err := json.Marshal(map[string]any{
		"logging":      map[string]any{"level": "error"},
		"health_check": map[string]any{"enabled": false},
		"streams": []any{map[string]any{
			"id":       "s",
			"input":    map[string]any{"type": "generate", "context": context, "count": count, "batch_size": 7, "interval": "0s"},
			"pipeline": map[string]any{"thread_num": 2, "processors": procs},
			"output":   map[string]any{"type": "file", "path": out},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := componenttest.Engine(t, string(doc))
	componenttest.WaitFor(t, "the stream to complete", 30*time.Second, func() bool {
		st := componenttest.Stream(t, e, "s")
		if st.State == stream.StateFailed {
			t.Fatalf("stream failed: %+v", st.Status)
		}
		return st.State == stream.StateCompleted
	})
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestArrowStream: generate -> json_to_arrow -> arrow_to_json -> file
// writes every generated object back byte for byte, in order.
func TestArrowStream(t *testing.T) {
	const n = 30
	ctx := `{"id":{{count}},"name":"n{{count}}<&>","score":{{count}}.5,"ok":true,"geo":{"lat":1.5,"tags":["a",null]},"none":null}`
	got := arrowStream(t, ctx, n, map[string]any{"type": "json_to_arrow"}, map[string]any{"type": "arrow_to_json"})
	want := make([]string, n)
	for i := range want {
		want[i] = strings.ReplaceAll(ctx, "{{count}}", fmt.Sprint(i+1))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestArrowStreamFlattens: a processor that does not read tables (mapping)
// after json_to_arrow gets each row as a JSON object.
func TestArrowStreamFlattens(t *testing.T) {
	const n = 10
	got := arrowStream(t, `{"id":{{count}},"drop":"x","geo":{"lat":1.5}}`, n,
		map[string]any{"type": "json_to_arrow", "fields_to_include": []any{"geo", "id"}},
		map[string]any{"type": "mapping", "expression": `merge(this, {"w": this.id * 2})`})
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf(`{"geo":{"lat":1.5},"id":%d,"w":%d}`, i+1, 2*(i+1))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
