package sqldb

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Column type families, from database/sql's DatabaseTypeName (upper case,
// driver-specific: pgx says INT8, MySQL BIGINT, SQLite the declared type).
func isBinaryType(t string) bool {
	switch t {
	case "BYTEA", "BLOB", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB", "BINARY", "VARBINARY", "BIT":
		return true
	}
	return false
}

func isJSONType(t string) bool { return t == "JSON" || t == "JSONB" }

func isDecimalType(t string) bool {
	return t == "NUMERIC" || t == "DECIMAL" || strings.HasPrefix(t, "DECIMAL(") || strings.HasPrefix(t, "NUMERIC(")
}

func isIntType(t string) bool {
	t = strings.TrimPrefix(t, "UNSIGNED ")
	switch t {
	case "INT", "INTEGER", "TINYINT", "SMALLINT", "MEDIUMINT", "BIGINT", "INT2", "INT4", "INT8", "YEAR":
		return true
	}
	return false
}

func isFloatType(t string) bool {
	switch t {
	case "FLOAT", "DOUBLE", "REAL", "FLOAT4", "FLOAT8", "DOUBLE PRECISION":
		return true
	}
	return false
}

// jsonValue maps a value scanned from a column of database type t to what
// goes into the row's JSON object: numbers stay numbers (decimals keep
// their exact digits), timestamps become RFC 3339 strings, binary data
// base64, JSON columns are embedded as JSON, NULL is null.
func jsonValue(v any, t string) any {
	switch x := v.(type) {
	case nil:
		return nil
	case bool, int64, int32, int16, int8, int, uint64, uint32, uint16, uint8, uint:
		return x
	case float64:
		return jsonFloat(x)
	case float32:
		return jsonFloat(float64(x))
	case time.Time:
		return x.Format(time.RFC3339Nano)
	case [16]byte: // pgx's uuid
		return fmt.Sprintf("%x-%x-%x-%x-%x", x[0:4], x[4:6], x[6:8], x[8:10], x[10:16])
	case string:
		return textValue(x, t)
	case []byte:
		if isBinaryType(t) {
			return base64.StdEncoding.EncodeToString(x)
		}
		if !utf8.Valid(x) {
			return base64.StdEncoding.EncodeToString(x)
		}
		return textValue(string(x), t)
	default:
		if b, err := json.Marshal(x); err == nil {
			return json.RawMessage(b)
		}
		return fmt.Sprint(x)
	}
}

// jsonFloat keeps finite floats as numbers; JSON has no NaN or infinity.
func jsonFloat(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return f
}

// textValue maps text a driver returned for a column of type t: MySQL's
// text protocol returns every column as text, pgx returns decimals and
// JSON as text.
func textValue(s, t string) any {
	switch {
	case isJSONType(t):
		if json.Valid([]byte(s)) {
			return json.RawMessage(s)
		}
	case isDecimalType(t), isIntType(t), isFloatType(t):
		if isJSONNumber(s) {
			return json.Number(s)
		}
	}
	return s
}

// isJSONNumber reports whether s is a JSON number literal.
func isJSONNumber(s string) bool {
	digits := func(i int) int {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i
	}
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = digits(i)
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return false
		}
		i = j
	}
	return i == len(s)
}

// rowJSON encodes one row as a JSON object whose keys are the column names
// in result order.
func rowJSON(cols []string, types []string, vals []any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, c := range cols {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(c)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(jsonValue(vals[i], types[i]))
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", c, err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// errNotObject is a message whose payload is not a JSON object.
var errNotObject = errors.New("payload is not a JSON object")

// decodeObject reads a message payload as a JSON object whose numbers keep
// their exact text.
func decodeObject(payload []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %v", errNotObject, err)
	}
	if d.More() {
		return nil, fmt.Errorf("%w: trailing data", errNotObject)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errNotObject
	}
	return m, nil
}

// bindValue turns one JSON field into a bind parameter: integers as int64,
// other numbers as float64 (or their text when out of range), nested
// objects and arrays as their JSON text.
func bindValue(v any) (any, error) {
	switch x := v.(type) {
	case nil, bool, string:
		return x, nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		if f, err := x.Float64(); err == nil && !math.IsInf(f, 0) {
			return f, nil
		}
		return x.String(), nil
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return nil, err
		}
		return string(b), nil
	}
}

// decodeScalar reads a JSON scalar (a cursor's initial value or saved
// position) as a bind parameter.
func decodeScalar(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	switch v.(type) {
	case map[string]any, []any:
		return nil, errors.New("must be a number, string or boolean")
	}
	return bindValue(v)
}
