package component

import (
	"context"
	"fmt"
	"maps"

	"github.com/flowplane/flowplane/internal/message"
)

// KindCodec is a codec: how the payloads an input reads become a batch
// (Decode) and how a batch becomes the payloads an output writes (Encode).
// Any input or output takes one in its optional `codec` field, as in
// ArkFlow: `codec: {type: json}`.
const KindCodec Kind = "codec"

// Codec converts between payloads and a batch's columnar form.
//
// Decode receives a batch of messages as an input read it and returns the
// batch the stream carries on: usually its columnar form (Table set), one
// row per message or more (a payload may hold several records). Encode
// receives what reaches the output, Messages or Table, and returns
// Messages whose payloads are the encoded records. Both may be called
// concurrently. An error fails the batch: on the input side it is
// recorded and the batch goes to error_output (or is dropped) like a
// failed processor's; on the output side the write fails and is retried.
type Codec interface {
	Decode(ctx context.Context, b message.Batch) (message.Batch, error)
	Encode(ctx context.Context, b message.Batch) (message.Batch, error)
}

// CodecCtor builds a codec from its configuration (without "type").
type CodecCtor func(conf map[string]any, res Resources) (Codec, error)

// RegisterCodec adds a codec. A duplicate name panics.
func (r *Registry) RegisterCodec(s Spec, c CodecCtor) { s.Kind = KindCodec; r.register(s, c) }

// NewCodec builds a codec.
func (r *Registry) NewCodec(name string, conf map[string]any, res Resources) (Codec, error) {
	c, err := r.ctor(KindCodec, name)
	if err != nil {
		return nil, err
	}
	return c.(CodecCtor)(conf, fill(res, KindCodec, name))
}

// codecField is the field every input and output schema gains.
const codecField = "codec"

// withCodecField returns an input's or output's schema with the optional
// field codec added (a codec component), unless the component declares
// its own field of that name.
func withCodecField(schema map[string]any) map[string]any {
	props, _ := schema["properties"].(map[string]any)
	if _, own := props[codecField]; own {
		return schema
	}
	out := maps.Clone(schema)
	p := maps.Clone(props)
	if p == nil {
		p = map[string]any{}
	}
	p[codecField] = map[string]any{
		"$ref":        "#/$defs/component.codec",
		"description": "Decodes what the input reads, or encodes what the output writes (json, csv, lines, protobuf, avro, debezium_json, schema_registry).",
	}
	out["properties"] = p
	return out
}

// SplitCodec removes the codec field from an input's or output's
// configuration and builds the codec it names; nil when there is none or
// the component declares its own codec field.
func (r *Registry) SplitCodec(kind Kind, name string, conf map[string]any, res Resources) (map[string]any, Codec, error) {
	raw, ok := conf[codecField]
	if !ok || r.ownsCodecField(kind, name) {
		return conf, nil, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("codec: want an object with a type, got %T", raw)
	}
	t, _ := m["type"].(string)
	if t == "" {
		return nil, nil, fmt.Errorf("codec: missing type")
	}
	cc := maps.Clone(m)
	delete(cc, "type")
	c, err := r.NewCodec(t, cc, res)
	if err != nil {
		return nil, nil, fmt.Errorf("codec: %w", err)
	}
	rest := maps.Clone(conf)
	delete(rest, codecField)
	return rest, c, nil
}

// ownsCodecField reports whether a component declared a codec field of
// its own (the registry then passes it through untouched).
func (r *Registry) ownsCodecField(kind Kind, name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.m[kind][name]
	return ok && e.ownCodec
}

// Columnar is implemented by a Processor, Output or Codec that reads a
// batch's columnar form (message.Batch.Table) itself. Before any other
// processor or output the runtime turns a Table into messages.
type Columnar interface {
	Columnar()
}

// IsColumnar reports whether v reads tables itself.
func IsColumnar(v any) bool {
	_, ok := v.(Columnar)
	return ok
}

// DecodeProcessor is the processor the runtime runs first in a stream
// whose input has a codec: it decodes each batch as the input read it, so
// a batch that does not decode goes to error_output like any failed batch.
func DecodeProcessor(c Codec) Processor { return decodeProcessor{c} }

type decodeProcessor struct{ codec Codec }

func (d decodeProcessor) Process(ctx context.Context, b message.Batch) ([]message.Batch, error) {
	out, err := d.codec.Decode(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("input codec: %w", err)
	}
	return []message.Batch{out}, nil
}

func (decodeProcessor) Close(context.Context) error { return nil }

// EncodingOutput wraps an output whose configuration has a codec: each
// batch is encoded before the output writes it.
func EncodingOutput(o Output, c Codec) Output { return encodingOutput{o, c} }

type encodingOutput struct {
	Output
	codec Codec
}

func (e encodingOutput) Write(ctx context.Context, b message.Batch) error {
	out, err := e.codec.Encode(ctx, b)
	if err != nil {
		return fmt.Errorf("output codec: %w", err)
	}
	return e.Output.Write(ctx, out)
}

// Columnar: the codec reads tables itself.
func (encodingOutput) Columnar() {}
