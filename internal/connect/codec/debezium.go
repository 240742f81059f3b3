package codec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterCodec(component.Spec{
		Name: "debezium_json",
		Summary: "Decodes Debezium change events (JSON, with or without the {schema, payload} wrapper) into " +
			"a table: the row's fields (after, or before for deletes) as columns, then op, ts_ms, source_db, " +
			"source_table, and before and source as JSON columns. Tombstones (empty payloads) are skipped. " +
			"Encodes each row as a JSON object.",
		Schema:  component.ObjectSchema(map[string]any{}),
		Example: "type: debezium_json\n",
	}, NewDebezium)
}

var (
	_ component.Codec    = Debezium{}
	_ component.Columnar = Debezium{}
)

// Debezium is the debezium_json codec.
type Debezium struct{}

// NewDebezium builds the debezium_json codec.
func NewDebezium(conf map[string]any, _ component.Resources) (component.Codec, error) {
	var c struct{}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	return Debezium{}, nil
}

// Columnar: Encode reads tables.
func (Debezium) Columnar() {}

// Decode flattens each change event into a row.
func (Debezium) Decode(_ context.Context, b message.Batch) (message.Batch, error) {
	payloads, err := payloadsOf(b, columnar.ValueField)
	if err != nil {
		return message.Batch{}, err
	}
	rows := make([][]byte, 0, len(payloads))
	var src []int // the payload of each row: tombstones have none
	for i, p := range payloads {
		row, err := flattenDebezium(p)
		if err != nil {
			return message.Batch{}, fmt.Errorf("payload %d: %w", i, err)
		}
		if row != nil {
			rows, src = append(rows, row), append(src, i)
		}
	}
	rec, err := columnar.FromJSON(rows, nil)
	if err != nil {
		return message.Batch{}, err
	}
	if rec, err = withMeta(rec, b, src); err != nil {
		return message.Batch{}, err
	}
	return message.Batch{Table: rec}, nil
}

// Encode writes each row of a table as a JSON object; messages pass
// through.
func (Debezium) Encode(ctx context.Context, b message.Batch) (message.Batch, error) {
	return JSON{}.Encode(ctx, b)
}

// ErrNotDebezium is returned for a payload that is not a change event.
var ErrNotDebezium = errors.New("not a Debezium change event")

// envelopeColumns are the columns the envelope adds after the row's
// fields; a row field of the same name is dropped.
var envelopeColumns = []string{"op", "ts_ms", "source_db", "source_table", "before", "source"}

// flattenDebezium returns a change event as one JSON object, nil for a
// tombstone (an empty payload, or a null payload in the wrapper).
func flattenDebezium(p []byte) ([]byte, error) {
	p = bytes.TrimSpace(p)
	if len(p) == 0 || string(p) == "null" {
		return nil, nil
	}
	env, err := objectFields(p)
	if err != nil {
		return nil, err
	}
	if inner, ok := env.get("payload"); ok {
		if _, hasSchema := env.get("schema"); hasSchema {
			if string(inner) == "null" {
				return nil, nil
			}
			if env, err = objectFields(inner); err != nil {
				return nil, fmt.Errorf("payload: %w", err)
			}
		}
	}
	op, ok := env.get("op")
	if !ok {
		return nil, fmt.Errorf("%w: no op", ErrNotDebezium)
	}
	before, after := env.getOr("before"), env.getOr("after")
	source := env.getOr("source")
	var row fields
	switch {
	case after[0] == '{':
		if row, err = objectFields(after); err != nil {
			return nil, fmt.Errorf("after: %w", err)
		}
	case before[0] == '{':
		if row, err = objectFields(before); err != nil {
			return nil, fmt.Errorf("before: %w", err)
		}
	}
	sourceDB, sourceTable := json.RawMessage("null"), json.RawMessage("null")
	if source[0] == '{' {
		s, err := objectFields(source)
		if err != nil {
			return nil, fmt.Errorf("source: %w", err)
		}
		sourceDB, sourceTable = s.getOr("db"), s.getOr("table")
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	n := 0
	add := func(k string, v json.RawMessage) {
		if n > 0 {
			buf.WriteByte(',')
		}
		n++
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(v)
	}
	for _, f := range row {
		if !contains(envelopeColumns, f.key) {
			add(f.key, f.raw)
		}
	}
	add("op", op)
	add("ts_ms", env.getOr("ts_ms"))
	add("source_db", sourceDB)
	add("source_table", sourceTable)
	add("before", before)
	add("source", source)
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// field is one member of a JSON object, its value as written.
type field struct {
	key string
	raw json.RawMessage
}

// fields are an object's members in order.
type fields []field

func (fs fields) get(k string) (json.RawMessage, bool) {
	for i := len(fs) - 1; i >= 0; i-- { // the last duplicate wins, as in encoding/json
		if fs[i].key == k {
			return fs[i].raw, true
		}
	}
	return nil, false
}

// getOr returns member k, or null when absent.
func (fs fields) getOr(k string) json.RawMessage {
	if v, ok := fs.get(k); ok {
		return v
	}
	return json.RawMessage("null")
}

// objectFields parses p, which must be exactly one JSON object, into its
// members in order. Values are compacted.
func objectFields(p []byte) (fields, error) {
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotDebezium, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("%w: want a JSON object", ErrNotDebezium)
	}
	var out fields
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotDebezium, err)
		}
		k, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotDebezium, err)
		}
		var c bytes.Buffer
		if err := json.Compact(&c, raw); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotDebezium, err)
		}
		out = append(out, field{k, c.Bytes()})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, fmt.Errorf("%w: %w", ErrNotDebezium, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: data after the object", ErrNotDebezium)
	}
	return out, nil
}
