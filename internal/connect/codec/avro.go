package codec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/hamba/avro/v2"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterCodec(component.Spec{
		Name: "avro",
		Summary: "Decodes each payload as Avro binary of a record schema into a table row (primitive fields " +
			"as typed columns, others as JSON columns); encodes each row (or JSON message) as Avro binary.",
		Schema: component.ObjectSchema(map[string]any{
			"schema":      prop("string", "The Avro schema (JSON text) of a record. Give this or schema_path."),
			"schema_path": prop("string", "A file holding the Avro schema. Give this or schema."),
		}),
		Example: `type: avro
schema: '{"type": "record", "name": "Reading", "fields": [{"name": "device", "type": "string"}, {"name": "value", "type": "double"}]}'
`,
	}, NewAvro)
}

var (
	_ component.Codec    = (*Avro)(nil)
	_ component.Columnar = (*Avro)(nil)
)

// Avro is the avro codec. ArkFlow has none.
type Avro struct{ r *avroRecord }

// NewAvro builds the avro codec.
func NewAvro(conf map[string]any, res component.Resources) (component.Codec, error) {
	var c struct {
		Schema     string `json:"schema"`
		SchemaPath string `json:"schema_path"`
	}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	text, field := c.Schema, "schema"
	switch {
	case c.Schema != "" && c.SchemaPath != "":
		return nil, errors.New("schema_path: give schema or schema_path, not both")
	case c.SchemaPath != "":
		b, err := res.FS.ReadFile(c.SchemaPath)
		if err != nil {
			return nil, fmt.Errorf("schema_path: %w", err)
		}
		text, field = string(b), "schema_path"
	case c.Schema == "":
		return nil, errors.New("schema: give schema or schema_path")
	}
	r, err := newAvroRecord(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return &Avro{r: r}, nil
}

// Columnar: Encode reads tables.
func (*Avro) Columnar() {}

// Decode parses each payload: one row each.
func (a *Avro) Decode(_ context.Context, b message.Batch) (message.Batch, error) {
	payloads, err := payloadsOf(b, columnar.ValueField)
	if err != nil {
		return message.Batch{}, err
	}
	var t tableBuilder
	for i, p := range payloads {
		if err := a.r.decodeInto(&t, p); err != nil {
			return message.Batch{}, fmt.Errorf("payload %d: %w", i, err)
		}
	}
	rec, err := t.build()
	if err != nil {
		return message.Batch{}, err
	}
	if rec, err = withMeta(rec, b, nil); err != nil {
		return message.Batch{}, err
	}
	return message.Batch{Table: rec}, nil
}

// Encode writes each row of a table, or each JSON message, as Avro binary.
func (a *Avro) Encode(_ context.Context, b message.Batch) (message.Batch, error) {
	rec, err := tableOf(b)
	if err != nil {
		return message.Batch{}, err
	}
	payloads, err := a.r.encode(rec)
	if err != nil {
		return message.Batch{}, err
	}
	out := messagesOf(payloads)
	if b.Table == nil {
		for i := range out {
			out[i].Meta = b.Messages[i].Meta
		}
	}
	return message.Batch{Messages: out}, nil
}

// avroRecord converts between a record schema and table rows.
type avroRecord struct {
	schema avro.Schema
	cols   []colDef
	kinds  []avro.Type // the field's type, a nullable union unwrapped; "" for a JSON column
	branch []string    // for a nullable union of a named type, the name its values are wrapped in
}

func newAvroRecord(text string) (*avroRecord, error) {
	s, err := avro.Parse(text)
	if err != nil {
		return nil, err
	}
	rs, ok := s.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("want a record schema, got %s", s.Type())
	}
	r := &avroRecord{schema: s}
	for _, f := range rs.Fields() {
		c, kind := avroColumn(f)
		r.cols, r.kinds = append(r.cols, c), append(r.kinds, kind)
		r.branch = append(r.branch, unionBranch(f.Type()))
	}
	return r, nil
}

// avroColumn is the column of a record field: typed for a primitive
// without a logical type (or such a primitive or null), else JSON.
func avroColumn(f *avro.Field) (colDef, avro.Type) {
	s := f.Type()
	if u, ok := s.(*avro.UnionSchema); ok && u.Nullable() && len(u.Types()) == 2 {
		for _, t := range u.Types() {
			if t.Type() != avro.Null {
				s = t
			}
		}
	}
	c := colDef{name: f.Name()}
	if p, ok := s.(*avro.PrimitiveSchema); ok && p.Logical() == nil {
		switch p.Type() {
		case avro.Boolean:
			c.typ = arrow.FixedWidthTypes.Boolean
		case avro.Int:
			c.typ = arrow.PrimitiveTypes.Int32
		case avro.Long:
			c.typ = arrow.PrimitiveTypes.Int64
		case avro.Float:
			c.typ = arrow.PrimitiveTypes.Float32
		case avro.Double:
			c.typ = arrow.PrimitiveTypes.Float64
		case avro.String:
			c.typ = arrow.BinaryTypes.String
		case avro.Bytes:
			c.typ = arrow.BinaryTypes.Binary
		}
		if c.typ != nil {
			return c, p.Type()
		}
	}
	if s.Type() == avro.Enum {
		c.typ = arrow.BinaryTypes.String
		return c, avro.Enum
	}
	c.typ, c.json = arrow.BinaryTypes.String, true
	return c, ""
}

// unionBranch returns the name of the named type in a union of null and
// that type: the decoder wraps such values as {name: value}.
func unionBranch(s avro.Schema) string {
	u, ok := s.(*avro.UnionSchema)
	if !ok || !u.Nullable() || len(u.Types()) != 2 {
		return ""
	}
	for _, t := range u.Types() {
		if n, ok := t.(avro.NamedSchema); ok {
			return n.FullName()
		}
	}
	return ""
}

// decodeInto decodes one payload and adds it to t as a row.
func (r *avroRecord) decodeInto(t *tableBuilder, payload []byte) error {
	// avro.Unmarshal takes running out of data for success; reading past
	// the end of the payload is an error here.
	var v map[string]any
	rd := avro.NewReader(nil, 0).Reset(payload)
	rd.ReadVal(r.schema, &v)
	if rd.Error != nil {
		if errors.Is(rd.Error, io.EOF) {
			return errors.New("avro: payload too short for the schema")
		}
		return rd.Error
	}
	row := make([]any, 0, len(r.cols))
	for i, c := range r.cols {
		j, err := t.column(c)
		if err != nil {
			return err
		}
		for len(row) <= j {
			row = append(row, nil)
		}
		cell := v[c.name]
		if w, ok := cell.(map[string]any); ok && r.branch[i] != "" && len(w) == 1 {
			if inner, ok := w[r.branch[i]]; ok {
				cell = inner
			}
		}
		x, err := avroCell(cell, r.kinds[i], c.json)
		if err != nil {
			return fmt.Errorf("field %q: %w", c.name, err)
		}
		row[j] = x
	}
	t.add(row)
	return nil
}

// avroCell converts a decoded Avro value to its column's Go type.
func avroCell(v any, kind avro.Type, isJSON bool) (any, error) {
	if v == nil {
		return nil, nil
	}
	if isJSON {
		b, err := json.Marshal(v)
		return string(b), err
	}
	switch kind {
	case avro.Int:
		switch x := v.(type) {
		case int:
			return int32(x), nil
		case int32:
			return x, nil
		}
	case avro.Long:
		switch x := v.(type) {
		case int:
			return int64(x), nil
		case int64:
			return x, nil
		}
	default:
		return v, nil
	}
	return nil, fmt.Errorf("unexpected %T", v)
}

// encode converts each row of rec into Avro binary. Columns named as
// fields set them; other columns are ignored.
func (r *avroRecord) encode(rec arrow.RecordBatch) ([][]byte, error) {
	idx := make(map[string]int, rec.NumCols())
	for i := range int(rec.NumCols()) {
		idx[rec.ColumnName(i)] = i
	}
	out := make([][]byte, rec.NumRows())
	for row := range out {
		m := make(map[string]any, len(r.cols))
		for i, c := range r.cols {
			j, ok := idx[c.name]
			if !ok {
				continue
			}
			v, err := cell(rec, j, row)
			if err != nil {
				return nil, fmt.Errorf("row %d: column %q: %w", row, c.name, err)
			}
			if m[c.name], err = avroValue(v, r.kinds[i]); err != nil {
				return nil, fmt.Errorf("row %d: column %q: %w", row, c.name, err)
			}
		}
		b, err := avro.Marshal(r.schema, m)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", row, err)
		}
		out[row] = b
	}
	return out, nil
}

// avroValue converts a column value (columnar.Value) to the Go type the
// Avro encoder wants for kind.
func avroValue(v any, kind avro.Type) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch kind {
	case avro.Int, avro.Long:
		var n int64
		switch x := v.(type) {
		case int64:
			n = x
		case uint64:
			if x > math.MaxInt64 {
				return nil, fmt.Errorf("%d out of range", x)
			}
			n = int64(x)
		case float64:
			if x != math.Trunc(x) || x < math.MinInt64 || x > math.MaxInt64 {
				return nil, fmt.Errorf("%v is not an integer", x)
			}
			n = int64(x)
		default:
			return nil, fmt.Errorf("want an integer, got %T", v)
		}
		if kind == avro.Long {
			return n, nil
		}
		if n < math.MinInt32 || n > math.MaxInt32 {
			return nil, fmt.Errorf("%d out of range of an Avro int", n)
		}
		return int(n), nil
	case avro.Float, avro.Double:
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		case int64:
			f = float64(x)
		case uint64:
			f = float64(x)
		default:
			return nil, fmt.Errorf("want a number, got %T", v)
		}
		if kind == avro.Float {
			return float32(f), nil
		}
		return f, nil
	case avro.Bytes:
		switch x := v.(type) {
		case []byte:
			return x, nil
		case string:
			return []byte(x), nil
		}
		return nil, fmt.Errorf("want bytes, got %T", v)
	}
	return v, nil
}
