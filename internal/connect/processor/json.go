package processor

import (
	"context"
	"fmt"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterProcessor(component.Spec{
		Name: "json",
		Summary: "Parses JSON payloads into structured values once, so later processors do not parse " +
			"again (`parse`), or turns structured values back into payload bytes (`serialize`).",
		Schema: component.ObjectSchema(map[string]any{
			"operation": component.EnumProp("`parse`: parse each payload as JSON and keep the structured value "+
				"beside the original payload bytes (a payload that is not JSON fails the batch; a message a later "+
				"processor changes is serialized again, with object keys sorted). `serialize`: make sure each message has payload bytes, "+
				"serializing its structured value as JSON.", "parse", "parse", "serialize"),
		}),
		Example: `type: json
operation: parse
`,
	}, NewJSON)
}

var _ component.Processor = (*JSON)(nil)

// JSONConfig is the configuration of the json processor.
type JSONConfig struct {
	Operation string `json:"operation"`
}

// JSON parses payloads into structured values or serializes them back.
type JSON struct {
	serialize bool
}

// NewJSON builds a json processor from its configuration.
func NewJSON(conf map[string]any, _ component.Resources) (component.Processor, error) {
	c := JSONConfig{Operation: "parse"}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	switch c.Operation {
	case "parse":
		return &JSON{}, nil
	case "serialize":
		return &JSON{serialize: true}, nil
	}
	return nil, fmt.Errorf("operation: %q is not one of parse, serialize", c.Operation)
}

// Process parses or serializes every message of b in place. A message that
// cannot be parsed (or serialized) fails the whole batch.
func (p *JSON) Process(_ context.Context, b message.Batch) ([]message.Batch, error) {
	for i := range b.Messages {
		m := &b.Messages[i]
		if p.serialize {
			if _, err := m.Payload(); err != nil {
				return nil, fmt.Errorf("json: message %d: %w", i, err)
			}
			continue
		}
		// Structured keeps the payload bytes valid beside the parsed
		// value, so an unchanged message is written out as it came in.
		if _, err := m.Structured(); err != nil {
			return nil, fmt.Errorf("json: message %d: %w", i, err)
		}
	}
	return []message.Batch{b}, nil
}

// Close releases nothing.
func (p *JSON) Close(context.Context) error { return nil }
