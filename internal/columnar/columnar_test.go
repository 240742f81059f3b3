package columnar_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/message"
)

func lines(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i := range s {
		out[i] = []byte(s[i])
	}
	return out
}

func strs(b [][]byte) []string {
	out := make([]string, len(b))
	for i := range b {
		out[i] = string(b[i])
	}
	return out
}

var jsonField = arrow.NewMetadata([]string{columnar.JSONKey}, []string{"true"})

func TestFromJSON(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		include []string
		schema  []arrow.Field
		out     []string // ToJSON of the table
	}{
		{
			name: "scalars",
			in:   []string{`{"id": 1, "name": "a", "ok": true, "x": 1.5}`, `{"name":"b","id":-2,"ok":false,"x":2}`},
			schema: []arrow.Field{
				{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
				{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
				{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
				{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
			},
			out: []string{`{"id":1,"name":"a","ok":true,"x":1.5}`, `{"id":-2,"name":"b","ok":false,"x":2}`},
		},
		{
			name: "missing fields and nulls, order of first appearance",
			in:   []string{`{"a":1}`, `{"b":"x","a":null}`, `{}`, `{"c":null}`},
			schema: []arrow.Field{
				{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
				{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
				{Name: "c", Type: arrow.BinaryTypes.String, Nullable: true},
			},
			out: []string{`{"a":1,"b":null,"c":null}`, `{"a":null,"b":"x","c":null}`, `{"a":null,"b":null,"c":null}`, `{"a":null,"b":null,"c":null}`},
		},
		{
			name: "nested and mixed make JSON columns",
			in:   []string{`{"o":{"k": [1, 2]},"m":1,"a":[]}`, `{"o":null,"m":"1","a":[{"x" : "y z"}]}`, `{"m":true}`},
			schema: []arrow.Field{
				{Name: "o", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: jsonField},
				{Name: "m", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: jsonField},
				{Name: "a", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: jsonField},
			},
			out: []string{`{"o":{"k":[1,2]},"m":1,"a":[]}`, `{"o":null,"m":"1","a":[{"x":"y z"}]}`, `{"o":null,"m":true,"a":null}`},
		},
		{
			name: "number edges",
			in:   []string{`{"big":9223372036854775807,"huge":1,"e":1e2,"r":1e400}`, `{"big":-9223372036854775808,"huge":18446744073709551616,"e":-0.000001,"r":1}`},
			schema: []arrow.Field{
				{Name: "big", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
				{Name: "huge", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
				{Name: "e", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
				{Name: "r", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: jsonField},
			},
			out: []string{`{"big":9223372036854775807,"huge":1,"e":100,"r":1e400}`, `{"big":-9223372036854775808,"huge":18446744073709552000,"e":-0.000001,"r":1}`},
		},
		{
			name: "strings with escapes",
			in:   []string{`{"s":"a\"b\\c\n\u00e9<>&\u2028\u0001","k\u00e9y":"\ud83d\ude00"}`},
			schema: []arrow.Field{
				{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
				{Name: "kéy", Type: arrow.BinaryTypes.String, Nullable: true},
			},
			out: []string{`{"s":"a\"b\\c\né<>&\u2028\u0001","kéy":"😀"}`},
		},
		{
			name:    "include keeps the payloads' order",
			in:      []string{`{"a":1,"b":2,"c":3}`, `{"d":4,"c":5}`},
			include: []string{"d", "a", "nope"},
			schema: []arrow.Field{
				{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
				{Name: "d", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			},
			out: []string{`{"a":1,"d":null}`, `{"a":null,"d":4}`},
		},
		{
			name:   "duplicate field keeps the last value",
			in:     []string{`{"a":1,"b":0,"a":2}`},
			schema: []arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "b", Type: arrow.PrimitiveTypes.Int64, Nullable: true}},
			out:    []string{`{"a":2,"b":0}`},
		},
		{
			name:   "no payloads",
			in:     nil,
			schema: []arrow.Field{},
			out:    []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := columnar.FromJSON(lines(tt.in...), tt.include)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(arrow.NewSchema(tt.schema, nil).String(), rec.Schema().String()); diff != "" {
				t.Errorf("schema (-want +got):\n%s", diff)
			}
			if int(rec.NumRows()) != len(tt.in) {
				t.Errorf("rows = %d, want %d", rec.NumRows(), len(tt.in))
			}
			out, err := columnar.ToJSON(rec, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.out, strs(out)); diff != "" {
				t.Errorf("ToJSON (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFromJSONErrors(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{[]string{`{}`, `{}`, `{}`, `[1]`}, `message 3: want a JSON object, got array`},
		{[]string{`"s"`}, `message 0: want a JSON object, got string`},
		{[]string{` 12`}, `message 0: want a JSON object, got number`},
		{[]string{`true`}, `message 0: want a JSON object, got boolean`},
		{[]string{`null`}, `message 0: want a JSON object, got null`},
		{[]string{`{}`, `{"a":`}, `message 1: invalid JSON`},
		{[]string{``}, `message 0: invalid JSON`},
		{[]string{`{} {}`}, `message 0: invalid JSON`},
	}
	for _, tt := range tests {
		_, err := columnar.FromJSON(lines(tt.in...), nil)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("FromJSON(%q) = %v, want an error starting %q", tt.in, err, tt.want)
		}
	}
}

// Canonical inputs (compact, fields in the same order in every row, no
// HTML escaping) come back byte for byte.
func TestRoundTrip(t *testing.T) {
	in := []string{
		`{"id":1,"name":"caf\u00e9","tags":["a","b"],"geo":{"lat":1.5,"lon":-2},"score":0.25,"ok":true,"n":null}`,
		`{"id":2,"name":"<b>&</b>","tags":[],"geo":null,"score":3,"ok":false,"n":null}`,
		`{"id":3,"name":"tab\tquote\"","tags":null,"geo":{"a":[{"b":null}]},"score":1e-7,"ok":null,"n":null}`,
	}
	rec, err := columnar.FromJSON(lines(in...), nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := columnar.ToJSON(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"id":1,"name":"café","tags":["a","b"],"geo":{"lat":1.5,"lon":-2},"score":0.25,"ok":true,"n":null}`,
		in[1], in[2],
	}
	if diff := cmp.Diff(want, strs(out)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	out, err = columnar.ToJSON(rec, []string{"score", "id"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{`{"id":1,"score":0.25}`, `{"id":2,"score":3}`, `{"id":3,"score":1e-7}`}, strs(out)); diff != "" {
		t.Errorf("include (-want +got):\n%s", diff)
	}
}

func build(t testing.TB, fields []arrow.Field, fill func(b *array.RecordBuilder)) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	fill(b)
	return b.NewRecordBatch()
}

func TestToJSONTypes(t *testing.T) {
	ts := &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "Europe/Paris"}
	fields := []arrow.Field{
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32},
		{Name: "u8", Type: arrow.PrimitiveTypes.Uint8},
		{Name: "u16", Type: arrow.PrimitiveTypes.Uint16},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString},
		{Name: "sv", Type: arrow.BinaryTypes.StringView},
		{Name: "bin", Type: arrow.BinaryTypes.Binary},
		{Name: "lbin", Type: arrow.BinaryTypes.LargeBinary},
		{Name: "d32", Type: arrow.FixedWidthTypes.Date32},
		{Name: "ts", Type: ts},
		{Name: "tsms", Type: arrow.FixedWidthTypes.Timestamp_ms},
		{Name: "null", Type: arrow.Null, Nullable: true},
		{Name: "json", Type: arrow.BinaryTypes.LargeString, Metadata: jsonField},
	}
	rec := build(t, fields, func(b *array.RecordBuilder) {
		b.Field(0).(*array.Int8Builder).AppendValues([]int8{-8, 0}, []bool{true, false})
		b.Field(1).(*array.Int16Builder).AppendValues([]int16{-16, 16}, nil)
		b.Field(2).(*array.Int32Builder).AppendValues([]int32{math.MinInt32, 32}, nil)
		b.Field(3).(*array.Uint8Builder).AppendValues([]uint8{255, 8}, nil)
		b.Field(4).(*array.Uint16Builder).AppendValues([]uint16{16, 0}, nil)
		b.Field(5).(*array.Uint32Builder).AppendValues([]uint32{32, 0}, nil)
		b.Field(6).(*array.Uint64Builder).AppendValues([]uint64{math.MaxUint64, 0}, nil)
		b.Field(7).(*array.Float32Builder).AppendValues([]float32{0.1, 1e21}, nil)
		b.Field(8).(*array.Float64Builder).AppendValues([]float64{math.NaN(), math.Inf(-1)}, nil)
		b.Field(9).(*array.LargeStringBuilder).AppendValues([]string{"large", ""}, nil)
		b.Field(10).(*array.StringViewBuilder).AppendValues([]string{"a view string longer than twelve", "v"}, nil)
		b.Field(11).(*array.BinaryBuilder).AppendValues([][]byte{[]byte("text"), {0xff, 0x00}}, nil)
		b.Field(12).(*array.BinaryBuilder).AppendValues([][]byte{{0xc3}, []byte("é")}, nil)
		b.Field(13).(*array.Date32Builder).AppendValues([]arrow.Date32{0, arrow.Date32FromTime(time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC))}, nil)
		b.Field(14).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1, 1700000000123456789}, nil)
		b.Field(15).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1700000000123, 0}, nil)
		b.Field(16).(*array.NullBuilder).AppendNulls(2)
		b.Field(17).(*array.LargeStringBuilder).AppendValues([]string{`{"a":[1]}`, `"s"`}, nil)
	})
	out, err := columnar.ToJSON(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"i8":-8,"i16":-16,"i32":-2147483648,"u8":255,"u16":16,"u32":32,"u64":18446744073709551615,"f32":0.1,"f64":null,"ls":"large","sv":"a view string longer than twelve","bin":"text","lbin":"ww==","d32":"1970-01-01","ts":"1970-01-01T00:00:00.000000001Z","tsms":"2023-11-14T22:13:20.123Z","null":null,"json":{"a":[1]}}`,
		`{"i8":null,"i16":16,"i32":32,"u8":8,"u16":0,"u32":0,"u64":0,"f32":1e+21,"f64":null,"ls":"","sv":"v","bin":"/wA=","lbin":"é","d32":"2024-02-29","ts":"2023-11-14T22:13:20.123456789Z","tsms":"1970-01-01T00:00:00Z","null":null,"json":"s"}`,
	}
	if diff := cmp.Diff(want, strs(out)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestToJSONErrors(t *testing.T) {
	list := build(t, []arrow.Field{{Name: "ok", Type: arrow.PrimitiveTypes.Int64}, {Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}}, func(b *array.RecordBuilder) {})
	notJSON := build(t, []arrow.Field{{Name: "j", Type: arrow.BinaryTypes.String, Metadata: jsonField}}, func(b *array.RecordBuilder) {
		b.Field(0).(*array.StringBuilder).AppendValues([]string{`{}`, `{oops`}, nil)
	})
	jsonInt := build(t, []arrow.Field{{Name: "j", Type: arrow.PrimitiveTypes.Int64, Metadata: jsonField}}, func(b *array.RecordBuilder) {})
	tests := []struct {
		rec  arrow.RecordBatch
		want string
	}{
		{list, `column "l": type list<item: int64, nullable> is not supported`},
		{notJSON, `column "j", row 1: not JSON: "{oops"`},
		{jsonInt, `column "j": a JSON column must be utf8, not int64`},
	}
	for _, tt := range tests {
		_, err := columnar.ToJSON(tt.rec, nil)
		if err == nil || err.Error() != tt.want {
			t.Errorf("ToJSON = %v, want %q", err, tt.want)
		}
	}
	// A column left out is not looked at.
	if out, err := columnar.ToJSON(list, []string{"ok"}); err != nil || len(out) != 0 {
		t.Errorf("ToJSON(include ok) = %q, %v", out, err)
	}
}

func sampleMessages() []message.Message {
	m0 := message.New([]byte(`{"a":1}`))
	m0.Meta = message.Metadata{
		Key: []byte("k0"), Source: "kafka", Partition: 3, Offset: 42,
		Timestamp:  time.Date(2024, 5, 6, 7, 8, 9, 123e6, time.UTC),
		IngestTime: time.Date(2024, 5, 6, 7, 8, 10, 0, time.UTC),
		Fields:     map[string]string{"h": "v", "n": "1"},
	}
	m1 := message.New([]byte{0xff, 0xfe, 'x'})
	m2 := message.NewStructured(map[string]any{"s": "t"})
	m2.Meta.Source = "http"
	return []message.Message{m0, m1, m2}
}

func TestFromMessages(t *testing.T) {
	rec, err := columnar.FromMessages(sampleMessages())
	if err != nil {
		t.Fatal(err)
	}
	wantSchema := `schema:
  fields: 8
    - __value__: type=binary
    - __meta_source: type=utf8
    - __meta_partition: type=int32
    - __meta_offset: type=int64
    - __meta_key: type=binary, nullable
    - __meta_timestamp: type=timestamp[ms, tz=UTC], nullable
    - __meta_ingest_time: type=timestamp[ms, tz=UTC], nullable
    - __meta_ext: type=utf8, nullable
            metadata: ["flowplane.json": "true"]`
	if diff := cmp.Diff(wantSchema, rec.Schema().String()); diff != "" {
		t.Errorf("schema (-want +got):\n%s", diff)
	}
	out, err := columnar.ToJSON(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"__value__":"{\"a\":1}","__meta_source":"kafka","__meta_partition":3,"__meta_offset":42,"__meta_key":"k0","__meta_timestamp":"2024-05-06T07:08:09.123Z","__meta_ingest_time":"2024-05-06T07:08:10Z","__meta_ext":{"h":"v","n":"1"}}`,
		`{"__value__":"//54","__meta_source":"","__meta_partition":0,"__meta_offset":0,"__meta_key":null,"__meta_timestamp":null,"__meta_ingest_time":null,"__meta_ext":null}`,
		`{"__value__":"{\"s\":\"t\"}","__meta_source":"http","__meta_partition":0,"__meta_offset":0,"__meta_key":null,"__meta_timestamp":null,"__meta_ingest_time":null,"__meta_ext":null}`,
	}
	if diff := cmp.Diff(want, strs(out)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

type flat struct {
	Payload string
	Meta    message.Metadata
}

func flatten(t *testing.T, rec arrow.RecordBatch) []flat {
	t.Helper()
	b := message.Batch{Table: rec}
	if err := columnar.Flatten(&b); err != nil {
		t.Fatal(err)
	}
	if b.Table != nil {
		t.Fatal("Flatten left the table")
	}
	out := make([]flat, len(b.Messages))
	for i := range b.Messages {
		if b.Messages[i].HasStructured() {
			t.Errorf("message %d is structured", i)
		}
		p, _ := b.Messages[i].Payload()
		out[i] = flat{string(p), b.Messages[i].Meta}
	}
	return out
}

func TestFlattenRestoresMessages(t *testing.T) {
	msgs := sampleMessages()
	rec, err := columnar.FromMessages(msgs)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]flat, len(msgs))
	for i := range msgs {
		p, _ := msgs[i].Payload()
		want[i] = flat{string(p), msgs[i].Meta}
	}
	if diff := cmp.Diff(want, flatten(t, rec)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestFlattenRows(t *testing.T) {
	rec, err := columnar.FromJSON(lines(
		`{"a":1,"__meta_source":"s1","__meta_partition":2,"__meta_offset":7,"__meta_key":"k","__meta_ext":{"x":"y","n":5},"b":[true]}`,
		`{"a":2,"__meta_ext":null}`,
	), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []flat{
		{`{"a":1,"b":[true]}`, message.Metadata{Source: "s1", Partition: 2, Offset: 7, Key: []byte("k"), Fields: map[string]string{"x": "y", "n": "5"}}},
		{`{"a":2,"b":null}`, message.Metadata{}},
	}
	if diff := cmp.Diff(want, flatten(t, rec)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	// A utf8 __value__ column and a plain-text __meta_ext.
	rec = build(t, []arrow.Field{
		{Name: columnar.ValueField, Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "other", Type: arrow.PrimitiveTypes.Int64},
		{Name: columnar.MetaExt, Type: arrow.BinaryTypes.String},
		{Name: columnar.MetaOffset, Type: arrow.PrimitiveTypes.Uint32},
	}, func(b *array.RecordBuilder) {
		b.Field(0).(*array.StringBuilder).AppendValues([]string{"raw", ""}, []bool{true, false})
		b.Field(1).(*array.Int64Builder).AppendValues([]int64{1, 2}, nil)
		b.Field(2).(*array.StringBuilder).AppendValues([]string{`{"a":"b"}`, `{}`}, nil)
		b.Field(3).(*array.Uint32Builder).AppendValues([]uint32{9, 10}, nil)
	})
	want = []flat{
		{"raw", message.Metadata{Offset: 9, Fields: map[string]string{"a": "b"}}},
		{"", message.Metadata{Offset: 10}},
	}
	if diff := cmp.Diff(want, flatten(t, rec)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	b := message.Batch{Messages: []message.Message{message.New([]byte("x"))}}
	if err := columnar.Flatten(&b); err != nil || len(b.Messages) != 1 {
		t.Errorf("Flatten of messages = %v, %d messages", err, len(b.Messages))
	}
}

func TestFlattenErrors(t *testing.T) {
	tests := []struct {
		field arrow.Field
		fill  func(b array.Builder)
		want  string
	}{
		{
			arrow.Field{Name: columnar.ValueField, Type: arrow.PrimitiveTypes.Int64},
			func(b array.Builder) { b.(*array.Int64Builder).Append(1) },
			`column "__value__" is int64, want binary or utf8`,
		},
		{
			arrow.Field{Name: columnar.MetaPartition, Type: arrow.BinaryTypes.String},
			func(b array.Builder) { b.(*array.StringBuilder).Append("x") },
			`column "__meta_partition", row 0: want an integer, got string`,
		},
		{
			arrow.Field{Name: columnar.MetaExt, Type: arrow.BinaryTypes.String},
			func(b array.Builder) { b.(*array.StringBuilder).Append("[1]") },
			`column "__meta_ext", row 0: want a JSON object, got []interface {}`,
		},
		{
			arrow.Field{Name: columnar.MetaTimestamp, Type: arrow.PrimitiveTypes.Int64},
			func(b array.Builder) { b.(*array.Int64Builder).Append(1) },
			`column "__meta_timestamp", row 0: want a timestamp, got int64`,
		},
		{
			arrow.Field{Name: columnar.MetaSource, Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
			func(b array.Builder) { b.(*array.ListBuilder).Append(true) },
			`column "__meta_source", row 0: type list<item: int64, nullable> is not supported`,
		},
	}
	for _, tt := range tests {
		rec := build(t, []arrow.Field{tt.field}, func(b *array.RecordBuilder) { tt.fill(b.Field(0)) })
		b := message.Batch{Table: rec}
		err := columnar.Flatten(&b)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Flatten(%s) = %v, want %q", tt.field.Name, err, tt.want)
		}
	}
}

func TestPayloads(t *testing.T) {
	msgs := sampleMessages()
	got, err := columnar.Payloads(message.Batch{Messages: msgs}, "ignored")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{"a":1}`, "\xff\xfex", `{"s":"t"}`}
	if diff := cmp.Diff(want, strs(got)); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	rec, _ := columnar.FromMessages(msgs)
	got, err = columnar.Payloads(message.Batch{Table: rec}, columnar.ValueField)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, strs(got)); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	got, err = columnar.Payloads(message.Batch{Table: rec}, columnar.MetaSource)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"kafka", "", "http"}, strs(got)); diff != "" {
		t.Errorf("utf8 column (-want +got):\n%s", diff)
	}
	if _, err := columnar.Payloads(message.Batch{Table: rec}, "nope"); err == nil || err.Error() != `the table has no column "nope"` {
		t.Errorf("missing column: %v", err)
	}
	if _, err := columnar.Payloads(message.Batch{Table: rec}, columnar.MetaOffset); err == nil || err.Error() != `column "__meta_offset" is int64, want binary or utf8` {
		t.Errorf("int column: %v", err)
	}
}

func TestValue(t *testing.T) {
	rec, err := columnar.FromJSON(lines(`{"b":true,"i":-1,"f":0.5,"s":"x","j":{"k":[1,"a",null]}}`, `{}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	mrec, _ := columnar.FromMessages(sampleMessages())
	var got []any
	for j := 0; j < int(rec.NumCols()); j++ {
		for i := 0; i < 2; i++ {
			v, err := columnar.Value(columnar.Column(rec, j), i)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, v)
		}
	}
	for j := 0; j < int(mrec.NumCols()); j++ {
		v, err := columnar.Value(columnar.Column(mrec, j), 0)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	want := []any{
		true, nil, int64(-1), nil, 0.5, nil, "x", nil, map[string]any{"k": []any{1.0, "a", nil}}, nil,
		[]byte(`{"a":1}`), "kafka", int64(3), int64(42), []byte("k0"),
		time.Date(2024, 5, 6, 7, 8, 9, 123e6, time.UTC), time.Date(2024, 5, 6, 7, 8, 10, 0, time.UTC),
		map[string]any{"h": "v", "n": "1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Without Column, a JSON column reads as its text.
	if v, _ := columnar.Value(rec.Column(4), 0); v != `{"k":[1,"a",null]}` {
		t.Errorf("raw JSON column = %#v", v)
	}
	u := build(t, []arrow.Field{{Name: "u", Type: arrow.PrimitiveTypes.Uint16}, {Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int8)}}, func(b *array.RecordBuilder) {
		b.Field(0).(*array.Uint16Builder).Append(7)
		b.Field(1).(*array.ListBuilder).Append(true)
	})
	if v, err := columnar.Value(u.Column(0), 0); err != nil || v != uint64(7) {
		t.Errorf("uint16 = %#v, %v", v, err)
	}
	if _, err := columnar.Value(u.Column(1), 0); err == nil || err.Error() != "type list<item: int8, nullable> is not supported" {
		t.Errorf("list: %v", err)
	}
}

// sameJSON reports whether a and b decode to the same value, numbers
// compared as float64 (FromJSON documents int64 to float64 widening).
func sameJSON(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		bn, ok := b.(json.Number)
		if !ok {
			return false
		}
		if a == bn {
			return true
		}
		x, err1 := strconv.ParseFloat(string(a), 64)
		y, err2 := strconv.ParseFloat(string(bn), 64)
		return err1 == nil && err2 == nil && x == y
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			w, ok := bm[k]
			if !ok || !sameJSON(v, w) {
				return false
			}
		}
		return true
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], bs[i]) {
				return false
			}
		}
		return true
	default:
		return cmp.Equal(a, b)
	}
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return m
}

func FuzzFromJSON(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":"x"}` + "\n" + `{"a":2.5,"c":[1,{"d":null}]}`,
		`{"a":true}` + "\n" + `{"a":"true"}`,
		`{"k\u00e9":"\ud800"}`,
		`{"n":1e400}` + "\n" + `{"n":-0}`,
		`{"x":9223372036854775808}`,
		`[1]`,
		`{"a":{"b":"c\"}"}}`,
	} {
		f.Add(s, "")
		f.Add(s, "a")
	}
	f.Fuzz(func(t *testing.T, in, include string) {
		payloads := bytes.Split([]byte(in), []byte("\n"))
		var inc []string
		if include != "" {
			inc = strings.Split(include, ",")
		}
		rec, err := columnar.FromJSON(payloads, inc)
		if err != nil {
			return
		}
		out, err := columnar.ToJSON(rec, nil)
		if err != nil {
			t.Fatalf("ToJSON: %v", err)
		}
		if len(out) != len(payloads) {
			t.Fatalf("%d rows, want %d", len(out), len(payloads))
		}
		keep := map[string]bool{}
		for _, k := range inc {
			keep[k] = true
		}
		for i := range payloads {
			want := decode(t, payloads[i])
			got := decode(t, out[i])
			for k, v := range want {
				if len(keep) > 0 && !keep[k] {
					continue
				}
				if !sameJSON(v, got[k]) {
					t.Errorf("row %d field %q: got %#v, want %#v (out %s)", i, k, got[k], v, out[i])
				}
			}
			for k, v := range got {
				if _, ok := want[k]; !ok && v != nil {
					t.Errorf("row %d: field %q = %#v not in the input", i, k, v)
				}
			}
		}
	})
}

func benchPayloads() [][]byte {
	p := make([][]byte, 1000)
	for i := range p {
		p[i] = fmt.Appendf(nil, `{"id":%d,"name":"user-%d","score":%d.5,"active":%t,"tags":["a","b"],"geo":{"lat":1.5,"lon":2.5}}`, i, i, i, i%2 == 0)
	}
	return p
}

func BenchmarkFromJSON(b *testing.B) {
	p := benchPayloads()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := columnar.FromJSON(p, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkToJSON(b *testing.B) {
	rec, err := columnar.FromJSON(benchPayloads(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := columnar.ToJSON(rec, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func TestRows(t *testing.T) {
	rec, err := columnar.FromJSON(lines(`{"a":1,"__meta_key":"k","b":"x"}`, `{"a":2}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		include []string
		want    []flat
	}{
		{nil, []flat{{`{"a":1,"b":"x"}`, message.Metadata{Key: []byte("k")}}, {`{"a":2,"b":null}`, message.Metadata{}}}},
		{[]string{"__meta_key", "a"}, []flat{{`{"a":1,"__meta_key":"k"}`, message.Metadata{Key: []byte("k")}}, {`{"a":2,"__meta_key":null}`, message.Metadata{}}}},
	} {
		msgs, err := columnar.Rows(rec, tt.include)
		if err != nil {
			t.Fatal(err)
		}
		var got []flat
		for i := range msgs {
			p, _ := msgs[i].Payload()
			got = append(got, flat{string(p), msgs[i].Meta})
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Rows(%q) (-want +got):\n%s", tt.include, diff)
		}
	}
}
