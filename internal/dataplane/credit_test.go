package dataplane

import (
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestCreditAccounting: for random credits, stream lengths and receive
// patterns, a sender runs exactly Credits frames ahead of its receiver and
// then waits (never more, never stuck short of it), and every frame
// arrives once, in order, then the end.
func TestCreditAccounting(t *testing.T) {
	credits := []int{1, 2, 3, 16}
	pairs := map[int]*pair{}
	for _, c := range credits {
		pairs[c] = newPair(t, func(o *Options) { o.Credits = c })
	}
	var streams atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		c := rapid.SampledFrom(credits).Draw(rt, "credits")
		total := rapid.IntRange(0, 100).Draw(rt, "frames")
		p := pairs[c]
		name := fmt.Sprint("s", streams.Add(1))
		ctx := ctxT(t, 30*time.Second)
		r, err := p.mb.Receive("a", name, "prop")
		if err != nil {
			rt.Fatal(err)
		}
		defer r.Close()
		s, err := p.ma.Send(ctx, "b", name, "prop")
		if err != nil {
			rt.Fatal(err)
		}
		var sent atomic.Int64
		done := make(chan error, 1)
		go func() {
			for i := range total {
				if err := s.Send(ctx, seqFrame(i)); err != nil {
					done <- err
					return
				}
				sent.Add(1)
			}
			done <- s.Close()
		}()
		recvd := 0
		for {
			want := min(total, recvd+c)
			// Liveness: the sender gets as far as its credit allows.
			deadline := time.Now().Add(5 * time.Second)
			for int(sent.Load()) < want {
				if time.Now().After(deadline) {
					rt.Fatalf("stuck: %d sent, %d received, credits %d", sent.Load(), recvd, c)
				}
				time.Sleep(200 * time.Microsecond)
			}
			// Safety: once it waits for credit, it is exactly Credits ahead.
			if want < total {
				for s.impl.l.waiting.Load() != 1 {
					if time.Now().After(deadline) {
						rt.Fatalf("sender neither waits nor sends: %d sent, %d received, credits %d", sent.Load(), recvd, c)
					}
					time.Sleep(200 * time.Microsecond)
				}
			}
			if got := int(sent.Load()); got != want {
				rt.Fatalf("%d sent, %d received, credits %d: want %d sent", got, recvd, c, want)
			}
			r.impl.mu.Lock()
			held := r.impl.n
			r.impl.mu.Unlock()
			if held > c {
				rt.Fatalf("receiver holds %d frames, credits %d", held, c)
			}
			if recvd == total {
				break
			}
			for range rapid.IntRange(1, total-recvd).Draw(rt, "receive") {
				f, err := r.Recv(ctx)
				if err != nil {
					rt.Fatalf("frame %d: %v", recvd, err)
				}
				if got := seqOf(t, f); got != recvd {
					rt.Fatalf("frame %d carries %d", recvd, got)
				}
				recvd++
			}
		}
		if _, err := r.Recv(ctx); err != io.EOF {
			rt.Fatalf("end: %v, want io.EOF", err)
		}
		if err := <-done; err != nil {
			rt.Fatal(err)
		}
	})
}
