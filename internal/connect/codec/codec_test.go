package codec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/message"
)

// TestExamples builds every component's example.
func TestExamples(t *testing.T) {
	for _, name := range []string{"json", "lines", "csv", "protobuf", "avro", "schema_registry", "debezium_json"} {
		conf := componenttest.Example(t, component.Default, component.KindCodec, name)
		c, err := component.Default.NewCodec(name, conf, component.Resources{})
		if err != nil {
			t.Errorf("codec %s example: %v", name, err)
			continue
		}
		if !component.IsColumnar(c) {
			t.Errorf("codec %s is not columnar", name)
		}
	}
	for _, name := range []string{"protobuf_to_arrow", "arrow_to_protobuf"} {
		conf := componenttest.Example(t, component.Default, component.KindProcessor, name)
		if _, err := component.Default.NewProcessor(name, conf, component.Resources{}); err != nil {
			t.Errorf("processor %s example: %v", name, err)
		}
	}
}

// TestUnknownFields: every codec refuses a field it does not declare.
func TestUnknownFields(t *testing.T) {
	for _, name := range []string{"json", "lines", "csv", "protobuf", "avro", "schema_registry", "debezium_json"} {
		_, err := component.Default.NewCodec(name, map[string]any{"bogus": 1}, component.Resources{})
		if err == nil || !strings.Contains(err.Error(), `unknown field "bogus"`) {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

func TestJSONDecode(t *testing.T) {
	out, err := newCodec(t, "json", nil).Decode(ctx, msgs(`{"a": 1, "b": "x"}`, `{"a": 2.5, "c": true}`))
	if err != nil {
		t.Fatal(err)
	}
	want := tbl{
		Cols: []string{"a float64", "b utf8", "c bool"},
		Rows: [][]any{{1.0, "x", nil}, {2.5, nil, true}},
	}
	if diff := cmp.Diff(want, dump(t, out.Table)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if _, err := newCodec(t, "json", nil).Decode(ctx, msgs(`{}`, `[1]`)); err == nil {
		t.Error("a payload that is not an object: no error")
	}
}

func TestJSONEncode(t *testing.T) {
	c := newCodec(t, "json", map[string]any{"pretty": true})
	rec := build(t, []colDef{{name: "a", typ: i64}, {name: "b", typ: str}, {name: "j", typ: str, json: true}},
		[]any{int64(1), "x", `{"k":[1]}`}, []any{nil, nil, nil})
	out, err := c.Encode(ctx, messageBatchOf(rec))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{`{"a":1,"b":"x","j":{"k":[1]}}`, `{"a":null,"b":null,"j":null}`}, payloadStrings(t, out)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	out, err = c.Encode(ctx, msgs(`{"x": 1}`, `plain`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{`{"x": 1}`, `plain`}, payloadStrings(t, out)); diff != "" {
		t.Errorf("messages pass through (-want +got)\n%s", diff)
	}
}

func TestCSVEncode(t *testing.T) {
	rec := build(t, []colDef{{name: "id", typ: i64}, {name: "name", typ: str}, {name: "ok", typ: boolean}, {name: "j", typ: str, json: true}},
		[]any{int64(1), "a,b", true, `{"k":1}`}, []any{nil, "", false, nil})
	tests := []struct {
		name string
		conf map[string]any
		want string
	}{
		{"header", nil, "id,name,ok,j\n1,\"a,b\",true,\"{\"\"k\"\":1}\"\n,,false,\n"},
		{"no header, semicolons", map[string]any{"header": false, "delimiter": ";"}, "1;a,b;true;\"{\"\"k\"\":1}\"\n;;false;\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCodec(t, "csv", tt.conf)
			out, err := c.Encode(ctx, messageBatchOf(rec))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{tt.want}, payloadStrings(t, out)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestCSVRoundTrip(t *testing.T) {
	c := newCodec(t, "csv", nil)
	in := "id,price,name,ok\n1,2.5,\"x, y\",true\n2,,z,false\n"
	dec, err := c.Decode(ctx, msgs(in))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := c.Encode(ctx, dec)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{in}, payloadStrings(t, enc)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

// TestEncodeMetaColumns: the __meta_* columns become metadata (json) or
// are left out (csv), as when a table becomes messages.
func TestEncodeMetaColumns(t *testing.T) {
	rec := build(t, []colDef{{name: "a", typ: i64}, {name: "__meta_source", typ: str}}, []any{int64(1), "in"})
	out, err := newCodec(t, "json", nil).Encode(ctx, messageBatchOf(rec))
	if err != nil {
		t.Fatal(err)
	}
	if got := payloadStrings(t, out); !cmp.Equal(got, []string{`{"a":1}`}) || out.Messages[0].Meta.Source != "in" {
		t.Errorf("json: %v, source %q", got, out.Messages[0].Meta.Source)
	}
	out, err = newCodec(t, "csv", nil).Encode(ctx, messageBatchOf(rec))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a\n1\n"}, payloadStrings(t, out)); diff != "" {
		t.Errorf("csv (-want +got)\n%s", diff)
	}
}

// metaOf returns the (__meta_source, __meta_offset, __meta_key) of each
// row, read back through columnar.Flatten.
func metaOf(t *testing.T, b message.Batch) []string {
	t.Helper()
	if err := columnar.Flatten(&b); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range b.Messages {
		out = append(out, fmt.Sprintf("%s/%d/%s", m.Meta.Source, m.Meta.Offset, m.Meta.Key))
	}
	return out
}

func withMetaMsgs(payloads ...string) message.Batch {
	b := msgs(payloads...)
	for i := range b.Messages {
		b.Messages[i].Meta = message.Metadata{Source: "kafka", Offset: int64(10 + i), Key: []byte(fmt.Sprint("k", i))}
	}
	return b
}

// TestDecodeMetadata: a decoded table keeps each record's metadata as
// __meta_* columns, every row of a payload the payload's.
func TestDecodeMetadata(t *testing.T) {
	md := loadMD(t, "example.v1.Reading")
	pb := protoBytes(t, md, `{"ts": "1"}`)
	tests := []struct {
		name  string
		codec string
		conf  map[string]any
		in    message.Batch
		want  []string
	}{
		{"csv rows take their payload's", "csv", nil, withMetaMsgs("a\n1\n2\n", "a\n3\n"), []string{"kafka/10/k0", "kafka/10/k0", "kafka/11/k1"}},
		{"debezium skips tombstones", "debezium_json", nil, withMetaMsgs(dbzCreate, "", dbzDelete), []string{"kafka/10/k0", "kafka/12/k2"}},
		{"json", "json", nil, withMetaMsgs(`{"a": 1}`, `{"a": 2}`), []string{"kafka/10/k0", "kafka/11/k1"}},
		{"protobuf", "protobuf", protoConf("example.v1.Reading", "testdata/reading.proto"), withMetaMsgs(pb), []string{"kafka/10/k0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := newCodec(t, tt.codec, tt.conf).Decode(ctx, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, metaOf(t, out)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
	t.Run("protobuf_to_arrow keeps a binary table's", func(t *testing.T) {
		in, err := columnar.FromMessages(withMetaMsgs(pb, pb).Messages)
		if err != nil {
			t.Fatal(err)
		}
		p, err := component.Default.NewProcessor("protobuf_to_arrow", protoConf("example.v1.Reading", "testdata/reading.proto"), component.Resources{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := p.Process(ctx, message.Batch{Table: in})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"kafka/10/k0", "kafka/11/k1"}, metaOf(t, out[0])); diff != "" {
			t.Errorf("(-want +got)\n%s", diff)
		}
	})
}
