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
		Name: "tumbling_window",
		Summary: "Groups messages into consecutive, non-overlapping windows of `interval` processing " +
			"time and emits each window as one batch when it ends (windows without messages emit nothing).",
		Schema: component.ObjectSchema(map[string]any{
			"interval": component.DurationProp("Length of each window. Windows start when the buffer is built "+
				"and follow each other without gaps.", nil),
		}, "interval"),
		Example: `type: tumbling_window
interval: 100ms
`,
	}, NewTumblingWindow)
}

var _ component.Buffer = (*TumblingWindow)(nil)

// TumblingWindowConfig is the configuration of the tumbling_window buffer.
type TumblingWindowConfig struct {
	Interval string `json:"interval"`
}

// TumblingWindow emits, at the end of each interval, the messages that
// arrived during it. It holds messages without limit: the input is not
// slowed down.
type TumblingWindow struct {
	interval time.Duration
	start    time.Time // the first window starts here
	log      *slog.Logger
	wake     chan struct{} // buffered(1): wakes Read

	mu     sync.Mutex // guards the fields below
	q      []entry    // in arrival order
	closed bool
}

// NewTumblingWindow builds a tumbling_window buffer from its configuration.
func NewTumblingWindow(conf map[string]any, res component.Resources) (component.Buffer, error) {
	var c TumblingWindowConfig
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	d, err := parseDuration("interval", c.Interval)
	if err != nil {
		return nil, err
	}
	return &TumblingWindow{interval: d, start: time.Now(), log: logger(res), wake: make(chan struct{}, 1)}, nil
}

// end is when the window holding time t ends.
func (w *TumblingWindow) end(t time.Time) time.Time {
	n := t.Sub(w.start) / w.interval
	return w.start.Add((n + 1) * w.interval)
}

// Write adds b to the current window.
func (w *TumblingWindow) Write(ctx context.Context, b message.Batch, ack message.AckFunc) error {
	if b.Len() == 0 {
		ackEmpty(ctx, w.log, ack)
		return nil
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.q = append(w.q, entry{b: b, ack: ack, at: time.Now()})
	first := len(w.q) == 1
	w.mu.Unlock()
	if first {
		notify(w.wake) // Read now has a window end to wait for
	}
	return nil
}

// Read returns the oldest window once it has ended (at once after Close),
// then message.ErrEndOfInput after Close when nothing is left.
func (w *TumblingWindow) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	for {
		w.mu.Lock()
		wait := time.Duration(-1)
		if len(w.q) > 0 {
			end := w.end(w.q[0].at)
			wait = time.Until(end)
			if w.closed || wait <= 0 {
				n := 1
				for n < len(w.q) && w.q[n].at.Before(end) {
					n++
				}
				es := w.q[:n:n]
				if w.q = w.q[n:]; len(w.q) == 0 {
					w.q = nil // let the emitted entries go with their batch
				}
				w.mu.Unlock()
				b, ack := emit(es)
				return b, ack, nil
			}
		} else if w.closed {
			w.mu.Unlock()
			return message.Batch{}, nil, message.ErrEndOfInput
		}
		w.mu.Unlock()
		if err := sleep(ctx, w.wake, wait); err != nil {
			return message.Batch{}, nil, err
		}
	}
}

// Close makes Read return the windows held, each as its own batch, and then
// message.ErrEndOfInput; later Writes fail with ErrClosed.
func (w *TumblingWindow) Close(context.Context) error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	notify(w.wake)
	return nil
}
