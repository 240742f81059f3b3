package codec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hamba/avro/v2"
)

const avroSchema = `{"type": "record", "name": "R", "fields": [
	{"name": "b", "type": "boolean"},
	{"name": "i", "type": "int"},
	{"name": "l", "type": ["null", "long"]},
	{"name": "f", "type": "float"},
	{"name": "d", "type": "double"},
	{"name": "s", "type": "string"},
	{"name": "raw", "type": "bytes"},
	{"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}},
	{"name": "tags", "type": {"type": "array", "items": "string"}},
	{"name": "inner", "type": ["null", {"type": "record", "name": "In", "fields": [{"name": "n", "type": "string"}]}]}
]}`

var avroCols = []string{"b bool", "i int32", "l int64", "f float32", "d float64", "s utf8", "raw binary", "e utf8", "tags json", "inner json"}

func avroBytes(t *testing.T, v map[string]any) string {
	t.Helper()
	b, err := avro.Marshal(avro.MustParse(avroSchema), v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAvroDecode(t *testing.T) {
	full := avroBytes(t, map[string]any{"b": true, "i": 1, "l": int64(2), "f": float32(1.5), "d": 2.5, "s": "x",
		"raw": []byte{1}, "e": "Y", "tags": []string{"a"}, "inner": map[string]any{"In": map[string]any{"n": "q"}}})
	nulls := avroBytes(t, map[string]any{"b": false, "i": 0, "l": nil, "f": float32(0), "d": 0.0, "s": "",
		"raw": []byte{}, "e": "X", "tags": []string{}, "inner": nil})
	out, err := newCodec(t, "avro", map[string]any{"schema": avroSchema}).Decode(ctx, msgs(full, nulls))
	if err != nil {
		t.Fatal(err)
	}
	want := tbl{Cols: avroCols, Rows: [][]any{
		{true, int32(1), int64(2), float32(1.5), 2.5, "x", []byte{1}, "Y", `["a"]`, `{"n":"q"}`},
		{false, int32(0), nil, float32(0), 0.0, "", []byte{}, "X", `[]`, nil},
	}}
	if diff := cmp.Diff(want, dump(t, out.Table)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if _, err := newCodec(t, "avro", map[string]any{"schema": avroSchema}).Decode(ctx, msgs(full, "\x01")); err == nil ||
		!strings.HasPrefix(err.Error(), "payload 1: ") {
		t.Errorf("truncated payload: error %v", err)
	}
}

func TestAvroEncode(t *testing.T) {
	const schema = `{"type": "record", "name": "R", "fields": [{"name": "id", "type": "int"},
		{"name": "name", "type": ["null", "string"]}, {"name": "score", "type": "float"}, {"name": "raw", "type": "bytes"}]}`
	rec := build(t, []colDef{{name: "id", typ: i64}, {name: "name", typ: str}, {name: "score", typ: f64}, {name: "raw", typ: str}, {name: "other", typ: str}},
		[]any{int64(7), "n", 1.5, "ab", "x"}, []any{int64(-1), nil, 0.0, "", nil})
	c := newCodec(t, "avro", map[string]any{"schema": schema})
	out, err := c.Encode(ctx, messageBatchOf(rec))
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	for _, p := range payloadStrings(t, out) {
		var v map[string]any
		if err := avro.Unmarshal(avro.MustParse(schema), []byte(p), &v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	want := []map[string]any{
		{"id": 7, "name": "n", "score": float32(1.5), "raw": []byte("ab")},
		{"id": -1, "name": nil, "score": float32(0), "raw": []byte{}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	// Round trip through the codec's own decoder.
	dec, err := c.Decode(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	wantT := tbl{Cols: []string{"id int32", "name utf8", "score float32", "raw binary"},
		Rows: [][]any{{int32(7), "n", float32(1.5), []byte("ab")}, {int32(-1), nil, float32(0), []byte{}}}}
	if diff := cmp.Diff(wantT, dump(t, dec.Table)); diff != "" {
		t.Errorf("round trip (-want +got)\n%s", diff)
	}
	big := build(t, []colDef{{name: "id", typ: i64}, {name: "score", typ: f64}, {name: "raw", typ: str}}, []any{int64(1) << 40, 1.0, ""})
	if _, err := c.Encode(ctx, messageBatchOf(big)); err == nil || !strings.Contains(err.Error(), `row 0: column "id": 1099511627776 out of range of an Avro int`) {
		t.Errorf("out of range: error %v", err)
	}
}

func TestAvroConfigErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.avsc")
	if err := os.WriteFile(path, []byte(`{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewAvro(map[string]any{"schema_path": path}, resNone); err != nil {
		t.Errorf("schema_path: %v", err)
	}
	tests := []struct {
		conf map[string]any
		want string
	}{
		{map[string]any{}, "schema: give schema or schema_path"},
		{map[string]any{"schema": "{}", "schema_path": path}, "schema_path: give schema or schema_path, not both"},
		{map[string]any{"schema_path": filepath.Join(t.TempDir(), "none")}, "schema_path: open "},
		{map[string]any{"schema": `"string"`}, "schema: want a record schema, got string"},
		{map[string]any{"schema": `{"type": "nope"}`}, "schema: "},
	}
	for _, tt := range tests {
		if _, err := NewAvro(tt.conf, resNone); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want prefix %q", tt.conf, err, tt.want)
		}
	}
}
