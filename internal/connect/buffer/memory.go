package buffer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterBuffer(component.Spec{
		Name: "memory",
		Summary: "Gathers input batches into larger batches: emits what it holds once `capacity` " +
			"messages are held or `timeout` after the oldest arrived. Writes wait while it is full.",
		Schema: component.ObjectSchema(map[string]any{
			"capacity": countProp("Most messages held; the input waits while this many are held "+
				"(back-pressure). An input batch larger than this is taken alone.", 1000),
			"max_bytes": countProp("Most payload bytes held: what is held is emitted once it reaches this, and "+
				"the input waits while a batch would go beyond it.", DefaultMaxBytes),
			"timeout": component.DurationProp("Emit what is held this long after the oldest held message "+
				"arrived, even if fewer than capacity.", "1s"),
		}),
		Example: `type: memory
capacity: 1000
timeout: 100ms
`,
	}, NewMemory)
}

var _ component.Buffer = (*Memory)(nil)

// MemoryConfig is the configuration of the memory buffer.
type MemoryConfig struct {
	Capacity int    `json:"capacity"`
	MaxBytes int    `json:"max_bytes"`
	Timeout  string `json:"timeout"`
}

// Memory merges input batches into batches of up to capacity messages and
// max_bytes payload bytes.
type Memory struct {
	limit   limit // capacity and max_bytes
	timeout time.Duration
	log     *slog.Logger
	wake    chan struct{} // buffered(1): wakes Read
	space   chan struct{} // buffered(1): wakes a Write waiting for room

	mu      sync.Mutex // guards the fields below
	q       []entry
	held    usage // of q
	waiting bool  // a Write waits for room: emit now
	closed  bool
}

// NewMemory builds a memory buffer from its configuration.
func NewMemory(conf map[string]any, res component.Resources) (component.Buffer, error) {
	c := MemoryConfig{Capacity: 1000, MaxBytes: DefaultMaxBytes, Timeout: "1s"}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	if c.Capacity < 1 {
		return nil, fmt.Errorf("capacity: must be at least 1, got %d", c.Capacity)
	}
	if c.MaxBytes < 1 {
		return nil, fmt.Errorf("max_bytes: must be at least 1, got %d", c.MaxBytes)
	}
	d, err := parseDuration("timeout", c.Timeout)
	if err != nil {
		return nil, err
	}
	return &Memory{
		limit:   limit{messages: c.Capacity, bytes: c.MaxBytes},
		timeout: d,
		log:     logger(res),
		wake:    make(chan struct{}, 1),
		space:   make(chan struct{}, 1),
	}, nil
}

// Write holds b, waiting while b would take the buffer beyond capacity or
// max_bytes. When it returns an error the buffer did not take b and will
// not call ack.
func (m *Memory) Write(ctx context.Context, b message.Batch, ack message.AckFunc) error {
	if b.Len() == 0 {
		ackEmpty(ctx, m.log, ack)
		return nil
	}
	u := usageOf(b)
	m.mu.Lock()
	for !m.closed && !m.limit.admits(m.held, u) {
		m.waiting = true
		m.mu.Unlock()
		notify(m.wake)
		select {
		case <-ctx.Done():
			m.mu.Lock()
			m.waiting = false
			m.mu.Unlock()
			return ctx.Err()
		case <-m.space:
		}
		m.mu.Lock()
	}
	m.waiting = false
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	wasEmpty := m.held.messages == 0
	m.q = append(m.q, entry{b: b, ack: ack, at: time.Now()})
	m.held.add(u)
	full := m.limit.full(m.held)
	m.mu.Unlock()
	if wasEmpty || full {
		notify(m.wake) // Read needs a deadline, or can emit now
	}
	return nil
}

// Read returns everything held, as one batch, once capacity messages or
// max_bytes are held, a Write waits for room, the oldest message is timeout old, or the
// buffer is closed. After Close it returns message.ErrEndOfInput once empty.
func (m *Memory) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	for {
		m.mu.Lock()
		wait := time.Duration(-1)
		if len(m.q) > 0 {
			wait = m.timeout - time.Since(m.q[0].at)
			if m.closed || m.waiting || m.limit.full(m.held) || wait <= 0 {
				es := m.q
				m.q, m.held = nil, usage{}
				m.mu.Unlock()
				notify(m.space)
				b, ack := emit(es)
				return b, ack, nil
			}
		} else if m.closed {
			m.mu.Unlock()
			return message.Batch{}, nil, message.ErrEndOfInput
		}
		m.mu.Unlock()
		if err := sleep(ctx, m.wake, wait); err != nil {
			return message.Batch{}, nil, err
		}
	}
}

// Close makes Read return what is held and then message.ErrEndOfInput;
// later Writes fail with ErrClosed.
func (m *Memory) Close(context.Context) error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	notify(m.wake)
	notify(m.space)
	return nil
}
