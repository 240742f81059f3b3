package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/stream"
	"github.com/flowplane/flowplane/internal/wal"
)

// countInput produces n batches of one message of size bytes that starts
// with its number, and counts the batches acknowledged with nil.
type countInput struct {
	n, size int
	next    int
	acked   atomic.Int64
}

func (in *countInput) Connect(context.Context) error { return nil }
func (in *countInput) Close(context.Context) error   { return nil }

func (in *countInput) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	if in.next == in.n {
		return message.Batch{}, nil, message.ErrEndOfInput
	}
	p := bytes.Repeat([]byte{'x'}, in.size)
	copy(p, fmt.Sprintf("%06d", in.next))
	in.next++
	return message.Batch{Messages: []message.Message{message.New(p)}}, func(_ context.Context, err error) error {
		if err == nil {
			in.acked.Add(1)
		}
		return nil
	}, nil
}

// gatedOutput fails every write until it is opened, then records payloads.
type gatedOutput struct {
	up  atomic.Bool
	mu  sync.Mutex // guards got
	got []string
}

func (o *gatedOutput) Connect(context.Context) error { return nil }
func (o *gatedOutput) Close(context.Context) error   { return nil }

func (o *gatedOutput) Write(_ context.Context, b message.Batch) error {
	if !o.up.Load() {
		return errors.New("503 Service Unavailable")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range b.Messages {
		p, _ := b.Messages[i].Payload()
		o.got = append(o.got, string(p[:6]))
	}
	return nil
}

// TestStreamWALReadsBackAfterOutage runs a stream over a real WAL with its
// output down until every batch is acknowledged to the input, far more than
// the stream keeps in memory, then opens the output: the batches come back
// from the segment files in order, and the delivered segments are deleted.
func TestStreamWALReadsBackAfterOutage(t *testing.T) {
	const (
		total = 600
		size  = 1000
	)
	w, _, err := wal.Open(wal.Options{Dir: t.TempDir(), SegmentBytes: 32 << 10})
	if err != nil {
		t.Fatal(err)
	}
	sw := &streamWAL{w: w}
	defer sw.Close()
	in := &countInput{n: total, size: size}
	out := &gatedOutput{}
	s, err := stream.New(stream.Config{
		Input: in, Output: out, WAL: sw, ThreadNum: 2,
		WALMemoryBytes: 20 * size,
		Retry:          stream.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()

	deadline := time.Now().Add(30 * time.Second)
	for in.acked.Load() < total {
		if time.Now().After(deadline) {
			t.Fatalf("output down: only %d of %d batches acknowledged", in.acked.Load(), total)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := w.Stats(); st.Pending != total || st.Segments < 10 {
		t.Fatalf("WAL %+v, want %d entries pending over many segments", st, total)
	}
	out.up.Store(true)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the stream never finished after the output came back")
	}
	out.mu.Lock()
	got := out.got
	out.mu.Unlock()
	if len(got) != total {
		t.Fatalf("%d batches delivered, want %d", len(got), total)
	}
	for i, p := range got {
		if want := fmt.Sprintf("%06d", i); p != want {
			t.Fatalf("delivery %d is %s, want %s (in order)", i, p, want)
		}
	}
	if sw.rd == nil {
		t.Error("nothing was read back from the WAL's files")
	}
	if st := w.Stats(); st.Pending != 0 || st.Segments > 2 {
		t.Errorf("WAL after delivery %+v, want nothing pending and the delivered segments deleted", st)
	}
	if b := s.Status().WALBacklogBytes; b != 0 {
		t.Errorf("backlog %d bytes after delivery", b)
	}
}
