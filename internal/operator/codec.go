package operator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/goccy/go-json"
)

// The state encoding of keyed operators: a version byte, then varints,
// fixed 8-byte floats and length-prefixed JSON for values. It is part of
// the state format.
const codecVersion = 1

var errCorrupt = errors.New("corrupt state entry")

func appendJSON(dst []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...), nil
}

// appendAccs encodes accs: per accumulator n, f, t and v (a presence byte,
// then JSON).
func appendAccs(dst []byte, accs []acc) ([]byte, error) {
	for i := range accs {
		c := &accs[i]
		dst = binary.AppendVarint(dst, c.n)
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(c.f))
		dst = binary.AppendVarint(dst, c.t)
		if c.v == nil {
			dst = append(dst, 0)
			continue
		}
		dst = append(dst, 1)
		var err error
		if dst, err = appendJSON(dst, c.v); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// decoder reads what the append functions wrote; the first problem sticks
// in err.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errCorrupt
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) float() float64 {
	if len(d.b) < 8 {
		d.fail()
		return 0
	}
	f := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return f
}

func (d *decoder) json() any {
	n := d.uvarint()
	if d.err != nil || uint64(len(d.b)) < n {
		d.fail()
		return nil
	}
	var v any
	if err := json.Unmarshal(d.b[:n], &v); err != nil {
		d.err = fmt.Errorf("%w: %w", errCorrupt, err)
		return nil
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) accs(dst []acc) {
	for i := range dst {
		c := &dst[i]
		c.n = d.varint()
		c.f = d.float()
		c.t = d.varint()
		if d.byte() == 1 {
			c.v = d.json()
		}
	}
}

// version checks the leading version byte.
func (d *decoder) version() {
	if v := d.byte(); d.err == nil && v != codecVersion {
		d.err = fmt.Errorf("%w: encoding version %d, want %d", errCorrupt, v, codecVersion)
	}
}

// end reports trailing bytes as corruption.
func (d *decoder) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", errCorrupt, len(d.b))
	}
	return d.err
}

func appendVarint(dst []byte, v int64) []byte   { return binary.AppendVarint(dst, v) }
func appendUvarint(dst []byte, v uint64) []byte { return binary.AppendUvarint(dst, v) }
