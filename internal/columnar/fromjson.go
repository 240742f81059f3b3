package columnar

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/goccy/go-json"
)

// Kinds of JSON values, as bits so a column can record every kind it saw.
const (
	kNull uint8 = 1 << iota
	kBool
	kInt
	kFloat
	kString
	kJSON // object, array, or a number beyond float64's range
)

// jsonValue is one field of one payload: its kind and its raw text, which
// points into the payload.
type jsonValue struct {
	kind uint8
	raw  []byte
}

type jsonColumn struct {
	name  string
	kinds uint8
	vals  []jsonValue // by row; a zero jsonValue is a missing field (null)
}

// jsonMeta marks a JSON column.
var jsonMeta = arrow.NewMetadata([]string{JSONKey}, []string{"true"})

// FromJSON parses each payload as a JSON object and builds a table with a
// column per field (in order of first appearance), types inferred over all
// payloads: bool, int64, float64 (when any value has a fraction or is out
// of int64's range), utf8, or a JSON column. A payload that is not a JSON
// object is an error naming its index. include, when not empty, keeps only
// those fields (in the payloads' order).
//
// The inference, per field over the whole batch, nulls and missing fields
// aside: only booleans make bool; only integers that fit int64 make int64;
// numbers of which at least one has a fraction, an exponent or is beyond
// int64 make float64 (integers converted); only strings make utf8. A field
// that is null or missing in every row is a utf8 column of nulls. Anything
// else (objects, arrays, numbers beyond float64's range, or values of
// different kinds such as 1 and "1") makes a JSON column holding each
// value's compact JSON text. A field repeated within one object keeps its
// last value.
func FromJSON(payloads [][]byte, include []string) (arrow.RecordBatch, error) {
	var keep map[string]bool
	if len(include) > 0 {
		keep = make(map[string]bool, len(include))
		for _, f := range include {
			keep[f] = true
		}
	}
	var cols []*jsonColumn
	index := map[string]int{}
	n := len(payloads)
	for row, p := range payloads {
		if err := scanObject(p, func(key string, v jsonValue) {
			if keep != nil && !keep[key] {
				return
			}
			j, ok := index[key]
			if !ok {
				j = len(cols)
				index[key] = j
				cols = append(cols, &jsonColumn{name: key, vals: make([]jsonValue, n)})
			}
			c := cols[j]
			c.kinds |= v.kind
			c.vals[row] = v
		}); err != nil {
			return nil, fmt.Errorf("message %d: %w", row, err)
		}
	}
	fields := make([]arrow.Field, len(cols))
	arrays := make([]arrow.Array, len(cols))
	for j, c := range cols {
		f, a, err := c.build()
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", c.name, err)
		}
		fields[j], arrays[j] = f, a
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), arrays, int64(n)), nil
}

func (c *jsonColumn) build() (arrow.Field, arrow.Array, error) {
	mem := memory.DefaultAllocator
	f := arrow.Field{Name: c.name, Nullable: true}
	switch c.kinds &^ kNull {
	case 0:
		f.Type = arrow.BinaryTypes.String
		b := array.NewStringBuilder(mem)
		defer b.Release()
		b.AppendNulls(len(c.vals))
		return f, b.NewArray(), nil
	case kBool:
		f.Type = arrow.FixedWidthTypes.Boolean
		b := array.NewBooleanBuilder(mem)
		defer b.Release()
		b.Reserve(len(c.vals))
		for _, v := range c.vals {
			if v.kind != kBool {
				b.AppendNull()
				continue
			}
			b.Append(v.raw[0] == 't')
		}
		return f, b.NewArray(), nil
	case kInt:
		f.Type = arrow.PrimitiveTypes.Int64
		b := array.NewInt64Builder(mem)
		defer b.Release()
		b.Reserve(len(c.vals))
		for _, v := range c.vals {
			if v.kind != kInt {
				b.AppendNull()
				continue
			}
			i, err := strconv.ParseInt(string(v.raw), 10, 64)
			if err != nil {
				return f, nil, err
			}
			b.Append(i)
		}
		return f, b.NewArray(), nil
	case kFloat, kInt | kFloat:
		f.Type = arrow.PrimitiveTypes.Float64
		b := array.NewFloat64Builder(mem)
		defer b.Release()
		b.Reserve(len(c.vals))
		for _, v := range c.vals {
			if v.kind != kInt && v.kind != kFloat {
				b.AppendNull()
				continue
			}
			x, err := strconv.ParseFloat(string(v.raw), 64)
			if err != nil {
				return f, nil, err
			}
			b.Append(x)
		}
		return f, b.NewArray(), nil
	case kString:
		f.Type = arrow.BinaryTypes.String
		b := array.NewStringBuilder(mem)
		defer b.Release()
		b.Reserve(len(c.vals))
		for _, v := range c.vals {
			if v.kind != kString {
				b.AppendNull()
				continue
			}
			s, err := unquote(v.raw)
			if err != nil {
				return f, nil, err
			}
			b.Append(s)
		}
		return f, b.NewArray(), nil
	default:
		f.Type = arrow.BinaryTypes.String
		f.Metadata = jsonMeta
		b := array.NewStringBuilder(mem)
		defer b.Release()
		b.Reserve(len(c.vals))
		var buf []byte
		for _, v := range c.vals {
			switch v.kind {
			case 0, kNull:
				b.AppendNull()
			case kJSON:
				buf = compact(buf[:0], v.raw)
				b.BinaryBuilder.Append(buf)
			default:
				b.BinaryBuilder.Append(v.raw)
			}
		}
		return f, b.NewArray(), nil
	}
}

// compact appends src without the whitespace between tokens.
func compact(dst, src []byte) []byte {
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case ' ', '\t', '\n', '\r':
		case '"':
			end := skipString(src, i)
			dst = append(dst, src[i:end]...)
			i = end - 1
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// unquote decodes a JSON string literal.
func unquote(raw []byte) (string, error) {
	inner := raw[1 : len(raw)-1]
	plain := true
	for _, c := range inner {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(inner), nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

var errNotObject = errors.New("want a JSON object")

// scanObject calls fn for each field of the JSON object p, in order. p
// is checked to be valid JSON first, so the scan below trusts its syntax.
func scanObject(p []byte, fn func(key string, v jsonValue)) error {
	if !json.Valid(p) {
		var v any
		err := json.Unmarshal(p, &v)
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return fmt.Errorf("invalid JSON: %w", err)
	}
	i := skipSpace(p, 0)
	if p[i] != '{' {
		return fmt.Errorf("%w, got %s", errNotObject, kindName(p[i]))
	}
	i = skipSpace(p, i+1)
	if p[i] == '}' {
		return nil
	}
	for {
		end := skipString(p, i)
		key, err := unquote(p[i:end])
		if err != nil {
			return err
		}
		i = skipSpace(p, end)
		i = skipSpace(p, i+1) // ':'
		end = skipValue(p, i)
		raw := p[i:end]
		v := jsonValue{raw: raw}
		switch raw[0] {
		case 'n':
			v.kind = kNull
		case 't', 'f':
			v.kind = kBool
		case '"':
			v.kind = kString
		case '{', '[':
			v.kind = kJSON
		default:
			v.kind = numberKind(raw)
		}
		fn(key, v)
		i = skipSpace(p, end)
		if p[i] == '}' {
			return nil
		}
		i = skipSpace(p, i+1) // ','
	}
}

func numberKind(raw []byte) uint8 {
	for _, c := range raw {
		if c == '.' || c == 'e' || c == 'E' {
			return floatKind(raw)
		}
	}
	if _, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return kInt
	}
	return floatKind(raw)
}

func floatKind(raw []byte) uint8 {
	if _, err := strconv.ParseFloat(string(raw), 64); err != nil {
		return kJSON
	}
	return kFloat
}

func kindName(c byte) string {
	switch c {
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

func skipSpace(p []byte, i int) int {
	for i < len(p) {
		switch p[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the string literal starting at p[i].
func skipString(p []byte, i int) int {
	for i++; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index after the value starting at p[i].
func skipValue(p []byte, i int) int {
	switch p[i] {
	case '"':
		return skipString(p, i)
	case '{', '[':
		depth := 0
		for ; i < len(p); i++ {
			switch p[i] {
			case '"':
				i = skipString(p, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	default:
		for ; i < len(p); i++ {
			switch p[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
		}
		return i
	}
}
