package codec

import (
	"context"
	"fmt"
	"maps"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sandbox"
)

func init() {
	component.Default.RegisterCodec(component.Spec{
		Name: "protobuf",
		Summary: "Decodes each payload as a Protobuf message of message_type into a table row (a column per " +
			"field; messages, lists and maps as JSON columns); encodes each row (or JSON message) as a message.",
		Schema: component.ObjectSchema(withFieldsToInclude(protoSourceSchema()), "message_type", "proto_inputs"),
		Example: `type: protobuf
message_type: example.v1.Reading
proto_inputs: [testdata/reading.proto]
`,
	}, NewProtobuf)
}

func withFieldsToInclude(props map[string]any) map[string]any {
	p := maps.Clone(props)
	p["fields_to_include"] = stringList("Encode only these columns (all when empty).")
	return p
}

var (
	_ component.Codec    = (*Protobuf)(nil)
	_ component.Columnar = (*Protobuf)(nil)
)

// Protobuf is the protobuf codec.
type Protobuf struct {
	t       *protoTable
	include []string
}

type protobufConfig struct {
	protoSource
	FieldsToInclude []string `json:"fields_to_include"`
}

// NewProtobuf builds the protobuf codec, compiling its descriptors.
func NewProtobuf(conf map[string]any, res component.Resources) (component.Codec, error) {
	t, include, err := protobufTable(conf, res.FS)
	if err != nil {
		return nil, err
	}
	return &Protobuf{t: t, include: include}, nil
}

// protobufTable decodes the configuration the protobuf codec and
// arrow_to_protobuf share and compiles its message type.
func protobufTable(conf map[string]any, fsys sandbox.FS) (*protoTable, []string, error) {
	var c protobufConfig
	if err := component.Decode(conf, &c); err != nil {
		return nil, nil, err
	}
	md, err := c.load(context.Background(), fsys)
	if err != nil {
		return nil, nil, err
	}
	return newProtoTable(md), c.FieldsToInclude, nil
}

// Columnar: Encode reads tables.
func (*Protobuf) Columnar() {}

// Decode parses each payload: one row each.
func (p *Protobuf) Decode(_ context.Context, b message.Batch) (message.Batch, error) {
	payloads, err := payloadsOf(b, columnar.ValueField)
	if err != nil {
		return message.Batch{}, err
	}
	rec, err := p.t.decode(payloads)
	if err != nil {
		return message.Batch{}, err
	}
	if rec, err = withMeta(rec, b, nil); err != nil {
		return message.Batch{}, err
	}
	return message.Batch{Table: rec}, nil
}

// Encode writes each row of a table, or each JSON message, as a message.
func (p *Protobuf) Encode(_ context.Context, b message.Batch) (message.Batch, error) {
	return encodeProtoBatch(p.t, b, p.include)
}

// encodeProtoBatch encodes a table's rows, or messages holding JSON
// objects, keeping the messages' metadata.
func encodeProtoBatch(t *protoTable, b message.Batch, include []string) (message.Batch, error) {
	if b.Table != nil {
		payloads, err := t.encode(b.Table, include)
		if err != nil {
			return message.Batch{}, err
		}
		return message.Batch{Messages: messagesOf(payloads)}, nil
	}
	out := make([]message.Message, len(b.Messages))
	rec, err := tableOf(b)
	if err != nil {
		return message.Batch{}, err
	}
	payloads, err := t.encode(rec, include)
	if err != nil {
		return message.Batch{}, err
	}
	if len(payloads) != len(out) {
		return message.Batch{}, fmt.Errorf("encoded %d rows from %d messages", len(payloads), len(out))
	}
	for i := range out {
		out[i] = message.New(payloads[i])
		out[i].Meta = b.Messages[i].Meta
	}
	return message.Batch{Messages: out}, nil
}
