package buffer_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/flowplane/flowplane/internal/message"
)

// TestConcurrentUse writes, reads and acknowledges from separate
// goroutines (acks each from its own), as the stream runtime does, and
// checks that every input batch is acknowledged exactly once and every
// message comes out. Run it with -race.
func TestConcurrentUse(t *testing.T) {
	confs := map[string]map[string]any{
		"memory":          {"capacity": 8.0, "timeout": "30ms"},
		"tumbling_window": {"interval": "50ms"},
		"session_window":  {"gap": "20ms"},
		"sliding_window":  {"window_size": 6.0, "slide_size": 4.0, "interval": "1ms"},
	}
	for name, conf := range confs {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				buf := newBuffer(t, name, conf)
				a := newAcks()
				r := rand.New(rand.NewPCG(1, 2))
				const batches = 300
				sizes := make([]int, batches)
				for i := range sizes {
					sizes[i] = 1 + r.IntN(5)
				}
				pauses := make([]time.Duration, batches)
				for i := range pauses {
					pauses[i] = time.Duration(r.IntN(30)) * time.Millisecond
				}

				var wg sync.WaitGroup
				wg.Go(func() {
					id := 0
					for i, n := range sizes {
						b := message.Batch{}
						for range n {
							b.Messages = append(b.Messages, batch(id).Messages[0])
							id++
						}
						if err := buf.Write(context.Background(), b, a.fn(fmt.Sprint(i))); err != nil {
							t.Errorf("Write: %v", err)
							return
						}
						time.Sleep(pauses[i])
					}
					_ = buf.Close(context.Background())
				})
				seen := map[int]int{}
				for range 100000 {
					b, ack, err := buf.Read(context.Background())
					if errors.Is(err, message.ErrEndOfInput) {
						break
					}
					if err != nil {
						t.Fatalf("Read: %v", err)
					}
					for _, id := range idsOf(t, b) {
						seen[id]++
					}
					wg.Go(func() {
						time.Sleep(time.Millisecond)
						if err := ack(context.Background(), nil); err != nil {
							t.Errorf("ack: %v", err)
						}
					})
				}
				wg.Wait()

				total := 0
				for _, n := range sizes {
					total += n
				}
				for id := range total {
					if seen[id] == 0 || (name != "sliding_window" && seen[id] != 1) {
						t.Errorf("message %d came out %d times", id, seen[id])
					}
				}
				got := a.snapshot()
				for i := range batches {
					if c := got[fmt.Sprint(i)]; len(c) != 1 || c[0] != "ok" {
						t.Errorf("input batch %d acknowledged %v, want once ok", i, c)
					}
				}
			})
		})
	}
}
