package columnar

import (
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/goccy/go-json"

	"github.com/flowplane/flowplane/internal/message"
)

// ValueField is the binary column holding raw payloads (ArkFlow's
// DEFAULT_BINARY_VALUE_FIELD).
const ValueField = "__value__"

// Metadata columns of FromMessages, as ArkFlow names them.
const (
	MetaSource     = "__meta_source"      // utf8
	MetaPartition  = "__meta_partition"   // int32
	MetaOffset     = "__meta_offset"      // int64
	MetaKey        = "__meta_key"         // binary
	MetaTimestamp  = "__meta_timestamp"   // timestamp[ms, UTC], null when unknown
	MetaIngestTime = "__meta_ingest_time" // timestamp[ms, UTC], null when unknown
	MetaExt        = "__meta_ext"         // JSON column: the free-form fields as an object
	MetaPrefix     = "__meta_"
)

// JSONKey is the field metadata key marking a utf8 column whose values are
// JSON documents (nested objects, arrays, mixed types).
const JSONKey = "flowplane.json"

// messagesSchema is the schema of FromMessages.
var messagesSchema = arrow.NewSchema([]arrow.Field{
	{Name: ValueField, Type: arrow.BinaryTypes.Binary},
	{Name: MetaSource, Type: arrow.BinaryTypes.String},
	{Name: MetaPartition, Type: arrow.PrimitiveTypes.Int32},
	{Name: MetaOffset, Type: arrow.PrimitiveTypes.Int64},
	{Name: MetaKey, Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: MetaTimestamp, Type: arrow.FixedWidthTypes.Timestamp_ms, Nullable: true},
	{Name: MetaIngestTime, Type: arrow.FixedWidthTypes.Timestamp_ms, Nullable: true},
	{Name: MetaExt, Type: arrow.BinaryTypes.String, Nullable: true, Metadata: jsonMeta},
}, nil)

// FromMessages returns the binary table of msgs: __value__ and the
// metadata columns. __value__ holds each payload (a structured message is
// serialized as JSON); __meta_key is null when the key is empty, the two
// timestamps (milliseconds, UTC) when zero, and __meta_ext, a JSON object
// of Meta.Fields, when there are none.
func FromMessages(msgs []message.Message) (arrow.RecordBatch, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, messagesSchema)
	defer b.Release()
	b.Reserve(len(msgs))
	value := b.Field(0).(*array.BinaryBuilder)
	source := b.Field(1).(*array.StringBuilder)
	partition := b.Field(2).(*array.Int32Builder)
	offset := b.Field(3).(*array.Int64Builder)
	key := b.Field(4).(*array.BinaryBuilder)
	ts := b.Field(5).(*array.TimestampBuilder)
	ingest := b.Field(6).(*array.TimestampBuilder)
	ext := b.Field(7).(*array.StringBuilder)
	for i := range msgs {
		m := &msgs[i]
		p, err := m.Payload()
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		value.Append(p)
		source.Append(m.Meta.Source)
		partition.Append(m.Meta.Partition)
		offset.Append(m.Meta.Offset)
		if len(m.Meta.Key) == 0 {
			key.AppendNull()
		} else {
			key.Append(m.Meta.Key)
		}
		appendMillis(ts, m.Meta.Timestamp)
		appendMillis(ingest, m.Meta.IngestTime)
		if len(m.Meta.Fields) == 0 {
			ext.AppendNull()
		} else {
			j, err := json.Marshal(m.Meta.Fields)
			if err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
			ext.BinaryBuilder.Append(j)
		}
	}
	return b.NewRecordBatch(), nil
}

func appendMillis(b *array.TimestampBuilder, t time.Time) {
	if t.IsZero() {
		b.AppendNull()
		return
	}
	b.Append(arrow.Timestamp(t.UnixMilli()))
}

// Payloads returns the raw payloads of a batch: its messages' payloads, or
// the values of its table's column field (binary or utf8). A table
// without that column is an error naming it. A null value is an empty
// payload; table values are copied.
func Payloads(b message.Batch, field string) ([][]byte, error) {
	if b.Table == nil {
		out := make([][]byte, len(b.Messages))
		for i := range b.Messages {
			p, err := b.Messages[i].Payload()
			if err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
			out[i] = p
		}
		return out, nil
	}
	ix := b.Table.Schema().FieldIndices(field)
	if len(ix) == 0 {
		return nil, fmt.Errorf("the table has no column %q", field)
	}
	return columnBytes(b.Table.Column(ix[0]), field)
}

func columnBytes(col arrow.Array, name string) ([][]byte, error) {
	var get func(int) []byte
	switch c := col.(type) {
	case *array.Binary:
		get = c.Value
	case *array.LargeBinary:
		get = c.Value
	case *array.BinaryView:
		get = c.Value
	case *array.String:
		get = func(i int) []byte { return []byte(c.Value(i)) }
	case *array.LargeString:
		get = func(i int) []byte { return []byte(c.Value(i)) }
	case *array.StringView:
		get = func(i int) []byte { return []byte(c.Value(i)) }
	default:
		return nil, fmt.Errorf("column %q is %s, want binary or utf8", name, col.DataType())
	}
	out := make([][]byte, col.Len())
	for i := range out {
		if col.IsNull(i) {
			out[i] = []byte{}
			continue
		}
		out[i] = append([]byte{}, get(i)...)
	}
	return out, nil
}

// Value returns row i of column c as a Go value: nil, bool, int64,
// uint64, float64, string, []byte, time.Time, or for a JSON column the
// decoded value (map[string]any, []any, ...).
//
// Value cannot see a column's field metadata, so c is taken for a JSON
// column when it is a JSON array (see JSONArray). Timestamps are in
// UTC; dates are midnight UTC. Bytes are copied.
func Value(c arrow.Array, i int) (any, error) {
	if c.IsNull(i) {
		return nil, nil
	}
	switch c := c.(type) {
	case *JSONArray:
		var v any
		if err := json.Unmarshal([]byte(c.text(i)), &v); err != nil {
			return nil, fmt.Errorf("not JSON: %w", err)
		}
		return v, nil
	case *array.Null:
		return nil, nil
	case *array.Boolean:
		return c.Value(i), nil
	case *array.Int8:
		return int64(c.Value(i)), nil
	case *array.Int16:
		return int64(c.Value(i)), nil
	case *array.Int32:
		return int64(c.Value(i)), nil
	case *array.Int64:
		return c.Value(i), nil
	case *array.Uint8:
		return uint64(c.Value(i)), nil
	case *array.Uint16:
		return uint64(c.Value(i)), nil
	case *array.Uint32:
		return uint64(c.Value(i)), nil
	case *array.Uint64:
		return c.Value(i), nil
	case *array.Float32:
		return float64(c.Value(i)), nil
	case *array.Float64:
		return c.Value(i), nil
	case *array.String:
		return c.Value(i), nil
	case *array.LargeString:
		return c.Value(i), nil
	case *array.StringView:
		return c.Value(i), nil
	case *array.Binary:
		return append([]byte{}, c.Value(i)...), nil
	case *array.LargeBinary:
		return append([]byte{}, c.Value(i)...), nil
	case *array.BinaryView:
		return append([]byte{}, c.Value(i)...), nil
	case *array.Timestamp:
		toTime, err := c.DataType().(*arrow.TimestampType).GetToTimeFunc()
		if err != nil {
			return nil, err
		}
		return toTime(c.Value(i)).UTC(), nil
	case *array.Date32:
		return c.Value(i).ToTime(), nil
	case *array.Date64:
		return c.Value(i).ToTime(), nil
	}
	return nil, fmt.Errorf("type %s is not supported", c.DataType())
}

// JSONArray wraps a JSON column so that Value decodes its values. Column
// returns it for JSON columns.
type JSONArray struct {
	arrow.Array
}

func (a *JSONArray) text(i int) string {
	switch c := a.Array.(type) {
	case *array.String:
		return c.Value(i)
	case *array.LargeString:
		return c.Value(i)
	case *array.StringView:
		return c.Value(i)
	}
	return ""
}

// Column returns column j of rec for Value: a JSON column wrapped in
// JSONArray, any other as it is.
func Column(rec arrow.RecordBatch, j int) arrow.Array {
	c := rec.Column(j)
	if IsJSON(rec.Schema().Field(j)) {
		switch c.(type) {
		case *array.String, *array.LargeString, *array.StringView:
			return &JSONArray{Array: c}
		}
	}
	return c
}

// Flatten replaces b.Table with Messages: the __value__ column's bytes as
// payloads when the table has one, else each row as a JSON object without
// the __meta_* columns; __meta_* columns set each message's metadata.
// A batch without a table is left as it is.
//
// The metadata columns may be any subset of FromMessages' and of any
// integer, binary or utf8 type that holds their values; __meta_ext is a
// JSON object (a JSON column or utf8 text) whose string values become
// Meta.Fields as they are and other values as their JSON text.
func Flatten(b *message.Batch) error {
	if b.Table == nil {
		return nil
	}
	var msgs []message.Message
	var err error
	if ix := b.Table.Schema().FieldIndices(ValueField); len(ix) > 0 {
		var payloads [][]byte
		if payloads, err = columnBytes(b.Table.Column(ix[0]), ValueField); err != nil {
			return err
		}
		msgs = make([]message.Message, len(payloads))
		for i := range msgs {
			msgs[i] = message.New(payloads[i])
		}
		err = setMetas(b.Table, msgs)
	} else {
		msgs, err = Rows(b.Table, nil)
	}
	if err != nil {
		return err
	}
	b.Messages, b.Table = msgs, nil
	return nil
}

// Rows returns a message per row of rec: its payload the row as a JSON
// object (see ToJSON) of the include columns, or when include is empty of
// every column but the __meta_* ones; its metadata from the __meta_*
// columns, as Flatten sets it.
func Rows(rec arrow.RecordBatch, include []string) ([]message.Message, error) {
	var payloads [][]byte
	var err error
	if len(include) > 0 {
		payloads, err = ToJSON(rec, include)
	} else {
		payloads, err = toJSONOmitMeta(rec)
	}
	if err != nil {
		return nil, err
	}
	msgs := make([]message.Message, len(payloads))
	for i := range msgs {
		msgs[i] = message.New(payloads[i])
	}
	return msgs, setMetas(rec, msgs)
}

// setMetas sets the metadata of msgs from the __meta_* columns of rec.
func setMetas(rec arrow.RecordBatch, msgs []message.Message) error {
	for j, f := range rec.Schema().Fields() {
		if !strings.HasPrefix(f.Name, MetaPrefix) {
			continue
		}
		col := Column(rec, j)
		for i := range msgs {
			v, err := Value(col, i)
			if err != nil {
				return fmt.Errorf("column %q, row %d: %w", f.Name, i, err)
			}
			if v == nil {
				continue
			}
			if err := setMeta(&msgs[i].Meta, f.Name, v); err != nil {
				return fmt.Errorf("column %q, row %d: %w", f.Name, i, err)
			}
		}
	}
	return nil
}

func setMeta(m *message.Metadata, name string, v any) error {
	switch name {
	case MetaSource:
		s, ok := v.(string)
		if !ok {
			if bs, isBytes := v.([]byte); isBytes {
				s, ok = string(bs), true
			}
		}
		if !ok {
			return fmt.Errorf("want a string, got %T", v)
		}
		m.Source = s
	case MetaPartition:
		x, err := toInt(v)
		if err != nil {
			return err
		}
		m.Partition = int32(x)
	case MetaOffset:
		x, err := toInt(v)
		if err != nil {
			return err
		}
		m.Offset = x
	case MetaKey:
		switch k := v.(type) {
		case []byte:
			m.Key = k
		case string:
			m.Key = []byte(k)
		default:
			return fmt.Errorf("want bytes, got %T", v)
		}
	case MetaTimestamp, MetaIngestTime:
		t, ok := v.(time.Time)
		if !ok {
			return fmt.Errorf("want a timestamp, got %T", v)
		}
		if name == MetaTimestamp {
			m.Timestamp = t
		} else {
			m.IngestTime = t
		}
	case MetaExt:
		if s, ok := v.(string); ok {
			if err := json.Unmarshal([]byte(s), &v); err != nil {
				return fmt.Errorf("not JSON: %w", err)
			}
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("want a JSON object, got %T", v)
		}
		if len(obj) == 0 {
			return nil
		}
		m.Fields = make(map[string]string, len(obj))
		for k, x := range obj {
			if s, ok := x.(string); ok {
				m.Fields[k] = s
				continue
			}
			j, err := json.Marshal(x)
			if err != nil {
				return err
			}
			m.Fields[k] = string(j)
		}
	}
	return nil
}

func toInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case uint64:
		return int64(x), nil
	}
	return 0, fmt.Errorf("want an integer, got %T", v)
}
