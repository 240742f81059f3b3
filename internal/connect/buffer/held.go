package buffer

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

var (
	// ErrClosed is returned by Write after Close.
	ErrClosed = errors.New("buffer closed")
	// ErrAlreadyAcked is returned when the AckFunc of an emitted batch is
	// called a second time; the second call acknowledges nothing.
	ErrAlreadyAcked = errors.New("batch already acknowledged")
)

// entry is one input batch held whole by a buffer.
type entry struct {
	b   message.Batch
	ack message.AckFunc
	at  time.Time // when Write took it
}

// count is the number of messages in es.
func count(es []entry) int {
	n := 0
	for i := range es {
		n += es[i].b.Len()
	}
	return n
}

// emit joins the batches of es (in order) into one batch whose AckFunc
// acknowledges each of them once, with the error it is given.
func emit(es []entry) (message.Batch, message.AckFunc) {
	acks := make([]message.AckFunc, len(es))
	for i := range es {
		acks[i] = es[i].ack
	}
	if len(es) == 1 {
		return es[0].b, joinAcks(acks)
	}
	msgs := make([]message.Message, 0, count(es))
	for i := range es {
		msgs = append(msgs, es[i].b.Messages...)
	}
	return message.Batch{Messages: msgs}, joinAcks(acks)
}

// joinAcks returns an AckFunc that calls every ack in order with the same
// error, once; it returns their errors joined.
func joinAcks(acks []message.AckFunc) message.AckFunc {
	var done atomic.Bool
	return func(ctx context.Context, err error) error {
		if done.Swap(true) {
			return ErrAlreadyAcked
		}
		var errs []error
		for _, a := range acks {
			if e := a(ctx, err); e != nil {
				errs = append(errs, e)
			}
		}
		return errors.Join(errs...)
	}
}

// ackEmpty acknowledges an input batch without messages at once: there is
// nothing to deliver, and holding it would emit an empty batch.
func ackEmpty(ctx context.Context, log *slog.Logger, ack message.AckFunc) {
	if err := ack(ctx, nil); err != nil {
		log.Warn("acknowledging an empty batch failed", "err", err)
	}
}

// logger is the component's logger, never nil.
func logger(res component.Resources) *slog.Logger {
	if res.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return res.Logger
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
	if d < 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
			return nil
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
	case <-t.C:
	}
	return nil
}
