package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

// DefaultBatchMaxBytes is the default max_bytes of the batch processor.
const DefaultBatchMaxBytes = 8 << 20

func init() {
	component.Default.RegisterProcessor(component.Spec{
		Name: "batch",
		Summary: "Gathers messages across input batches into batches of `count` messages: a batch goes on " +
			"once it holds `count` messages or `max_bytes` payload bytes, or `timeout_ms` after its oldest " +
			"message arrived. The input batches it merged are acknowledged only once the merged batch is " +
			"delivered. It must be the first processor.",
		Schema: component.ObjectSchema(map[string]any{
			"count": func() map[string]any {
				p := component.Prop("integer", "Messages per batch: a batch goes on once it holds this many; "+
					"larger input batches are split.", nil)
				p["minimum"] = 1
				return p
			}(),
			"timeout_ms": func() map[string]any {
				p := component.Prop("integer", "Milliseconds after the oldest held message arrived at which what "+
					"is held goes on even if short of count; 0 passes what is held on at once, "+
					"without waiting for more.", 1000)
				p["minimum"] = 0
				return p
			}(),
			"max_bytes": func() map[string]any {
				p := component.Prop("integer", "Payload bytes at which a batch goes on even if short of count "+
					"(a single larger message goes alone). The input waits while a full batch is not yet taken.",
					DefaultBatchMaxBytes)
				p["minimum"] = 1
				return p
			}(),
		}, "count"),
		Example: `type: batch
count: 100
timeout_ms: 200
`,
	}, NewBatch)
}

var _ component.Batcher = (*Batch)(nil)

var (
	// ErrBatchClosed is returned by Batch.Write after Close.
	ErrBatchClosed = errors.New("batch processor closed")
	// ErrBatchAlreadyAcked is returned by the second call of the AckFunc
	// of a merged batch; that call acknowledges nothing.
	ErrBatchAlreadyAcked = errors.New("batch already acknowledged")
)

// BatchConfig is the configuration of the batch processor.
type BatchConfig struct {
	Count     int `json:"count"`
	TimeoutMs int `json:"timeout_ms"`
	MaxBytes  int `json:"max_bytes"`
}

// Batch gathers messages across input batches. It is a component.Batcher:
// the stream runtime hands it each input batch with its AckFunc (Write) and
// takes merged batches (Read), whose AckFuncs acknowledge the inputs.
//
// It holds fewer than count messages and max_bytes payload bytes plus the
// last input batch: Write waits while a full batch is not yet read.
type Batch struct {
	count, maxBytes int
	timeout         time.Duration
	log             *slog.Logger
	wake            chan struct{} // buffered(1): wakes Read
	space           chan struct{} // buffered(1): wakes a Write waiting for room

	mu     sync.Mutex // guards the fields below and every batchSource reachable from q
	q      []heldMsg  // oldest first
	bytes  int        // payload bytes of q
	closed bool
}

// heldMsg is one held message.
type heldMsg struct {
	m   message.Message
	src *batchSource
}

// batchSource is the acknowledgement state of one input batch.
type batchSource struct {
	ack     message.AckFunc
	at      time.Time // when Write took it
	left    int       // its messages still held
	pending int       // merged batches holding its messages, not yet acknowledged
	err     error     // first error one of them was acknowledged with
}

// NewBatch builds a batch processor from its configuration.
func NewBatch(conf map[string]any, res component.Resources) (component.Processor, error) {
	c := BatchConfig{TimeoutMs: 1000, MaxBytes: DefaultBatchMaxBytes}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	var errs []error
	if c.Count < 1 {
		errs = append(errs, fmt.Errorf("count: must be at least 1, got %d", c.Count))
	}
	if c.TimeoutMs < 0 {
		errs = append(errs, fmt.Errorf("timeout_ms: must not be negative, got %d", c.TimeoutMs))
	}
	if c.MaxBytes < 1 {
		errs = append(errs, fmt.Errorf("max_bytes: must be at least 1, got %d", c.MaxBytes))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	log := res.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Batch{
		count: c.Count, maxBytes: c.MaxBytes, timeout: time.Duration(c.TimeoutMs) * time.Millisecond,
		log: log, wake: make(chan struct{}, 1), space: make(chan struct{}, 1),
	}, nil
}

// full reports whether a whole batch is held. p.mu is held.
func (p *Batch) full() bool { return len(p.q) >= p.count || p.bytes >= p.maxBytes }

// Write holds the messages of b, waiting while a full batch is held.
func (p *Batch) Write(ctx context.Context, b message.Batch, ack message.AckFunc) error {
	if b.Len() == 0 {
		if err := ack(ctx, nil); err != nil {
			p.log.Warn("acknowledging an empty batch failed", "err", err)
		}
		return nil
	}
	p.mu.Lock()
	for !p.closed && p.full() {
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.space:
		}
		p.mu.Lock()
	}
	if p.closed {
		p.mu.Unlock()
		return ErrBatchClosed
	}
	first := len(p.q) == 0
	src := &batchSource{ack: ack, at: time.Now(), left: b.Len()}
	for i := range b.Messages {
		p.q = append(p.q, heldMsg{m: b.Messages[i], src: src})
		p.bytes += b.Messages[i].Bytes()
	}
	due := p.full() || p.timeout == 0
	p.mu.Unlock()
	if first || due {
		notify(p.wake) // Read needs a deadline, or can take a batch now
	}
	return nil
}

// Read returns the next batch once count messages or max_bytes are held,
// timeout_ms after the oldest held message arrived, or at once after
// Close; then message.ErrEndOfInput after Close when nothing is left.
func (p *Batch) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	for {
		p.mu.Lock()
		wait := time.Duration(-1)
		if len(p.q) > 0 {
			wait = p.timeout - time.Since(p.q[0].src.at)
			if p.closed || p.full() || wait <= 0 {
				b, ack := p.take()
				p.mu.Unlock()
				notify(p.space)
				return b, ack, nil
			}
		} else if p.closed {
			p.mu.Unlock()
			return message.Batch{}, nil, message.ErrEndOfInput
		}
		p.mu.Unlock()
		if err := sleep(ctx, p.wake, wait); err != nil {
			return message.Batch{}, nil, err
		}
	}
}

// take removes the next batch from the front of q: up to count messages
// and max_bytes payload bytes (at least one message). p.mu is held.
func (p *Batch) take() (message.Batch, message.AckFunc) {
	n, size := 0, 0
	for n < len(p.q) && n < p.count {
		sz := p.q[n].m.Bytes()
		if n > 0 && size+sz > p.maxBytes {
			break
		}
		size += sz
		n++
	}
	msgs := make([]message.Message, n)
	var srcs []*batchSource
	for i := range n {
		h := p.q[i]
		msgs[i] = h.m
		if len(srcs) == 0 || srcs[len(srcs)-1] != h.src {
			srcs = append(srcs, h.src)
			h.src.pending++
		}
		h.src.left--
	}
	clear(p.q[:n])
	if p.q = p.q[n:]; len(p.q) == 0 {
		p.q = nil
	}
	p.bytes -= size
	return message.Batch{Messages: msgs}, p.ackBatch(srcs)
}

// ackBatch is the AckFunc of one merged batch holding messages of srcs: an
// input batch is acknowledged once none of its messages is held and every
// merged batch holding any of them was acknowledged.
func (p *Batch) ackBatch(srcs []*batchSource) message.AckFunc {
	var acked atomic.Bool
	return func(ctx context.Context, err error) error {
		if acked.Swap(true) {
			return ErrBatchAlreadyAcked
		}
		var ready []*batchSource
		p.mu.Lock()
		for _, s := range srcs {
			s.pending--
			if err != nil && s.err == nil {
				s.err = err
			}
			if s.left == 0 && s.pending == 0 {
				ready = append(ready, s)
			}
		}
		p.mu.Unlock()
		var errs []error
		for _, s := range ready {
			if e := s.ack(ctx, s.err); e != nil {
				errs = append(errs, e)
			}
		}
		return errors.Join(errs...)
	}
}

// Process returns b split into consecutive batches of at most count
// messages, sharing b's messages (no copy). It holds nothing: it is for
// callers that cannot hand acknowledgements over; the stream runtime uses
// Write and Read instead.
func (p *Batch) Process(_ context.Context, b message.Batch) ([]message.Batch, error) {
	n := len(b.Messages)
	if n <= p.count {
		if n == 0 {
			return nil, nil
		}
		return []message.Batch{b}, nil
	}
	out := make([]message.Batch, 0, (n+p.count-1)/p.count)
	for i := 0; i < n; i += p.count {
		j := min(i+p.count, n)
		// The full slice expression keeps an append to one part from
		// overwriting the next.
		out = append(out, message.Batch{Messages: b.Messages[i:j:j]})
	}
	return out, nil
}

// Close makes Read return what is held, batch by batch, and then
// message.ErrEndOfInput; later Writes fail with ErrBatchClosed.
func (p *Batch) Close(context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	notify(p.wake)
	notify(p.space)
	return nil
}

// notify wakes the goroutine waiting on ch without blocking.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// sleep blocks until wake is signalled, d has passed (d < 0: no limit) or
// ctx ends.
func sleep(ctx context.Context, wake <-chan struct{}, d time.Duration) error {
	var timer <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
	case <-timer:
	}
	return nil
}
