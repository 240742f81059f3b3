package stream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

// TestStopUnderLoad stops busy streams of every shape, some within the
// stop timeout and some not: every batch read is acknowledged exactly once,
// with nil or (only when Run reports the timeout) ErrStopTimeout.
func TestStopUnderLoad(t *testing.T) {
	for _, buffer := range []bool{false, true} {
		for _, wal := range []bool{false, true} {
			for _, stopTimeout := range []time.Duration{time.Second, 20 * time.Millisecond} {
				name := fmt.Sprintf("buffer=%v/wal=%v/stop=%s", buffer, wal, stopTimeout)
				t.Run(name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) { stopUnderLoad(t, buffer, wal, stopTimeout) })
				})
			}
		}
	}
}

func stopUnderLoad(t *testing.T, buffer, wal bool, stopTimeout time.Duration) {
	in := newInput(5000, 2)
	proc := &procFunc{fn: func(ctx context.Context, b message.Batch) ([]message.Batch, error) {
		select {
		case <-time.After(time.Duration(rand.IntN(3000)) * time.Microsecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if rand.IntN(10) == 0 {
			return nil, errors.New("unlucky")
		}
		return []message.Batch{b}, nil
	}}
	slowFlaky := func(attempt int, _ message.Batch) error {
		time.Sleep(time.Millisecond)
		if rand.IntN(5) == 0 {
			return errors.New("flaky")
		}
		return nil
	}
	cfg := Config{Input: in, Processors: []component.Processor{proc}, ThreadNum: 3,
		Output: &testOutput{fail: slowFlaky}, ErrorOutput: &testOutput{fail: slowFlaky},
		StopTimeout: stopTimeout, Retry: Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}}
	var w *fakeWAL
	if buffer {
		cfg.Buffer = newGroupBuffer(3)
	}
	if wal {
		w = newWAL()
		cfg.WAL = w
	}
	s := mustNew(t, cfg)
	ctx, cancel := context.WithCancel(t.Context())
	done := runAsync(ctx, s)
	time.Sleep(200 * time.Millisecond)
	cancel()
	err := <-done
	if err != nil && !errors.Is(err, ErrStopTimeout) {
		t.Fatalf("Run: %v", err)
	}
	st := s.Status()
	reads := int(in.reads.Load())
	if reads == 0 || st.State != StateStopped || st.InFlight != 0 {
		t.Fatalf("reads %d, status %+v", reads, st)
	}
	abandoned := 0
	for i := range reads {
		a := in.ackCalls(i)
		if len(a) != 1 {
			t.Fatalf("batch %d acknowledged %d times: %v", i, len(a), a)
		}
		if a[0] != nil {
			if !errors.Is(a[0], ErrStopTimeout) {
				t.Errorf("batch %d acknowledged with %v", i, a[0])
			}
			abandoned++
		}
	}
	if (err != nil) != (st.Abandoned > 0) || (!wal && !buffer && abandoned != st.Abandoned) {
		t.Errorf("Run %v, %d batches acknowledged with an error, status says %d abandoned", err, abandoned, st.Abandoned)
	}
	t.Logf("read %d batches, %d abandoned, Run: %v", reads, st.Abandoned, err)
	if wal && w.pending() == 0 && st.Abandoned > 0 {
		t.Errorf("abandoned batches left no WAL entry")
	}
}
