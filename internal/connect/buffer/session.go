package buffer

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterBuffer(component.Spec{
		Name: "session_window",
		Summary: "Groups messages into sessions: a session ends when no message arrived for `gap` " +
			"and is then emitted as one batch.",
		Schema: component.ObjectSchema(map[string]any{
			"gap": component.DurationProp("Quiet time (processing time) that ends a session.", nil),
		}, "gap"),
		Example: `type: session_window
gap: 100ms
`,
	}, NewSessionWindow)
}

var _ component.Buffer = (*SessionWindow)(nil)

// SessionWindowConfig is the configuration of the session_window buffer.
type SessionWindowConfig struct {
	Gap string `json:"gap"`
}

// SessionWindow emits the messages of a session once no message arrived
// for gap. It holds messages without limit: a session that never pauses is
// never emitted before Close.
type SessionWindow struct {
	gap  time.Duration
	log  *slog.Logger
	wake chan struct{} // buffered(1): wakes Read

	mu     sync.Mutex // guards the fields below
	q      []entry    // the open session, in arrival order
	closed bool
}

// NewSessionWindow builds a session_window buffer from its configuration.
func NewSessionWindow(conf map[string]any, res component.Resources) (component.Buffer, error) {
	var c SessionWindowConfig
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	d, err := parseDuration("gap", c.Gap)
	if err != nil {
		return nil, err
	}
	return &SessionWindow{gap: d, log: logger(res), wake: make(chan struct{}, 1)}, nil
}

// Write adds b to the open session (starting one if none is open).
func (s *SessionWindow) Write(ctx context.Context, b message.Batch, ack message.AckFunc) error {
	if b.Len() == 0 {
		ackEmpty(ctx, s.log, ack)
		return nil
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.q = append(s.q, entry{b: b, ack: ack, at: time.Now()})
	first := len(s.q) == 1
	s.mu.Unlock()
	if first {
		notify(s.wake) // Read now has a session end to wait for
	}
	return nil
}

// Read returns the open session once it saw no message for gap (at once
// after Close), then message.ErrEndOfInput after Close.
func (s *SessionWindow) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	for {
		s.mu.Lock()
		wait := time.Duration(-1)
		if len(s.q) > 0 {
			// A later Write only moves the end further: Read wakes at the
			// old end, finds the session still open, and waits again.
			wait = s.gap - time.Since(s.q[len(s.q)-1].at)
			if s.closed || wait <= 0 {
				es := s.q
				s.q = nil
				s.mu.Unlock()
				b, ack := emit(es)
				return b, ack, nil
			}
		} else if s.closed {
			s.mu.Unlock()
			return message.Batch{}, nil, message.ErrEndOfInput
		}
		s.mu.Unlock()
		if err := sleep(ctx, s.wake, wait); err != nil {
			return message.Batch{}, nil, err
		}
	}
}

// Close makes Read return the open session and then
// message.ErrEndOfInput; later Writes fail with ErrClosed.
func (s *SessionWindow) Close(context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	notify(s.wake)
	return nil
}
