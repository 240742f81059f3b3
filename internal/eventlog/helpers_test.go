package eventlog

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// fakeClock is a clock that moves only when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// encodeEvent is the SSE data line of ev.
func encodeEvent(t *testing.T, ev wire.Event) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// ids returns the ids of evs.
func ids(evs []wire.Event) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

// seq returns from, from+step, ... up to and including to.
func seq(from, to, step int64) []int64 {
	var out []int64
	for i := from; (step > 0 && i <= to) || (step < 0 && i >= to); i += step {
		out = append(out, i)
	}
	return out
}

// checkGoroutines fails t if, within a few seconds, the number of goroutines
// does not fall back to at most base.
func checkGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= base {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines still running, want at most %d:\n%s", n, base, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
