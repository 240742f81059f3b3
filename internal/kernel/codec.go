package kernel

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"go.opentelemetry.io/otel/trace"

	"github.com/flowplane/flowplane/internal/dataplane"
	"github.com/flowplane/flowplane/internal/operator"
)

// The data plane carries an edge's elements as frames: a batch's records
// in a compact binary form, a watermark as 8 bytes, a barrier as its id and
// kind. Values are encoded by a tag byte per node of the value tree; what
// JSON decoding produces round-trips exactly, and so do int and int64.

// Value tags.
const (
	tagNull byte = iota
	tagFalse
	tagTrue
	tagFloat
	tagInt
	tagString
	tagBytes // a record payload not decoded yet
	tagArray
	tagObject
	tagJSON // any other value, as JSON; decoded to the generic form
)

// maxDepth bounds the nesting a decoder follows: hostile frames cannot
// exhaust the stack.
const maxDepth = 256

var errCorrupt = errors.New("corrupt frame")

// encodeElement turns an element into a frame.
func encodeElement(e element, buf []byte) (dataplane.Frame, error) {
	switch e.kind {
	case elemData:
		b := binary.AppendUvarint(buf[:0], uint64(len(e.recs)))
		var err error
		for i := range e.recs {
			b = binary.AppendVarint(b, e.recs[i].Time)
			if b, err = appendValue(b, e.recs[i].Value, 0); err != nil {
				return dataplane.Frame{}, err
			}
		}
		b = appendTrace(b, e.tc)
		return dataplane.Frame{Kind: dataplane.KindBatch, Payload: b}, nil
	case elemWatermark:
		return dataplane.Frame{Kind: dataplane.KindWatermark, Payload: binary.BigEndian.AppendUint64(buf[:0], uint64(e.wm))}, nil
	case elemBarrier:
		b := binary.AppendVarint(buf[:0], e.b.id)
		sp := byte(0)
		if e.b.savepoint {
			sp = 1
		}
		return dataplane.Frame{Kind: dataplane.KindBarrier, Payload: append(b, sp)}, nil
	case elemIdle:
		return dataplane.Frame{Kind: dataplane.KindIdle}, nil
	case elemEnd:
		return dataplane.Frame{Kind: dataplane.KindEnd}, nil
	}
	return dataplane.Frame{}, fmt.Errorf("element kind %d cannot be sent", e.kind)
}

// decodeElement turns a frame back into an element.
func decodeElement(f dataplane.Frame) (element, error) {
	p := f.Payload
	switch f.Kind {
	case dataplane.KindBatch:
		n, k := binary.Uvarint(p)
		// Every record takes at least two bytes: a count beyond that is a lie.
		if k <= 0 || n > uint64(len(p)-k)/2 {
			return element{}, errCorrupt
		}
		p = p[k:]
		recs := make([]operator.Record, n)
		for i := range recs {
			t, k := binary.Varint(p)
			if k <= 0 {
				return element{}, errCorrupt
			}
			v, rest, err := readValue(p[k:], 0)
			if err != nil {
				return element{}, err
			}
			recs[i] = operator.Record{Time: t, Value: v}
			p = rest
		}
		var tc *trace.SpanContext
		if len(p) != 0 {
			var err error
			if tc, err = readTrace(p); err != nil {
				return element{}, err
			}
		}
		return element{kind: elemData, recs: recs, tc: tc}, nil
	case dataplane.KindWatermark:
		if len(p) != 8 {
			return element{}, errCorrupt
		}
		return element{kind: elemWatermark, wm: int64(binary.BigEndian.Uint64(p))}, nil
	case dataplane.KindBarrier:
		id, k := binary.Varint(p)
		if k <= 0 || len(p) != k+1 || p[k] > 1 {
			return element{}, errCorrupt
		}
		return element{kind: elemBarrier, b: barrier{id: id, savepoint: p[k] == 1}}, nil
	case dataplane.KindIdle:
		return element{kind: elemIdle}, nil
	case dataplane.KindEnd:
		return element{kind: elemEnd}, nil
	}
	return element{}, fmt.Errorf("%w: unexpected frame kind %d", errCorrupt, f.Kind)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendValue(b []byte, v any, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("a value nests deeper than %d levels", maxDepth)
	}
	switch x := v.(type) {
	case nil:
		return append(b, tagNull), nil
	case bool:
		if x {
			return append(b, tagTrue), nil
		}
		return append(b, tagFalse), nil
	case float64:
		return binary.BigEndian.AppendUint64(append(b, tagFloat), math.Float64bits(x)), nil
	case int:
		return binary.AppendVarint(append(b, tagInt), int64(x)), nil
	case int64:
		return binary.AppendVarint(append(b, tagInt), x), nil
	case string:
		return appendString(append(b, tagString), x), nil
	case []byte:
		b = binary.AppendUvarint(append(b, tagBytes), uint64(len(x)))
		return append(b, x...), nil
	case []any:
		b = binary.AppendUvarint(append(b, tagArray), uint64(len(x)))
		var err error
		for _, e := range x {
			if b, err = appendValue(b, e, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	case map[string]any:
		b = binary.AppendUvarint(append(b, tagObject), uint64(len(x)))
		var err error
		for k, e := range x {
			b = appendString(b, k)
			if b, err = appendValue(b, e, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("a %T value cannot be sent to another node: %w", v, err)
	}
	b = binary.AppendUvarint(append(b, tagJSON), uint64(len(j)))
	return append(b, j...), nil
}

// readLen reads a length that must fit in what is left, each unit taking
// at least min bytes.
func readLen(p []byte, min int) (int, []byte, error) {
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)-k)/uint64(min) {
		return 0, nil, errCorrupt
	}
	return int(n), p[k:], nil
}

func readValue(p []byte, depth int) (any, []byte, error) {
	if len(p) == 0 || depth > maxDepth {
		return nil, nil, errCorrupt
	}
	tag, p := p[0], p[1:]
	switch tag {
	case tagNull:
		return nil, p, nil
	case tagFalse:
		return false, p, nil
	case tagTrue:
		return true, p, nil
	case tagFloat:
		if len(p) < 8 {
			return nil, nil, errCorrupt
		}
		return math.Float64frombits(binary.BigEndian.Uint64(p)), p[8:], nil
	case tagInt:
		v, k := binary.Varint(p)
		if k <= 0 {
			return nil, nil, errCorrupt
		}
		return v, p[k:], nil
	case tagString, tagBytes, tagJSON:
		n, p, err := readLen(p, 1)
		if err != nil {
			return nil, nil, err
		}
		switch tag {
		case tagString:
			return string(p[:n]), p[n:], nil
		case tagBytes:
			return append([]byte(nil), p[:n]...), p[n:], nil
		}
		var v any
		if err := json.Unmarshal(p[:n], &v); err != nil {
			return nil, nil, errCorrupt
		}
		return v, p[n:], nil
	case tagArray:
		n, p, err := readLen(p, 1)
		if err != nil {
			return nil, nil, err
		}
		arr := make([]any, n)
		for i := range arr {
			if arr[i], p, err = readValue(p, depth+1); err != nil {
				return nil, nil, err
			}
		}
		return arr, p, nil
	case tagObject:
		n, p, err := readLen(p, 2)
		if err != nil {
			return nil, nil, err
		}
		obj := make(map[string]any, n)
		for range n {
			var k int
			if k, p, err = readLen(p, 1); err != nil {
				return nil, nil, err
			}
			key := string(p[:k])
			p = p[k:]
			if obj[key], p, err = readValue(p, depth+1); err != nil {
				return nil, nil, err
			}
		}
		return obj, p, nil
	}
	return nil, nil, errCorrupt
}
