package input

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterInput(component.Spec{
		Name: "memory",
		Summary: "Emits a fixed list of messages from the configuration, then ends. In a job it can run at " +
			"any parallelism (message i goes to subtask i mod n) and resumes from its checkpointed position " +
			"(the index of the next message) at the parallelism the checkpoint was taken at.",
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

var (
	_ component.Splittable = (*Memory)(nil)
	_ component.Sampler    = (*Memory)(nil)
	_ component.Replayable = (*Memory)(nil)
)

// MemoryConfig is the configuration of the memory input.
type MemoryConfig struct {
	Messages  []string `json:"messages"`
	BatchSize int      `json:"batch_size"`
}

// Memory emits the configured messages once. A batch whose acknowledgement
// fails is emitted again before the rest.
//
// Split keeps every subtasks-th message: payloads[k] is message
// first + k*stride of the configuration.
type Memory struct {
	payloads  [][]byte
	batchSize int
	redo      redelivery
	first     int
	stride    int
	total     int // number of configured messages

	pos int // index into payloads; owned by the goroutine that calls Read
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
	m := &Memory{
		batchSize: c.BatchSize, redo: redelivery{log: res.Logger, source: "memory"},
		stride: 1, total: len(c.Messages),
	}
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
		msg.Meta.Offset = int64(m.first + (m.pos+len(msgs))*m.stride)
		msgs = append(msgs, msg)
	}
	m.pos = end
	b := message.Batch{Messages: msgs}
	return b, m.redo.ackFor(b), nil
}

// Split keeps the messages i with i mod subtasks == subtask.
func (m *Memory) Split(subtask, subtasks int) error {
	if subtasks < 1 || subtask < 0 || subtask >= subtasks {
		return fmt.Errorf("memory: subtask %d of %d is out of range", subtask, subtasks)
	}
	var own [][]byte
	for i := subtask; i < len(m.payloads); i += subtasks {
		own = append(own, m.payloads[i])
	}
	m.payloads, m.first, m.stride = own, subtask, subtasks
	return nil
}

// memoryPosition is the checkpointed position of a memory input.
type memoryPosition struct {
	// Index is the index in the configured list of the next message this
	// instance emits, or the list's length when it emitted all of its own.
	Index int `json:"index"`
}

// Position returns the index of the next message.
func (m *Memory) Position() ([]byte, error) {
	idx := m.total
	if m.pos < len(m.payloads) {
		idx = m.first + m.pos*m.stride
	}
	return json.Marshal(memoryPosition{Index: idx})
}

// Seek continues with the first message of this instance at or after the
// position's index.
func (m *Memory) Seek(_ context.Context, pos []byte) error {
	var p memoryPosition
	if err := json.Unmarshal(pos, &p); err != nil {
		return fmt.Errorf("memory: position %s: %w", pos, err)
	}
	if p.Index < 0 || p.Index > m.total {
		return fmt.Errorf("memory: position %s: index out of range [0, %d]", pos, m.total)
	}
	// The first own index k with first + k*stride >= p.Index.
	k := 0
	if p.Index > m.first {
		k = (p.Index - m.first + m.stride - 1) / m.stride
	}
	m.pos = min(k, len(m.payloads))
	return nil
}

// Sample is the first configured message, decoded, when it is JSON.
func (m *Memory) Sample() (any, bool) {
	if len(m.payloads) == 0 {
		return nil, false
	}
	var v any
	if json.Unmarshal(m.payloads[0], &v) != nil {
		return nil, false
	}
	return v, true
}

// Close does nothing.
func (m *Memory) Close(context.Context) error { return nil }
