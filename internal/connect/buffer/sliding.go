package buffer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterBuffer(component.Spec{
		Name: "sliding_window",
		Summary: "Emits overlapping windows of messages: every `interval`, if at least `window_size` " +
			"messages are held, the oldest `window_size` are emitted as one batch and the window slides " +
			"forward by `slide_size` messages. An input batch is acknowledged once every window holding " +
			"any of its messages was.",
		Schema: schemaWithLimits(map[string]any{
			"window_size": countProp("Messages in each window.", nil),
			"interval": component.DurationProp("Time between window emissions (processing time, starting when the "+
				"buffer is built); at most one window is emitted per interval.", nil),
			"slide_size": countProp("Messages the window moves forward after each emission; at most "+
				"window_size. Messages in the overlap appear in several windows.", nil),
		}, "window_size", "interval", "slide_size"),
		Example: `type: sliding_window
window_size: 10
interval: 100ms
slide_size: 5
`,
	}, NewSlidingWindow)
}

var _ component.Buffer = (*SlidingWindow)(nil)

// SlidingWindowConfig is the configuration of the sliding_window buffer.
type SlidingWindowConfig struct {
	WindowSize int    `json:"window_size"`
	Interval   string `json:"interval"`
	SlideSize  int    `json:"slide_size"`
	LimitConfig
}

// SlidingWindow emits count windows over the held messages at interval
// ticks. Windows overlap, so a message may travel in several emitted
// batches: each window gets its own copy of the message (its metadata
// fields copied too, since processors may set them; payload bytes and
// structured values are shared and must not be changed in place).
//
// Acknowledgement: an input batch is acknowledged when all of its messages
// have slid out of the buffer and every window that held any of them was
// acknowledged, with the first error a window was acknowledged with (nil
// when all succeeded). When the input is faster than one slide per
// interval, Write waits once max_messages or max_bytes are held and a
// window is ready (back-pressure), so that a slide makes room.
type SlidingWindow struct {
	size, slide int
	interval    time.Duration
	start       time.Time // tick k falls at start + k*interval, k >= 1
	limit       limit
	log         *slog.Logger
	wake        chan struct{} // buffered(1): wakes Read
	space       chan struct{} // buffered(1): wakes a Write waiting for room

	mu       sync.Mutex // guards the fields below and every source reachable from q
	q        []slot     // held messages, oldest first
	held     usage      // of q
	covered  int        // q[:covered] were in an emitted window
	lastTick int64      // tick of the latest emission, 0 before the first
	closed   bool
}

// slot is one held message.
type slot struct {
	m    message.Message
	src  *source
	size int // payload bytes counted in held
}

// source is the acknowledgement state of one input batch.
type source struct {
	ack     message.AckFunc
	at      time.Time
	left    int   // its messages still held
	pending int   // emitted windows holding its messages, not yet acknowledged
	err     error // first error a window was acknowledged with
	done    bool  // ack was called
}

// NewSlidingWindow builds a sliding_window buffer from its configuration.
func NewSlidingWindow(conf map[string]any, res component.Resources) (component.Buffer, error) {
	var c SlidingWindowConfig
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	var errs []error
	if c.WindowSize < 1 {
		errs = append(errs, fmt.Errorf("window_size: must be at least 1, got %d", c.WindowSize))
	}
	if c.SlideSize < 1 || c.SlideSize > c.WindowSize {
		errs = append(errs, fmt.Errorf("slide_size: must be between 1 and window_size (%d), got %d", c.WindowSize, c.SlideSize))
	}
	d, err := parseDuration("interval", c.Interval)
	if err != nil {
		errs = append(errs, err)
	}
	l, err := c.build(c.WindowSize)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &SlidingWindow{
		size: c.WindowSize, slide: c.SlideSize, interval: d, limit: l,
		start: time.Now(), log: logger(res), wake: make(chan struct{}, 1), space: make(chan struct{}, 1),
	}, nil
}

// tickAfter is the first tick strictly after t.
func (w *SlidingWindow) tickAfter(t time.Time) int64 {
	return int64(t.Sub(w.start)/w.interval) + 1
}

func (w *SlidingWindow) tickTime(k int64) time.Time {
	return w.start.Add(time.Duration(k) * w.interval)
}

// Write appends the messages of b to the held messages. It waits while b
// would take the buffer beyond its limit and a window is ready to make room
// (with fewer than window_size messages held nothing could, so b is then
// taken). When it returns an error the buffer did not take b and will not
// call ack.
func (w *SlidingWindow) Write(ctx context.Context, b message.Batch, ack message.AckFunc) error {
	if b.Len() == 0 {
		ackEmpty(ctx, w.log, ack)
		return nil
	}
	u := usageOf(b)
	w.mu.Lock()
	for !w.closed && len(w.q) >= w.size && !w.limit.admits(w.held, u) {
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.space:
		}
		w.mu.Lock()
	}
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	before := len(w.q)
	src := &source{ack: ack, at: time.Now(), left: b.Len()}
	for i := range b.Messages {
		w.q = append(w.q, slot{m: b.Messages[i], src: src, size: b.Messages[i].Bytes()})
	}
	w.held.add(u)
	filled := before < w.size && len(w.q) >= w.size
	w.mu.Unlock()
	if filled {
		notify(w.wake) // Read now has a tick to wait for
	}
	return nil
}

// Read returns the next window at its tick: the first tick after the
// window's newest message arrived and after the previous window's tick. A
// late Read catches up with one window per missed tick. After Close it
// returns the remaining windows at once, then the messages no window held
// yet as one shorter last window, then message.ErrEndOfInput.
func (w *SlidingWindow) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	for {
		w.mu.Lock()
		wait := time.Duration(-1)
		switch {
		case len(w.q) >= w.size:
			tick := max(w.tickAfter(w.q[w.size-1].src.at), w.lastTick+1)
			wait = time.Until(w.tickTime(tick))
			if w.closed || wait <= 0 {
				w.lastTick = tick
				b, ack := w.window(w.size, w.slide)
				w.mu.Unlock()
				notify(w.space)
				return b, ack, nil
			}
		case w.closed && w.covered < len(w.q):
			n := len(w.q)
			b, ack := w.window(n, n)
			w.mu.Unlock()
			return b, ack, nil
		case w.closed:
			// Every message left was in a window already: let them go.
			var ready []*source
			for i := range w.q {
				ready = w.slideOut(ready, w.q[i].src)
			}
			w.q, w.covered, w.held = nil, 0, usage{}
			w.mu.Unlock()
			if err := w.fire(ctx, ready); err != nil {
				w.log.Warn("acknowledging input batches failed", "err", err)
			}
			return message.Batch{}, nil, message.ErrEndOfInput
		}
		w.mu.Unlock()
		if err := sleep(ctx, w.wake, wait); err != nil {
			return message.Batch{}, nil, err
		}
	}
}

// window emits q[:n] and slides forward by slide. w.mu is held. No source
// completes here: the messages that slide out are all in this window, whose
// acknowledgement is pending.
func (w *SlidingWindow) window(n, slide int) (message.Batch, message.AckFunc) {
	msgs := make([]message.Message, n)
	var srcs []*source
	for i := range n {
		s := w.q[i]
		msgs[i] = s.m
		if s.m.Meta.Fields != nil {
			msgs[i].Meta.Fields = maps.Clone(s.m.Meta.Fields)
		}
		if len(srcs) == 0 || srcs[len(srcs)-1] != s.src {
			srcs = append(srcs, s.src)
			s.src.pending++
		}
	}
	for i := range slide {
		w.q[i].src.left--
		w.held.sub(usage{1, w.q[i].size})
	}
	clear(w.q[:slide])
	if w.q = w.q[slide:]; len(w.q) == 0 {
		w.q = nil
	}
	w.covered = max(w.covered, n) - slide
	return message.Batch{Messages: msgs}, w.ackWindow(srcs)
}

// slideOut records that one message of src left the buffer and adds src to
// ready when that completes it. w.mu is held.
func (w *SlidingWindow) slideOut(ready []*source, src *source) []*source {
	src.left--
	if src.left == 0 && src.pending == 0 && !src.done {
		src.done = true
		ready = append(ready, src)
	}
	return ready
}

// ackWindow is the AckFunc of one emitted window holding messages of srcs.
func (w *SlidingWindow) ackWindow(srcs []*source) message.AckFunc {
	var acked atomic.Bool
	return func(ctx context.Context, err error) error {
		if acked.Swap(true) {
			return ErrAlreadyAcked
		}
		var ready []*source
		w.mu.Lock()
		for _, s := range srcs {
			s.pending--
			if err != nil && s.err == nil {
				s.err = err
			}
			if s.left == 0 && s.pending == 0 && !s.done {
				s.done = true
				ready = append(ready, s)
			}
		}
		w.mu.Unlock()
		return w.fire(ctx, ready)
	}
}

// fire calls the acks of completed sources, outside w.mu.
func (w *SlidingWindow) fire(ctx context.Context, ready []*source) error {
	var errs []error
	for _, s := range ready {
		if err := s.ack(ctx, s.err); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close makes Read return the windows still due, then the rest as described
// on Read, then message.ErrEndOfInput; later Writes fail with ErrClosed.
func (w *SlidingWindow) Close(context.Context) error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	notify(w.wake)
	notify(w.space)
	return nil
}
