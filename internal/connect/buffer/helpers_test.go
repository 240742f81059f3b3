package buffer_test

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func newBuffer(t testing.TB, name string, conf map[string]any) component.Buffer {
	t.Helper()
	b, err := component.Default.NewBuffer(name, conf, component.Resources{})
	if err != nil {
		t.Fatalf("NewBuffer(%s, %v): %v", name, conf, err)
	}
	return b
}

// batch holds one message per id, the id as payload.
func batch(ids ...int) message.Batch {
	b := message.Batch{Messages: make([]message.Message, len(ids))}
	for i, id := range ids {
		b.Messages[i] = message.New([]byte(strconv.Itoa(id)))
	}
	return b
}

func idsOf(t *testing.T, b message.Batch) []int {
	t.Helper()
	out := make([]int, 0, b.Len())
	for i := range b.Messages {
		p, _ := b.Messages[i].Payload()
		id, err := strconv.Atoi(string(p))
		if err != nil {
			t.Fatalf("payload %q", p)
		}
		out = append(out, id)
	}
	return out
}

// acks records every call of the AckFuncs it hands out, by input batch name.
type acks struct {
	mu    sync.Mutex // guards calls
	calls map[string][]error
}

func newAcks() *acks { return &acks{calls: map[string][]error{}} }

func (a *acks) fn(name string) message.AckFunc {
	return func(_ context.Context, err error) error {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.calls[name] = append(a.calls[name], err)
		return nil
	}
}

// snapshot returns, per input batch, how it was acknowledged: "ok", the
// error text, or several entries when it was called more than once.
func (a *acks) snapshot() map[string][]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string][]string{}
	for k, errs := range maps.All(a.calls) {
		for _, err := range errs {
			s := "ok"
			if err != nil {
				s = err.Error()
			}
			out[k] = append(out[k], s)
		}
	}
	return out
}

// read is one batch a buffer emitted, with the (fake) time it came out.
type read struct {
	At  time.Duration
	IDs []int
	ack message.AckFunc
}

// startReader reads buf until it ends, sending each batch on the returned
// channel, which is closed after message.ErrEndOfInput.
func startReader(t *testing.T, buf component.Buffer) <-chan read {
	t.Helper()
	start := time.Now()
	ch := make(chan read, 1000)
	go func() {
		defer close(ch)
		for {
			b, ack, err := buf.Read(context.Background())
			if errors.Is(err, message.ErrEndOfInput) {
				return
			}
			if err != nil {
				t.Errorf("Read: %v", err)
				return
			}
			ch <- read{At: time.Since(start), IDs: idsOf(t, b), ack: ack}
		}
	}()
	return ch
}

// drain returns the reads received so far; call it after synctest.Wait.
func drain(ch <-chan read) []read {
	var out []read
	for {
		select {
		case r, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, r)
		default:
			return out
		}
	}
}

// closeAndDrain closes buf and returns every read until its end.
func closeAndDrain(t *testing.T, buf component.Buffer, ch <-chan read) []read {
	t.Helper()
	if err := buf.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var out []read
	for r := range ch {
		out = append(out, r)
	}
	return out
}

func write(t *testing.T, buf component.Buffer, b message.Batch, ack message.AckFunc) {
	t.Helper()
	if err := buf.Write(context.Background(), b, ack); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func ackAll(t *testing.T, rs []read, err error) {
	t.Helper()
	for _, r := range rs {
		if e := r.ack(context.Background(), err); e != nil {
			t.Fatalf("ack: %v", e)
		}
	}
}
