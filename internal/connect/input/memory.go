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
			"(the index of the next message), also at another parallelism (the messages the old subtasks " +
			"left are dealt to the new ones).",
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
	_ component.Rescalable = (*Memory)(nil)
	_ component.Sampler    = (*Memory)(nil)
)

// MemoryConfig is the configuration of the memory input.
type MemoryConfig struct {
	Messages  []string `json:"messages"`
	BatchSize int      `json:"batch_size"`
}

// Memory emits the configured messages once. A batch whose acknowledgement
// fails is emitted again before the rest.
//
// Its position is a share of the message indexes: Split keeps every
// subtasks-th message, and a rescale adds the catch-up lanes the old
// subtasks left.
type Memory struct {
	payloads  [][]byte // every configured message
	batchSize int
	redo      redelivery

	idx     share // owned by the goroutine that calls Read
	scratch []int64
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
		idx: newShare(0, int64(len(c.Messages))),
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
	if m.idx.ended() {
		if m.redo.end() {
			return message.Batch{}, nil, message.ErrEndOfInput
		}
		b, _ := m.redo.next()
		return b, m.redo.ackFor(b), nil
	}
	m.scratch = m.idx.takeCatchUp(m.scratch[:0], m.batchSize)
	for len(m.scratch) < m.batchSize && m.idx.mainLeft() > 0 {
		m.scratch = append(m.scratch, m.idx.next)
		m.idx.next += m.idx.stride
	}
	msgs := make([]message.Message, len(m.scratch))
	for i, n := range m.scratch {
		msgs[i] = message.New(m.payloads[n])
		msgs[i].Meta.Source = "memory"
		msgs[i].Meta.Offset = n
	}
	b := message.Batch{Messages: msgs}
	return b, m.redo.ackFor(b), nil
}

// Split keeps the messages i with i mod subtasks == subtask.
func (m *Memory) Split(subtask, subtasks int) error {
	if err := m.idx.split(subtask, subtasks); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	return nil
}

// memoryPosition is the checkpointed position of a memory input.
type memoryPosition struct {
	// Index is the index in the configured list of the next message of
	// this instance's own share, or the list's length when it emitted all
	// of them.
	Index int64 `json:"index"`
	// CatchUp are the indexes a rescale gave this instance besides its
	// own, emitted first.
	CatchUp []lane `json:"catch_up,omitempty"`
}

// Position returns the index of the next message and the catch-up lanes.
func (m *Memory) Position() ([]byte, error) {
	return json.Marshal(memoryPosition{Index: min(m.idx.next, m.idx.limit), CatchUp: m.idx.catchUp})
}

func (m *Memory) parsePosition(pos []byte) (memoryPosition, error) {
	var p memoryPosition
	if err := json.Unmarshal(pos, &p); err != nil {
		return p, fmt.Errorf("memory: position %s: %w", pos, err)
	}
	if p.Index < 0 || p.Index > m.idx.limit {
		return p, fmt.Errorf("memory: position %s: index out of range [0, %d]", pos, m.idx.limit)
	}
	return p, nil
}

// Seek continues with the catch-up lanes, then the first message of this
// instance at or after the position's index.
func (m *Memory) Seek(_ context.Context, pos []byte) error {
	p, err := m.parsePosition(pos)
	if err != nil {
		return err
	}
	if err := m.idx.seek(p.Index, p.CatchUp); err != nil {
		return fmt.Errorf("memory: position %s: %w", pos, err)
	}
	return nil
}

// Rescale deals out the messages the old subtasks left.
func (m *Memory) Rescale(old [][]byte) ([]byte, error) {
	mains := make([]int64, len(old))
	var lanes []lane
	for i, raw := range old {
		mains[i] = int64(i)
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		p, err := m.parsePosition(raw)
		if err != nil {
			return nil, err
		}
		// An index at the end may not be in subtask i's residue: any
		// number at or above the end stands for "done".
		mains[i], lanes = max(p.Index, int64(i)), append(lanes, p.CatchUp...)
		if p.Index >= m.idx.limit {
			mains[i] = m.idx.limit + mod(int64(i)-m.idx.limit, int64(len(old)))
		}
	}
	s := m.idx
	if err := s.rescale(mains, lanes, int(s.subtask()), int(s.stride)); err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	return json.Marshal(memoryPosition{Index: min(s.next, s.limit), CatchUp: s.catchUp})
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
