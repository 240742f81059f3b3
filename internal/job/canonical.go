package job

import (
	"math"
	"strconv"

	"github.com/goccy/go-json"
)

// CanonicalKey is the byte form of a key value that KeyGroup hashes and
// keyed state is stored under. Strings are their bytes; integral numbers
// their decimal form (so 42 and 42.0 are one key); other numbers the
// shortest decimal that round-trips; true, false and null their JSON
// words; objects and arrays their JSON encoding with sorted object keys.
// It is part of the state format.
func CanonicalKey(v any) []byte {
	return AppendCanonicalKey(nil, v)
}

// AppendCanonicalKey appends CanonicalKey(v) to dst.
func AppendCanonicalKey(dst []byte, v any) []byte {
	switch x := v.(type) {
	case string:
		return append(dst, x...)
	case []byte:
		return append(dst, x...)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return strconv.AppendInt(dst, int64(x), 10)
		}
		return strconv.AppendFloat(dst, x, 'g', -1, 64)
	case int:
		return strconv.AppendInt(dst, int64(x), 10)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case bool:
		return strconv.AppendBool(dst, x)
	case nil:
		return append(dst, "null"...)
	}
	b, err := json.Marshal(v) // sorts object keys
	if err != nil {
		return append(dst, err.Error()...)
	}
	return append(dst, b...)
}
