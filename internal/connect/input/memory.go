package input

import (
	"context"
	"errors"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterInput(component.Spec{
		Name:    "memory",
		Summary: "Emits a fixed list of messages from the configuration, then ends.",
		Schema: component.ObjectSchema(map[string]any{
			"messages": func() map[string]any {
				p := component.Prop("array", "Payloads to emit, one message per entry, in order.", nil)
				p["items"] = map[string]any{"type": "string"}
				return p
			}(),
			"batch_size": batchSizeProp(),
		}, "messages"),
		Example: `type: memory
messages:
  - '{"id": 1}'
  - '{"id": 2}'
batch_size: 2
`,
	}, NewMemory)
}

var _ component.Input = (*Memory)(nil)

// MemoryConfig is the configuration of the memory input.
type MemoryConfig struct {
	Messages  []string `json:"messages"`
	BatchSize int      `json:"batch_size"`
}

// Memory emits the configured messages once. A batch whose acknowledgement
// fails is emitted again before the rest.
type Memory struct {
	payloads  [][]byte
	batchSize int
	redo      redelivery

	pos int // owned by the goroutine that calls Read
}

// NewMemory builds a memory input from its configuration.
func NewMemory(conf map[string]any, res component.Resources) (component.Input, error) {
	c := MemoryConfig{BatchSize: 1}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	if c.Messages == nil {
		return nil, errors.New("messages: required")
	}
	if err := checkBatchSize(c.BatchSize); err != nil {
		return nil, err
	}
	m := &Memory{batchSize: c.BatchSize, redo: redelivery{log: res.Logger, source: "memory"}}
	for _, s := range c.Messages {
		m.payloads = append(m.payloads, []byte(s))
	}
	return m, nil
}

// Connect does nothing.
func (m *Memory) Connect(context.Context) error { return nil }

// Read returns the next batch of configured messages, or
// message.ErrEndOfInput once all were emitted.
func (m *Memory) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	if err := ctx.Err(); err != nil {
		return message.Batch{}, nil, err
	}
	if b, ok := m.redo.next(); ok {
		return b, m.redo.ackFor(b), nil
	}
	if m.pos >= len(m.payloads) {
		if m.redo.end() {
			return message.Batch{}, nil, message.ErrEndOfInput
		}
		b, _ := m.redo.next()
		return b, m.redo.ackFor(b), nil
	}
	end := min(m.pos+m.batchSize, len(m.payloads))
	msgs := make([]message.Message, 0, end-m.pos)
	for _, p := range m.payloads[m.pos:end] {
		msg := message.New(p)
		msg.Meta.Source = "memory"
		msg.Meta.Offset = int64(m.pos + len(msgs))
		msgs = append(msgs, msg)
	}
	m.pos = end
	b := message.Batch{Messages: msgs}
	return b, m.redo.ackFor(b), nil
}

// Close does nothing.
func (m *Memory) Close(context.Context) error { return nil }
