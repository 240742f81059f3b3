package codec

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterCodec(component.Spec{
		Name: "json",
		Summary: "Decodes JSON object payloads into a table (one row per payload, a column per field, types " +
			"inferred over the batch); encodes each row of a table as a JSON object, messages unchanged.",
		Schema: component.ObjectSchema(map[string]any{
			"pretty": component.Prop("boolean", "Accepted for ArkFlow compatibility and ignored: "+
				"encoded objects are always compact, one per message.", false),
		}),
		Example: "type: json\n",
	}, NewJSON)
}

var (
	_ component.Codec    = JSON{}
	_ component.Columnar = JSON{}
)

// JSON is the json codec.
type JSON struct{}

// NewJSON builds the json codec.
func NewJSON(conf map[string]any, _ component.Resources) (component.Codec, error) {
	var c struct {
		Pretty bool `json:"pretty"`
	}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	return JSON{}, nil
}

// Columnar: Encode reads tables.
func (JSON) Columnar() {}

// Decode parses each payload as a JSON object: one row each.
func (JSON) Decode(_ context.Context, b message.Batch) (message.Batch, error) {
	payloads, err := payloadsOf(b, columnar.ValueField)
	if err != nil {
		return message.Batch{}, err
	}
	rec, err := columnar.FromJSON(payloads, nil)
	if err != nil {
		return message.Batch{}, err
	}
	if rec, err = withMeta(rec, b, nil); err != nil {
		return message.Batch{}, err
	}
	return message.Batch{Table: rec}, nil
}

// Encode writes each row of a table as a JSON object, the __meta_*
// columns becoming the messages' metadata (columnar.Rows); messages pass
// through.
func (JSON) Encode(_ context.Context, b message.Batch) (message.Batch, error) {
	if b.Table == nil {
		return b, nil
	}
	msgs, err := columnar.Rows(b.Table, nil)
	if err != nil {
		return message.Batch{}, err
	}
	return message.Batch{Messages: msgs}, nil
}

func messagesOf(payloads [][]byte) []message.Message {
	msgs := make([]message.Message, len(payloads))
	for i, p := range payloads {
		msgs[i] = message.New(p)
	}
	return msgs
}

// tableOf returns a batch's table: its Table, or its messages' payloads
// parsed as JSON objects.
func tableOf(b message.Batch) (arrow.RecordBatch, error) {
	if b.Table != nil {
		return b.Table, nil
	}
	payloads, err := payloadsOf(b, columnar.ValueField)
	if err != nil {
		return nil, err
	}
	return columnar.FromJSON(payloads, nil)
}
