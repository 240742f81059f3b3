package buffer

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/message"
)

// timedQueue holds whole input batches until the group at its front is due.
// The time windows differ only in their cut policy. It holds at most
// limit (a batch arriving at an empty queue excepted): Write waits for
// room, which comes since the front group is always due at some point.
type timedQueue struct {
	log   *slog.Logger
	limit limit
	wake  chan struct{} // buffered(1): wakes Read
	space chan struct{} // buffered(1): wakes a Write waiting for room
	// cut returns, for a non-empty queue, how many entries from the front
	// form the next group and how long until it is due (<= 0: now).
	cut func(q []entry) (n int, wait time.Duration)

	mu     sync.Mutex // guards the fields below
	q      []entry    // in arrival order
	held   usage      // of q
	closed bool
}

func newTimedQueue(log *slog.Logger, l limit, cut func([]entry) (int, time.Duration)) timedQueue {
	return timedQueue{log: log, limit: l, wake: make(chan struct{}, 1), space: make(chan struct{}, 1), cut: cut}
}

// Write holds b, waiting while b would take the queue beyond its limit.
// When it returns an error the queue did not take b and will not call ack.
func (t *timedQueue) Write(ctx context.Context, b message.Batch, ack message.AckFunc) error {
	if b.Len() == 0 {
		ackEmpty(ctx, t.log, ack)
		return nil
	}
	u := usageOf(b)
	t.mu.Lock()
	for !t.closed && !t.limit.admits(t.held, u) {
		t.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.space:
		}
		t.mu.Lock()
	}
	if t.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	t.q = append(t.q, entry{b: b, ack: ack, at: time.Now()})
	t.held.add(u)
	first := len(t.q) == 1
	t.mu.Unlock()
	if first {
		notify(t.wake) // Read now has a group end to wait for
	}
	return nil
}

// Read returns the front group once it is due (at once after Close), then
// message.ErrEndOfInput after Close when nothing is left.
func (t *timedQueue) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	for {
		t.mu.Lock()
		wait := time.Duration(-1)
		if len(t.q) > 0 {
			// A later Write can only move the end further: Read wakes at
			// the old end, finds the group not yet due, and waits again.
			var n int
			n, wait = t.cut(t.q)
			if t.closed || wait <= 0 {
				es := t.q[:n:n]
				if t.q = t.q[n:]; len(t.q) == 0 {
					t.q = nil // let the emitted entries go with their batch
				}
				for i := range es {
					t.held.sub(usageOf(es[i].b))
				}
				t.mu.Unlock()
				notify(t.space)
				b, ack := emit(es)
				return b, ack, nil
			}
		} else if t.closed {
			t.mu.Unlock()
			return message.Batch{}, nil, message.ErrEndOfInput
		}
		t.mu.Unlock()
		if err := sleep(ctx, t.wake, wait); err != nil {
			return message.Batch{}, nil, err
		}
	}
}

// Close makes Read return what is held, group by group, and then
// message.ErrEndOfInput; later Writes fail with ErrClosed.
func (t *timedQueue) Close(context.Context) error {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	notify(t.wake)
	notify(t.space)
	return nil
}
