package wire

import (
	"strings"
	"time"
)

// Time is a timestamp written as RFC 3339 UTC with milliseconds, as every
// `*_at` field is. The zero Time is written as null and omitted with omitzero.
type Time struct{ time.Time }

// TimeLayout is the wire form of a timestamp.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// At wraps t.
func At(t time.Time) Time { return Time{t} }

// MarshalJSON writes the timestamp in UTC with milliseconds.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + t.UTC().Format(TimeLayout) + `"`), nil
}

// UnmarshalJSON reads an RFC 3339 timestamp or null.
func (t *Time) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		t.Time = time.Time{}
		return nil
	}
	v, err := time.Parse(time.RFC3339Nano, strings.Trim(s, `"`))
	if err != nil {
		return err
	}
	t.Time = v
	return nil
}
