package codec

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/message"
)

// colDef is one column of a table being built: a typed column, or a JSON
// column (utf8 marked with columnar.JSONKey).
type colDef struct {
	name string
	typ  arrow.DataType
	json bool
}

func (c colDef) field() arrow.Field {
	f := arrow.Field{Name: c.name, Type: c.typ, Nullable: true}
	if c.json {
		f.Metadata = arrow.NewMetadata([]string{columnar.JSONKey}, []string{"true"})
	}
	return f
}

func (c colDef) describe() string {
	if c.json {
		return "json"
	}
	return c.typ.String()
}

// tableBuilder gathers rows of Go values (bool, int32, int64, uint32,
// uint64, float32, float64, string, []byte; nil for null; JSON text for a
// JSON column) and builds one table. Columns are in order of first
// appearance; a column named twice with different types is an error.
type tableBuilder struct {
	cols []colDef
	idx  map[string]int
	rows [][]any
}

// column returns the index of column c, adding it when new.
func (t *tableBuilder) column(c colDef) (int, error) {
	if t.idx == nil {
		t.idx = make(map[string]int)
	}
	if i, ok := t.idx[c.name]; ok {
		have := t.cols[i]
		if have.json != c.json || !arrow.TypeEqual(have.typ, c.typ) {
			return 0, fmt.Errorf("field %q is %s in one record and %s in another", c.name, have.describe(), c.describe())
		}
		return i, nil
	}
	t.idx[c.name] = len(t.cols)
	t.cols = append(t.cols, c)
	return len(t.cols) - 1, nil
}

// add appends a row: vals[i] is the value of column cols[i]; a row shorter
// than the columns is null in the rest.
func (t *tableBuilder) add(vals []any) { t.rows = append(t.rows, vals) }

// build returns the table.
func (t *tableBuilder) build() (arrow.RecordBatch, error) {
	fields := make([]arrow.Field, len(t.cols))
	for i, c := range t.cols {
		fields[i] = c.field()
	}
	rb := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer rb.Release()
	for _, row := range t.rows {
		for i := range t.cols {
			var v any
			if i < len(row) {
				v = row[i]
			}
			if err := appendValue(rb.Field(i), v); err != nil {
				return nil, fmt.Errorf("field %q: %w", t.cols[i].name, err)
			}
		}
	}
	return rb.NewRecordBatch(), nil
}

// appendValue appends v to b; v's Go type matches the builder's.
func appendValue(b array.Builder, v any) error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	ok := true
	switch b := b.(type) {
	case *array.BooleanBuilder:
		var x bool
		x, ok = v.(bool)
		b.Append(x)
	case *array.Int32Builder:
		var x int32
		x, ok = v.(int32)
		b.Append(x)
	case *array.Int64Builder:
		var x int64
		x, ok = v.(int64)
		b.Append(x)
	case *array.Uint32Builder:
		var x uint32
		x, ok = v.(uint32)
		b.Append(x)
	case *array.Uint64Builder:
		var x uint64
		x, ok = v.(uint64)
		b.Append(x)
	case *array.Float32Builder:
		var x float32
		x, ok = v.(float32)
		b.Append(x)
	case *array.Float64Builder:
		var x float64
		x, ok = v.(float64)
		b.Append(x)
	case *array.StringBuilder:
		var x string
		x, ok = v.(string)
		b.Append(x)
	case *array.BinaryBuilder:
		var x []byte
		x, ok = v.([]byte)
		b.Append(x)
	default:
		return fmt.Errorf("unsupported column type %s", b.Type())
	}
	if !ok {
		return fmt.Errorf("value %T does not fit a %s column", v, b.Type())
	}
	return nil
}

// isJSONField reports whether f is a JSON column.
func isJSONField(f arrow.Field) bool {
	_, ok := f.Metadata.GetValue(columnar.JSONKey)
	return ok
}

// payloadsOf returns the raw payloads of a batch: its messages' payloads,
// or a table's column field (columnar.Payloads).
func payloadsOf(b message.Batch, field string) ([][]byte, error) {
	if b.Table != nil {
		return columnar.Payloads(b, field)
	}
	out := make([][]byte, len(b.Messages))
	for i := range b.Messages {
		p, err := b.Messages[i].Payload()
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// cell returns row r of column j of rec as columnar.Value does, a JSON
// column's value decoded.
func cell(rec arrow.RecordBatch, j, r int) (any, error) {
	v, err := columnar.Value(rec.Column(j), r)
	if err != nil {
		return nil, err
	}
	if s, ok := v.(string); ok && isJSONField(rec.Schema().Field(j)) {
		var x any
		if err := json.Unmarshal([]byte(s), &x); err != nil {
			return nil, fmt.Errorf("JSON column: %w", err)
		}
		return x, nil
	}
	return v, nil
}

// withMeta appends to rec, decoded from the messages of b, the __meta_*
// columns of columnar.FromMessages: row i gets the metadata of message
// src[i] (nil src: row i comes from message i). As in ArkFlow, a decoded
// table keeps each record's source, partition, offset, key and
// timestamps, and columnar.Flatten restores them as metadata. A table
// in b lends its own __meta_* columns instead. A column rec already has
// is kept.
func withMeta(rec arrow.RecordBatch, b message.Batch, src []int) (arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	if b.Table != nil {
		if src != nil || b.Table.NumRows() != int64(n) {
			return rec, nil
		}
		return appendMeta(rec, b.Table), nil
	}
	if len(b.Messages) == 0 {
		return rec, nil
	}
	sel := make([]message.Message, n)
	for i := range sel {
		j := i
		if src != nil {
			j = src[i]
		}
		sel[i] = message.New(nil)
		sel[i].Meta = b.Messages[j].Meta
	}
	meta, err := columnar.FromMessages(sel)
	if err != nil {
		return nil, err
	}
	return appendMeta(rec, meta), nil
}

// appendMeta returns rec with the __meta_* columns of meta (of as many
// rows) that rec does not have.
func appendMeta(rec, meta arrow.RecordBatch) arrow.RecordBatch {
	fields, cols := rec.Schema().Fields(), rec.Columns()
	for i, f := range meta.Schema().Fields() {
		if !strings.HasPrefix(f.Name, columnar.MetaPrefix) || rec.Schema().HasField(f.Name) {
			continue
		}
		fields, cols = append(fields, f), append(cols, meta.Column(i))
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
}
