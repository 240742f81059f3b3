package stream

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

// TestWALDurableBeforePipeline holds every append: nothing may be
// processed or acknowledged to the input before its append returned, and
// the WAL entry is acknowledged only after the output accepted the batch.
func TestWALDurableBeforePipeline(t *testing.T) {
	for _, withBuffer := range []bool{false, true} {
		t.Run("buffer="+strconv.FormatBool(withBuffer), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const batches = 6
				ev := &events{}
				in := newInput(batches, 1)
				in.ev = ev
				w := newWAL()
				w.ev, w.gate = ev, make(chan struct{})
				proc := &procFunc{fn: func(_ context.Context, b message.Batch) ([]message.Batch, error) {
					for _, p := range payloads(b) {
						ev.add("proc %s", p)
					}
					return []message.Batch{b}, nil
				}}
				out := &testOutput{name: "out", ev: ev}
				cfg := Config{Input: in, Processors: []component.Processor{proc}, Output: out, WAL: w, ThreadNum: 2}
				if withBuffer {
					cfg.Buffer = newGroupBuffer(1)
				}
				s := mustNew(t, cfg)
				done := runAsync(t.Context(), s)
				synctest.Wait()
				for _, e := range ev.list() {
					if e[:4] == "proc" || e[:3] == "ack" {
						t.Fatalf("%q happened before any append was durable; events %v", e, ev.list())
					}
				}
				if r := in.reads.Load(); r != defaultWALAppendDepth+1 {
					t.Errorf("%d batches read while appends wait, want %d", r, defaultWALAppendDepth+1)
				}
				for range batches {
					w.gate <- struct{}{}
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				in.checkAcks(t)
				if diff := cmp.Diff(seqStrings(0, batches), out.messages()); diff != "" {
					t.Errorf("output (-want +got):\n%s", diff)
				}
				for i := range batches {
					n := strconv.Itoa(i)
					steps := []string{"append " + n, "ack " + n + " <nil>", "proc " + n, "out " + n, "walack " + n}
					last := -1
					for _, step := range steps {
						at := ev.index(step)
						if at <= last {
							t.Errorf("batch %d: %q at %d, not after the previous step (%d); want order %v", i, step, at, last, steps)
						}
						last = at
					}
				}
				if w.pending() != 0 {
					t.Errorf("%d WAL entries left unacknowledged", w.pending())
				}
			})
		})
	}
}

// TestWALReplay checks that entries left from before a restart go through
// the pipeline before new input, and that a failed replay fails the stream.
func TestWALReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWAL()
		for _, p := range []string{"r0", "r1"} {
			if _, err := w.Append(t.Context(), message.Batch{Messages: []message.Message{message.New([]byte(p))}}); err != nil {
				t.Fatal(err)
			}
		}
		in := newInput(3, 1)
		out := &testOutput{}
		s := mustNew(t, Config{Input: in, Output: out, WAL: w, ThreadNum: 3})
		if err := s.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"r0", "r1", "0", "1", "2"}, out.messages()); diff != "" {
			t.Errorf("output (-want +got):\n%s", diff)
		}
		in.checkAcks(t)
		if w.pending() != 0 || s.Status().Received != 5 {
			t.Errorf("pending %d, status %+v", w.pending(), s.Status())
		}
	})
	synctest.Test(t, func(t *testing.T) {
		w := newWAL()
		w.replayErr = errors.New("corrupt segment")
		in := newInput(3, 1)
		s := mustNew(t, Config{Input: in, Output: &testOutput{}, WAL: w})
		l := watch(s)
		err := s.Run(t.Context())
		if !errors.Is(err, ErrReplay) || !errors.Is(err, w.replayErr) {
			t.Fatalf("Run: %v, want ErrReplay", err)
		}
		if diff := cmp.Diff([]State{StateStarting, StateRunning, StateStopping, StateFailed}, l.get()); diff != "" {
			t.Errorf("states (-want +got):\n%s", diff)
		}
		if in.reads.Load() != 0 || in.closes.Load() != 1 {
			t.Errorf("reads %d, closes %d", in.reads.Load(), in.closes.Load())
		}
	})
}

// TestWALKeepsAbandoned stops a stream whose output is down: the input is
// acknowledged (the WAL owns the data), the entries stay, and the next run
// delivers them.
func TestWALKeepsAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWAL()
		in := newInput(5, 1)
		in.endless = true
		down := &testOutput{fail: func(int, message.Batch) error { return errors.New("down") }}
		// Depth 1 keeps the WAL in read order, so the replay is in order too.
		s := mustNew(t, Config{Input: in, Output: down, WAL: w, StopTimeout: time.Second, WALAppendDepth: 1})
		ctx, cancel := context.WithCancel(t.Context())
		done := runAsync(ctx, s)
		time.Sleep(time.Minute)
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, ErrStopTimeout) {
			t.Fatalf("Run: %v, want ErrStopTimeout", err)
		}
		in.checkAcks(t)
		if w.pending() != 5 || s.Status().Abandoned != 5 {
			t.Fatalf("pending %d, abandoned %d, want 5", w.pending(), s.Status().Abandoned)
		}

		out := &testOutput{}
		s2 := mustNew(t, Config{Input: newInput(0, 1), Output: out, WAL: w})
		if err := s2.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(seqStrings(0, 5), out.messages()); diff != "" {
			t.Errorf("replayed output (-want +got):\n%s", diff)
		}
		if w.pending() != 0 {
			t.Errorf("%d entries left", w.pending())
		}
	})
}

func TestWALAppendRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWAL()
		w.appendErr = func(attempt int) error {
			if attempt <= 2 {
				return errors.New("disk hiccup")
			}
			return nil
		}
		in := newInput(4, 1)
		out := &testOutput{}
		s := mustNew(t, Config{Input: in, Output: out, WAL: w})
		if err := s.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(seqStrings(0, 4), out.messages()); diff != "" {
			t.Errorf("output (-want +got):\n%s", diff)
		}
		in.checkAcks(t)
		if st := s.Status(); st.Retries != 2 || st.Errors != 2 || w.pending() != 0 {
			t.Errorf("status %+v, pending %d", st, w.pending())
		}
	})
}
