package input

import (
	"context"
	"log/slog"
	"slices"
	"sync"

	"github.com/flowplane/flowplane/internal/message"
)

// redelivery keeps the batches whose acknowledgement reported an error so
// that the next Read hands them out again before new data. It is the
// in-process half of at-least-once for inputs that cannot re-read their
// source (memory, stdin) or do not persist offsets (file).
//
// Once end has been reported, a failed acknowledgement can no longer be
// redelivered: it is logged as lost instead.
type redelivery struct {
	log *slog.Logger

	mu     sync.Mutex // guards queue, ended
	queue  []message.Batch
	ended  bool
	source string
}

// ackFor returns the AckFunc of b: nil does nothing, an error queues b again.
// It keeps its own copy of the message list, since processors may rewrite
// the messages of the batch they were given.
func (r *redelivery) ackFor(b message.Batch) message.AckFunc {
	b = message.Batch{Messages: slices.Clone(b.Messages)}
	return func(_ context.Context, err error) error {
		if err == nil {
			return nil
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.ended {
			r.log.Error("batch failed after the input ended; it is not redelivered",
				"source", r.source, "messages", b.Len(), "error", err)
			return nil
		}
		r.log.Warn("batch failed; redelivering it", "source", r.source, "messages", b.Len(), "error", err)
		r.queue = append(r.queue, b)
		return nil
	}
}

// next pops the oldest batch waiting for redelivery.
func (r *redelivery) next() (message.Batch, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) == 0 {
		return message.Batch{}, false
	}
	b := r.queue[0]
	r.queue[0] = message.Batch{}
	r.queue = r.queue[1:]
	return b, true
}

// end marks the input exhausted when nothing waits for redelivery and
// reports whether it did.
func (r *redelivery) end() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) > 0 {
		return false
	}
	r.ended = true
	return true
}
