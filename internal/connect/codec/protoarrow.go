package codec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// protoTable converts between one message type and table rows: a column
// per field, in declaration order, named as the field.
type protoTable struct {
	md      protoreflect.MessageDescriptor
	cols    []colDef
	complex bool // some field is a message, list or map: a JSON column
}

func newProtoTable(md protoreflect.MessageDescriptor) *protoTable {
	t := &protoTable{md: md}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		c := colDef{name: string(fd.Name()), typ: protoArrowType(fd)}
		if c.typ == nil {
			c.typ, c.json, t.complex = arrow.BinaryTypes.String, true, true
		}
		t.cols = append(t.cols, c)
	}
	return t
}

// protoArrowType is the column type of a scalar field, nil for a
// message, list or map (a JSON column).
func protoArrowType(fd protoreflect.FieldDescriptor) arrow.DataType {
	if fd.IsList() || fd.IsMap() {
		return nil
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return arrow.FixedWidthTypes.Boolean
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind, protoreflect.EnumKind:
		return arrow.PrimitiveTypes.Int32
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return arrow.PrimitiveTypes.Int64
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return arrow.PrimitiveTypes.Uint32
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return arrow.PrimitiveTypes.Uint64
	case protoreflect.FloatKind:
		return arrow.PrimitiveTypes.Float32
	case protoreflect.DoubleKind:
		return arrow.PrimitiveTypes.Float64
	case protoreflect.StringKind:
		return arrow.BinaryTypes.String
	case protoreflect.BytesKind:
		return arrow.BinaryTypes.Binary
	}
	return nil
}

var protoJSONOut = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// row decodes one payload into column values (see tableBuilder). A
// field with presence that is not set is null; one without presence
// (proto3 scalars) holds its default.
func (t *protoTable) row(payload []byte) ([]any, error) {
	m := dynamicpb.NewMessage(t.md)
	if err := proto.Unmarshal(payload, m); err != nil {
		return nil, err
	}
	var nested map[string]json.RawMessage
	if t.complex {
		b, err := protoJSONOut.Marshal(m)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &nested); err != nil {
			return nil, err
		}
	}
	fields := t.md.Fields()
	vals := make([]any, len(t.cols))
	for i, c := range t.cols {
		fd := fields.Get(i)
		if c.json {
			if raw, ok := nested[c.name]; ok && string(raw) != "null" {
				var buf bytes.Buffer // protojson's spacing varies from run to run
				if err := json.Compact(&buf, raw); err != nil {
					return nil, err
				}
				vals[i] = buf.String()
			}
			continue
		}
		if fd.HasPresence() && !m.Has(fd) {
			continue
		}
		v := m.Get(fd)
		switch fd.Kind() {
		case protoreflect.EnumKind:
			vals[i] = int32(v.Enum())
		case protoreflect.BytesKind:
			vals[i] = v.Bytes()
		default:
			vals[i] = v.Interface()
		}
	}
	return vals, nil
}

// decode converts payloads into a table, one row each.
func (t *protoTable) decode(payloads [][]byte) (arrow.RecordBatch, error) {
	var tb tableBuilder
	for _, c := range t.cols {
		if _, err := tb.column(c); err != nil {
			return nil, err
		}
	}
	for i, p := range payloads {
		row, err := t.row(p)
		if err != nil {
			return nil, fmt.Errorf("payload %d: %s: %w", i, t.md.FullName(), err)
		}
		tb.add(row)
	}
	return tb.build()
}

var protoJSONIn = protojson.UnmarshalOptions{DiscardUnknown: true}

// encode converts each row of rec into a message: columns named as
// fields set them (include, when not empty, limits which), others are
// ignored, nulls and missing fields stay unset.
func (t *protoTable) encode(rec arrow.RecordBatch, include []string) ([][]byte, error) {
	var cols []int
	for j := range int(rec.NumCols()) {
		if len(include) == 0 || slices.Contains(include, rec.ColumnName(j)) {
			cols = append(cols, j)
		}
	}
	out := make([][]byte, rec.NumRows())
	for r := range out {
		// The row as a JSON object protojson reads: bytes base64 (as
		// encoding/json writes []byte), JSON columns embedded.
		obj := make(map[string]any, len(cols))
		for _, j := range cols {
			v, err := cell(rec, j, r)
			if err != nil {
				return nil, fmt.Errorf("row %d: column %q: %w", r, rec.ColumnName(j), err)
			}
			obj[rec.ColumnName(j)] = v
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", r, err)
		}
		if out[r], err = t.fromJSON(b); err != nil {
			return nil, fmt.Errorf("row %d: %w", r, err)
		}
	}
	return out, nil
}

// fromJSON encodes one JSON object (field names as in the .proto, or
// their JSON names) as a message.
func (t *protoTable) fromJSON(obj []byte) ([]byte, error) {
	m := dynamicpb.NewMessage(t.md)
	if err := protoJSONIn.Unmarshal(obj, m); err != nil {
		return nil, fmt.Errorf("%s: %w", t.md.FullName(), err)
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}
