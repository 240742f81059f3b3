package processor

import (
	"context"
	"errors"
	"fmt"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	fieldsToInclude := func(desc string) map[string]any {
		return map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": desc}
	}
	component.Default.RegisterProcessor(component.Spec{
		Name: "json_to_arrow",
		Summary: "Turns a batch of JSON objects into its columnar form, an Arrow table with a column per field " +
			"(types inferred over the batch; nested objects, arrays and fields of mixed types become JSON " +
			"columns), for the processors that work on tables (`sql`, `arrow_to_json`). Message metadata is " +
			"not carried into the table. A payload that is not a JSON object fails the batch.",
		Schema: component.ObjectSchema(map[string]any{
			"value_field": component.Prop("string", "When the batch is already a table, the binary or utf8 column "+
				"holding the JSON payloads (a table without it fails the batch). A batch of messages is read "+
				"from their payloads.", columnar.ValueField),
			"fields_to_include": fieldsToInclude("Keep only these fields, in the order they first appear in the " +
				"batch; when empty or absent, every field."),
		}),
		Example: `type: json_to_arrow
fields_to_include:
  - device
  - reading
`,
	}, NewJSONToArrow)
	component.Default.RegisterProcessor(component.Spec{
		Name: "arrow_to_json",
		Summary: "Turns a table back into messages, one JSON object per row in column order, JSON columns " +
			"embedded as JSON; `__meta_*` columns are left out of the objects and set the messages' metadata. " +
			"A batch of messages passes unchanged.",
		Schema: component.ObjectSchema(map[string]any{
			"value_field": component.Prop("string", "Accepted for ArkFlow compatibility (its two JSON "+
				"processors share one configuration); not used.", nil),
			"fields_to_include": fieldsToInclude("Write only these columns (a `__meta_*` column listed here is " +
				"written too); when empty or absent, every column but `__meta_*`."),
		}),
		Example: `type: arrow_to_json
fields_to_include:
  - device
  - low
  - high
`,
	}, NewArrowToJSON)
}

var (
	_ component.Processor = (*JSONToArrow)(nil)
	_ component.Columnar  = (*JSONToArrow)(nil)
	_ component.Processor = (*ArrowToJSON)(nil)
	_ component.Columnar  = (*ArrowToJSON)(nil)
)

// ArrowJSONConfig is the configuration of json_to_arrow and arrow_to_json
// (one configuration, as in ArkFlow).
type ArrowJSONConfig struct {
	ValueField      *string  `json:"value_field"`
	FieldsToInclude []string `json:"fields_to_include"`
}

func decodeArrowJSON(conf map[string]any) (ArrowJSONConfig, error) {
	var c ArrowJSONConfig
	if err := component.Decode(conf, &c); err != nil {
		return c, err
	}
	if c.ValueField != nil && *c.ValueField == "" {
		return c, errors.New("value_field: must not be empty")
	}
	for i, f := range c.FieldsToInclude {
		if f == "" {
			return c, fmt.Errorf("fields_to_include[%d]: must not be empty", i)
		}
	}
	return c, nil
}

// JSONToArrow is the json_to_arrow processor.
type JSONToArrow struct {
	valueField string
	include    []string
}

// NewJSONToArrow builds a json_to_arrow processor from its configuration.
func NewJSONToArrow(conf map[string]any, _ component.Resources) (component.Processor, error) {
	c, err := decodeArrowJSON(conf)
	if err != nil {
		return nil, err
	}
	p := &JSONToArrow{valueField: columnar.ValueField, include: c.FieldsToInclude}
	if c.ValueField != nil {
		p.valueField = *c.ValueField
	}
	return p, nil
}

// Process parses the batch's JSON payloads into a table.
func (p *JSONToArrow) Process(_ context.Context, b message.Batch) ([]message.Batch, error) {
	payloads, err := columnar.Payloads(b, p.valueField)
	if err != nil {
		return nil, fmt.Errorf("json_to_arrow: %w", err)
	}
	rec, err := columnar.FromJSON(payloads, p.include)
	if err != nil {
		return nil, fmt.Errorf("json_to_arrow: %w", err)
	}
	return []message.Batch{{Table: rec}}, nil
}

// Columnar: json_to_arrow reads tables itself.
func (*JSONToArrow) Columnar() {}

// Close releases nothing.
func (*JSONToArrow) Close(context.Context) error { return nil }

// ArrowToJSON is the arrow_to_json processor.
type ArrowToJSON struct {
	include []string
}

// NewArrowToJSON builds an arrow_to_json processor from its configuration.
func NewArrowToJSON(conf map[string]any, _ component.Resources) (component.Processor, error) {
	c, err := decodeArrowJSON(conf)
	if err != nil {
		return nil, err
	}
	return &ArrowToJSON{include: c.FieldsToInclude}, nil
}

// Process writes each row of the batch's table as a JSON object message.
func (p *ArrowToJSON) Process(_ context.Context, b message.Batch) ([]message.Batch, error) {
	if b.Table == nil {
		return []message.Batch{b}, nil
	}
	msgs, err := columnar.Rows(b.Table, p.include)
	if err != nil {
		return nil, fmt.Errorf("arrow_to_json: %w", err)
	}
	return []message.Batch{{Messages: msgs}}, nil
}

// Columnar: arrow_to_json reads tables itself.
func (*ArrowToJSON) Columnar() {}

// Close releases nothing.
func (*ArrowToJSON) Close(context.Context) error { return nil }
