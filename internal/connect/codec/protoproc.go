package codec

import (
	"context"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterProcessor(component.Spec{
		Name: "protobuf_to_arrow",
		Summary: "Decodes the Protobuf message in each message's payload (or a table's value_field column) " +
			"into a table row: a column per field of message_type.",
		Schema: component.ObjectSchema(func() map[string]any {
			p := protoSourceSchema()
			p["value_field"] = component.Prop("string",
				"The binary column holding the encoded messages when the batch is a table.", columnar.ValueField)
			return p
		}(), "message_type", "proto_inputs"),
		Example: `type: protobuf_to_arrow
proto_inputs: [testdata/reading.proto]
message_type: example.v1.Reading
`,
	}, NewProtobufToArrow)
	component.Default.RegisterProcessor(component.Spec{
		Name: "arrow_to_protobuf",
		Summary: "Encodes each row of a table (or each JSON message) as a Protobuf message of message_type: " +
			"one message per row, its payload the encoded bytes.",
		Schema: component.ObjectSchema(withFieldsToInclude(protoSourceSchema()), "message_type", "proto_inputs"),
		Example: `type: arrow_to_protobuf
proto_inputs: [testdata/reading.proto]
message_type: example.v1.Reading
fields_to_include: [ts, device]
`,
	}, NewArrowToProtobuf)
}

var (
	_ component.Processor = (*ProtobufToArrow)(nil)
	_ component.Columnar  = (*ProtobufToArrow)(nil)
	_ component.Processor = (*ArrowToProtobuf)(nil)
	_ component.Columnar  = (*ArrowToProtobuf)(nil)
)

// ProtobufToArrow is the protobuf_to_arrow processor.
type ProtobufToArrow struct {
	t          *protoTable
	valueField string
}

// NewProtobufToArrow builds the protobuf_to_arrow processor.
func NewProtobufToArrow(conf map[string]any, res component.Resources) (component.Processor, error) {
	c := struct {
		protoSource
		ValueField string `json:"value_field"`
	}{ValueField: columnar.ValueField}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	md, err := c.load(context.Background(), res.FS)
	if err != nil {
		return nil, err
	}
	return &ProtobufToArrow{t: newProtoTable(md), valueField: c.ValueField}, nil
}

// Columnar: it reads the value column of a table itself.
func (*ProtobufToArrow) Columnar() {}

// Process decodes each payload into a row.
func (p *ProtobufToArrow) Process(_ context.Context, b message.Batch) ([]message.Batch, error) {
	payloads, err := payloadsOf(b, p.valueField)
	if err != nil {
		return nil, err
	}
	rec, err := p.t.decode(payloads)
	if err != nil {
		return nil, err
	}
	if rec, err = withMeta(rec, b, nil); err != nil {
		return nil, err
	}
	return []message.Batch{{Table: rec}}, nil
}

// Close does nothing.
func (*ProtobufToArrow) Close(context.Context) error { return nil }

// ArrowToProtobuf is the arrow_to_protobuf processor. ArkFlow's returns a
// binary table (__value__); this one returns messages holding the same
// bytes, which is what that table becomes before any other component.
type ArrowToProtobuf struct {
	t       *protoTable
	include []string
}

// NewArrowToProtobuf builds the arrow_to_protobuf processor.
func NewArrowToProtobuf(conf map[string]any, res component.Resources) (component.Processor, error) {
	t, include, err := protobufTable(conf, res.FS)
	if err != nil {
		return nil, err
	}
	return &ArrowToProtobuf{t: t, include: include}, nil
}

// Columnar: it reads tables.
func (*ArrowToProtobuf) Columnar() {}

// Process encodes each row.
func (a *ArrowToProtobuf) Process(_ context.Context, b message.Batch) ([]message.Batch, error) {
	out, err := encodeProtoBatch(a.t, b, a.include)
	if err != nil {
		return nil, err
	}
	return []message.Batch{out}, nil
}

// Close does nothing.
func (*ArrowToProtobuf) Close(context.Context) error { return nil }
