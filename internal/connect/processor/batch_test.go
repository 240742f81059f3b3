package processor_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/connect/processor"
	"github.com/flowplane/flowplane/internal/message"
)

// ackLog records the acknowledgements of named input batches.
type ackLog struct {
	mu    sync.Mutex // guards calls
	calls map[string][]string
}

func (l *ackLog) fn(name string) message.AckFunc {
	return func(_ context.Context, err error) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		s := "ok"
		if err != nil {
			s = err.Error()
		}
		l.calls[name] = append(l.calls[name], s)
		return nil
	}
}

func (l *ackLog) get() map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]string{}
	for k, v := range l.calls {
		out[k] = append([]string(nil), v...)
	}
	return out
}

func batcher(t *testing.T, conf map[string]any) component.Batcher {
	t.Helper()
	return build(t, "batch", conf).(component.Batcher)
}

// TestBatchAcks checks that an input batch split over several merged
// batches is acknowledged once, after the last of them, with the first
// error; and that a merged batch's AckFunc works once.
func TestBatchAcks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := batcher(t, map[string]any{"count": 2.0, "timeout_ms": 1000.0})
		ctx := context.Background()
		l := &ackLog{calls: map[string][]string{}}
		if err := p.Write(ctx, batchOf("a1"), l.fn("a")); err != nil {
			t.Fatal(err)
		}
		if err := p.Write(ctx, batchOf("b1", "b2", "b3"), l.fn("b")); err != nil {
			t.Fatal(err)
		}
		read := func() (message.Batch, message.AckFunc) {
			t.Helper()
			b, ack, err := p.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return b, ack
		}
		b1, ack1 := read()
		b2, ack2 := read()
		if diff := cmp.Diff([]string{"a1", "b1"}, payloadsOf(t, []message.Batch{b1})); diff != "" {
			t.Errorf("first merged batch (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"b2", "b3"}, payloadsOf(t, []message.Batch{b2})); diff != "" {
			t.Errorf("second merged batch (-want +got):\n%s", diff)
		}
		boom := errors.New("output down")
		if err := ack2(ctx, boom); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string][]string{}, l.get()); diff != "" {
			t.Errorf("acknowledged before every merged batch was (-want +got):\n%s", diff)
		}
		if err := ack1(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string][]string{"a": {"ok"}, "b": {"output down"}}, l.get()); diff != "" {
			t.Errorf("acks (-want +got):\n%s", diff)
		}
		if err := ack1(ctx, nil); !errors.Is(err, processor.ErrBatchAlreadyAcked) {
			t.Errorf("second ack: %v, want ErrBatchAlreadyAcked", err)
		}
		_ = p.Close(ctx)
		if _, _, err := p.Read(ctx); !errors.Is(err, message.ErrEndOfInput) {
			t.Errorf("Read after Close: %v, want ErrEndOfInput", err)
		}
		if err := p.Write(ctx, batchOf("late"), l.fn("late")); !errors.Is(err, processor.ErrBatchClosed) {
			t.Errorf("Write after Close: %v, want ErrBatchClosed", err)
		}
	})
}

// TestBatchTimeoutAndBackPressure checks that a short batch goes at
// timeout_ms after its oldest message, and that Write waits while a full
// batch is not read.
func TestBatchTimeoutAndBackPressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := batcher(t, map[string]any{"count": 3.0, "timeout_ms": 500.0})
		ctx := context.Background()
		l := &ackLog{calls: map[string][]string{}}
		start := time.Now()
		_ = p.Write(ctx, batchOf("1"), l.fn("a"))
		time.Sleep(300 * time.Millisecond)
		_ = p.Write(ctx, batchOf("2"), l.fn("b"))
		b, _, err := p.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if at := time.Since(start); at != 500*time.Millisecond || b.Len() != 2 {
			t.Errorf("got %d messages at %v, want 2 at 500ms", b.Len(), at)
		}

		_ = p.Write(ctx, batchOf("3", "4", "5"), l.fn("c")) // a full batch
		done := make(chan error, 1)
		go func() { done <- p.Write(ctx, batchOf("6"), l.fn("d")) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Write while a full batch waits returned %v", err)
		default:
		}
		if b, _, err := p.Read(ctx); err != nil || b.Len() != 3 {
			t.Fatalf("Read: %d messages, %v", b.Len(), err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		_ = p.Close(ctx)
	})
}

func TestBatchConfigErrors(t *testing.T) {
	for msg, conf := range map[string]map[string]any{
		"count: must be at least 1":        {"count": 0.0},
		"timeout_ms: must not be negative": {"count": 1.0, "timeout_ms": -1.0},
		"max_bytes: must be at least 1":    {"count": 1.0, "max_bytes": 0.0},
	} {
		_, err := component.Default.NewProcessor("batch", conf, component.Resources{})
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%v: %v, want %q", conf, err, msg)
		}
	}
}
