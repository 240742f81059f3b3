package message

import (
	"context"
	"errors"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/goccy/go-json"
)

// Metadata describes where a message came from. Fields is free-form and nil
// until something is set, so a message without metadata allocates nothing.
type Metadata struct {
	Key        []byte
	Source     string
	Partition  int32
	Offset     int64
	Timestamp  time.Time // event time, zero when unknown
	IngestTime time.Time
	Fields     map[string]string
}

const (
	hasPayload uint8 = 1 << iota
	hasData
)

// Message is one record. The zero value is an empty payload.
type Message struct {
	payload []byte
	data    any
	flags   uint8
	Meta    Metadata
}

// New returns a message whose payload is b (not copied).
func New(b []byte) Message { return Message{payload: b, flags: hasPayload} }

// NewStructured returns a message whose structured value is v.
func NewStructured(v any) Message { return Message{data: v, flags: hasData} }

// Payload returns the message bytes, serializing the structured value as JSON
// when it was the last thing written.
func (m *Message) Payload() ([]byte, error) {
	if m.flags&hasPayload != 0 || m.flags == 0 {
		return m.payload, nil
	}
	b, err := json.Marshal(m.data)
	if err != nil {
		return nil, err
	}
	m.payload = b
	m.flags |= hasPayload
	return b, nil
}

// SetPayload replaces the payload; the structured value is parsed again on demand.
func (m *Message) SetPayload(b []byte) {
	m.payload, m.data, m.flags = b, nil, hasPayload
}

// Structured returns the structured value, parsing the payload as JSON the
// first time it is asked for.
func (m *Message) Structured() (any, error) {
	if m.flags&hasData != 0 {
		return m.data, nil
	}
	var v any
	if err := json.Unmarshal(m.payload, &v); err != nil {
		return nil, &ParseError{Err: err}
	}
	m.data = v
	m.flags |= hasData
	return v, nil
}

// HasStructured reports whether a structured value is present without parsing.
func (m *Message) HasStructured() bool { return m.flags&hasData != 0 }

// SetStructured replaces the structured value; the payload is serialized again on demand.
func (m *Message) SetStructured(v any) {
	m.data, m.payload, m.flags = v, nil, hasData
}

// SetMeta sets one free-form metadata field.
func (m *Message) SetMeta(k, v string) {
	if m.Meta.Fields == nil {
		m.Meta.Fields = make(map[string]string, 2)
	}
	m.Meta.Fields[k] = v
}

// ParseError reports a payload that is not valid JSON.
type ParseError struct{ Err error }

func (e *ParseError) Error() string { return "payload is not valid JSON: " + e.Err.Error() }
func (e *ParseError) Unwrap() error { return e.Err }

// Batch is an ordered group of messages that travels and is acknowledged as one.
//
// A batch has one of two forms. Usually it is Messages. A processor that
// works on columns (json_to_arrow, sql, a codec) gives it the columnar form
// instead: Table is set, one row per message, and Messages is nil. The
// stream runtime turns a Table back into Messages (columnar.Flatten: one
// JSON object per row) before any processor or output that does not read
// tables itself (component.Columnar), so a batch is converted once however
// many columnar processors follow each other. Tables are allocated from
// Go memory; releasing them is optional.
type Batch struct {
	Messages []Message
	Table    arrow.RecordBatch
}

// Len is the number of messages, or of rows in the columnar form.
func (b Batch) Len() int {
	if b.Table != nil {
		return int(b.Table.NumRows())
	}
	return len(b.Messages)
}

// Bytes sums the payload sizes that are already materialized.
func (b Batch) Bytes() int {
	n := 0
	for i := range b.Messages {
		n += b.Messages[i].Bytes()
	}
	return n
}

// Bytes is the size of the payload if it is materialized, else 0.
func (m *Message) Bytes() int { return len(m.payload) }

// AckFunc is how an input learns the fate of a batch it produced. It is called
// exactly once: with nil once the batch was accepted by an output or
// error_output, or with the error that made the stream give up on it (the
// input may then redeliver). Calls may come from any goroutine.
type AckFunc func(ctx context.Context, err error) error

// NoopAck is an AckFunc for inputs with nothing to acknowledge.
func NoopAck(context.Context, error) error { return nil }

// ErrEndOfInput is returned by a finite input once it is exhausted.
var ErrEndOfInput = errors.New("end of input")

// MetaError is the metadata key under which a processor failure is recorded
// on messages routed to error_output.
const MetaError = "error"
