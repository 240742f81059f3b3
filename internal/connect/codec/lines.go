package codec

import (
	"bytes"
	"context"
	"maps"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterCodec(component.Spec{
		Name: "lines",
		Summary: "Decodes each payload into one message per line (\\n or \\r\\n; a final empty line is " +
			"dropped), each keeping the payload's metadata; encodes by writing each message unchanged " +
			"(a table is first turned into messages).",
		Schema:  component.ObjectSchema(map[string]any{}),
		Example: "type: lines\n",
	}, NewLines)
}

var (
	_ component.Codec    = Lines{}
	_ component.Columnar = Lines{}
)

// Lines is the lines codec. It is not ArkFlow's: ArkFlow has no codec
// that splits payloads.
type Lines struct{}

// NewLines builds the lines codec.
func NewLines(conf map[string]any, _ component.Resources) (component.Codec, error) {
	var c struct{}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	return Lines{}, nil
}

// Columnar: Encode flattens a table itself.
func (Lines) Columnar() {}

// Decode splits each payload on line ends. The result is Messages.
func (Lines) Decode(_ context.Context, b message.Batch) (message.Batch, error) {
	if b.Table != nil {
		if err := columnar.Flatten(&b); err != nil {
			return message.Batch{}, err
		}
	}
	var out []message.Message
	for i := range b.Messages {
		p, err := b.Messages[i].Payload()
		if err != nil {
			return message.Batch{}, err
		}
		for _, line := range splitLines(p) {
			m := message.New(line)
			m.Meta = b.Messages[i].Meta
			m.Meta.Fields = maps.Clone(m.Meta.Fields)
			out = append(out, m)
		}
	}
	return message.Batch{Messages: out}, nil
}

// splitLines splits p after each \n, removing the line end (\n or \r\n).
// A final line without \n counts; an empty payload has no lines.
func splitLines(p []byte) [][]byte {
	var out [][]byte
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			out = append(out, bytes.Clone(p))
			break
		}
		line := p[:i]
		line = bytes.TrimSuffix(line, []byte{'\r'})
		out = append(out, bytes.Clone(line))
		p = p[i+1:]
	}
	return out
}

// Encode writes each message unchanged; a table becomes messages as
// before any non-columnar output.
func (Lines) Encode(_ context.Context, b message.Batch) (message.Batch, error) {
	if err := columnar.Flatten(&b); err != nil {
		return message.Batch{}, err
	}
	return b, nil
}
