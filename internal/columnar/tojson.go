package columnar

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/goccy/go-json"
)

// ToJSON returns each row of rec as a JSON object, columns in table order,
// nulls as null, JSON columns embedded as JSON. include, when not empty,
// keeps only those columns.
//
// Values are written as: integers and floats as JSON numbers (as Go's
// encoding/json formats them; NaN and infinities as null); utf8 columns as
// strings (no HTML escaping); binary columns as strings when the bytes are
// valid UTF-8, else as standard base64 strings; timestamps as RFC 3339
// strings in UTC with nanoseconds as needed; date32 and date64 as
// "2006-01-02". Column types: null, bool, int8 to int64, uint8 to uint64,
// float32, float64, utf8, large_utf8, utf8_view, binary, large_binary,
// binary_view, timestamp, date32, date64. Any other type is an error
// naming the column, and so is a JSON column holding text that is not JSON.
func ToJSON(rec arrow.RecordBatch, include []string) ([][]byte, error) {
	keep := func(string) bool { return true }
	if len(include) > 0 {
		set := make(map[string]bool, len(include))
		for _, f := range include {
			set[f] = true
		}
		keep = func(name string) bool { return set[name] }
	}
	return toJSON(rec, keep)
}

// toJSONOmitMeta is ToJSON without the __meta_* columns.
func toJSONOmitMeta(rec arrow.RecordBatch) ([][]byte, error) {
	return toJSON(rec, func(name string) bool { return !strings.HasPrefix(name, MetaPrefix) })
}

type columnWriter struct {
	name  string
	key   []byte // `"name":`
	col   arrow.Array
	write func(dst []byte, i int) ([]byte, error)
}

func toJSON(rec arrow.RecordBatch, keep func(string) bool) ([][]byte, error) {
	schema := rec.Schema()
	var ws []columnWriter
	for j, f := range schema.Fields() {
		if !keep(f.Name) {
			continue
		}
		col := rec.Column(j)
		write, err := writerFor(f, col)
		if err != nil {
			return nil, err
		}
		key := appendString(nil, f.Name)
		key = append(key, ':')
		ws = append(ws, columnWriter{name: f.Name, key: key, col: col, write: write})
	}
	n := int(rec.NumRows())
	out := make([][]byte, n)
	var buf []byte
	for i := 0; i < n; i++ {
		buf = append(buf[:0], '{')
		for k := range ws {
			w := &ws[k]
			if k > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, w.key...)
			if w.col.IsNull(i) {
				buf = append(buf, "null"...)
				continue
			}
			var err error
			if buf, err = w.write(buf, i); err != nil {
				return nil, fmt.Errorf("column %q, row %d: %w", w.name, i, err)
			}
		}
		buf = append(buf, '}')
		out[i] = append([]byte(nil), buf...)
	}
	return out, nil
}

// IsJSON reports whether f is a JSON column.
func IsJSON(f arrow.Field) bool {
	v, ok := f.Metadata.GetValue(JSONKey)
	return ok && v == "true"
}

func writerFor(f arrow.Field, col arrow.Array) (func([]byte, int) ([]byte, error), error) {
	if IsJSON(f) {
		var text func(int) string
		switch c := col.(type) {
		case *array.String:
			text = c.Value
		case *array.LargeString:
			text = c.Value
		case *array.StringView:
			text = c.Value
		default:
			return nil, fmt.Errorf("column %q: a JSON column must be utf8, not %s", f.Name, col.DataType())
		}
		return func(dst []byte, i int) ([]byte, error) {
			s := text(i)
			if !json.Valid([]byte(s)) {
				return nil, fmt.Errorf("not JSON: %q", s)
			}
			return append(dst, s...), nil
		}, nil
	}
	switch c := col.(type) {
	case *array.Null:
		return func(dst []byte, _ int) ([]byte, error) { return append(dst, "null"...), nil }, nil
	case *array.Boolean:
		return func(dst []byte, i int) ([]byte, error) { return strconv.AppendBool(dst, c.Value(i)), nil }, nil
	case *array.Int8:
		return intWriter(c.Value), nil
	case *array.Int16:
		return intWriter(c.Value), nil
	case *array.Int32:
		return intWriter(c.Value), nil
	case *array.Int64:
		return intWriter(c.Value), nil
	case *array.Uint8:
		return uintWriter(c.Value), nil
	case *array.Uint16:
		return uintWriter(c.Value), nil
	case *array.Uint32:
		return uintWriter(c.Value), nil
	case *array.Uint64:
		return uintWriter(c.Value), nil
	case *array.Float32:
		return func(dst []byte, i int) ([]byte, error) { return appendFloat(dst, float64(c.Value(i)), 32), nil }, nil
	case *array.Float64:
		return func(dst []byte, i int) ([]byte, error) { return appendFloat(dst, c.Value(i), 64), nil }, nil
	case *array.String:
		return stringWriter(c.Value), nil
	case *array.LargeString:
		return stringWriter(c.Value), nil
	case *array.StringView:
		return stringWriter(c.Value), nil
	case *array.Binary:
		return binaryWriter(c.Value), nil
	case *array.LargeBinary:
		return binaryWriter(c.Value), nil
	case *array.BinaryView:
		return binaryWriter(c.Value), nil
	case *array.Timestamp:
		toTime, err := c.DataType().(*arrow.TimestampType).GetToTimeFunc()
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		return func(dst []byte, i int) ([]byte, error) {
			return appendTime(dst, toTime(c.Value(i)).UTC(), time.RFC3339Nano), nil
		}, nil
	case *array.Date32:
		return func(dst []byte, i int) ([]byte, error) {
			return appendTime(dst, c.Value(i).ToTime(), time.DateOnly), nil
		}, nil
	case *array.Date64:
		return func(dst []byte, i int) ([]byte, error) {
			return appendTime(dst, c.Value(i).ToTime(), time.DateOnly), nil
		}, nil
	}
	return nil, fmt.Errorf("column %q: type %s is not supported", f.Name, col.DataType())
}

func intWriter[T int8 | int16 | int32 | int64](v func(int) T) func([]byte, int) ([]byte, error) {
	return func(dst []byte, i int) ([]byte, error) { return strconv.AppendInt(dst, int64(v(i)), 10), nil }
}

func uintWriter[T uint8 | uint16 | uint32 | uint64](v func(int) T) func([]byte, int) ([]byte, error) {
	return func(dst []byte, i int) ([]byte, error) { return strconv.AppendUint(dst, uint64(v(i)), 10), nil }
}

func stringWriter(v func(int) string) func([]byte, int) ([]byte, error) {
	return func(dst []byte, i int) ([]byte, error) { return appendString(dst, v(i)), nil }
}

func binaryWriter(v func(int) []byte) func([]byte, int) ([]byte, error) {
	return func(dst []byte, i int) ([]byte, error) { return appendBytes(dst, v(i)), nil }
}

// appendBytes writes b as a JSON string: the text when it is valid UTF-8,
// else its standard base64 encoding.
func appendBytes(dst, b []byte) []byte {
	if utf8.Valid(b) {
		return appendString(dst, string(b))
	}
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

func appendTime(dst []byte, t time.Time, layout string) []byte {
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, layout)
	return append(dst, '"')
}

// appendFloat formats f as encoding/json does; NaN and infinities, which
// JSON cannot hold, become null.
func appendFloat(dst []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if format == 'e' {
		// e-09 becomes e-9, as in encoding/json.
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string. Unlike encoding/json it does not
// escape <, > and &; invalid UTF-8 becomes U+FFFD.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
