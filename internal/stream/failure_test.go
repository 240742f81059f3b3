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

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 0.2}
	tests := []struct {
		attempt int
		base    time.Duration
	}{{1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {4, 800 * time.Millisecond}, {5, time.Second}, {50, time.Second}}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.attempt), func(t *testing.T) {
			for range 100 {
				d := b.Delay(tt.attempt)
				lo := time.Duration(float64(tt.base) * 0.8)
				hi := min(time.Duration(float64(tt.base)*1.2), b.Max)
				if d < lo || d > hi {
					t.Fatalf("Delay(%d) = %s, want in [%s, %s]", tt.attempt, d, lo, hi)
				}
			}
		})
	}
	if d := (Backoff{}).Delay(1); d < 80*time.Millisecond || d > 120*time.Millisecond {
		t.Errorf("default first delay %s", d)
	}
}

// TestOutputRetry makes the output fail five times: the batch is retried
// with growing delays, the stream stays running, and errors are visible.
func TestOutputRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := newInput(2, 1)
		var times []time.Time // guarded by being written only by the output loop
		out := &testOutput{fail: func(attempt int, _ message.Batch) error {
			times = append(times, time.Now())
			if attempt <= 5 {
				return errors.New("unavailable")
			}
			return nil
		}}
		s := mustNew(t, Config{Input: in, Output: out, Retry: Backoff{Initial: time.Second, Max: 4 * time.Second, Jitter: 0.1}})
		l := watch(s)
		if err := s.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		in.checkAcks(t)
		if diff := cmp.Diff(seqStrings(0, 2), out.messages()); diff != "" {
			t.Errorf("output (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]State{StateStarting, StateRunning, StateCompleted}, l.get()); diff != "" {
			t.Errorf("states (-want +got):\n%s", diff)
		}
		st := s.Status()
		if st.Retries != 5 || st.Errors != 5 || st.LastError != "output: unavailable" || st.LastErrorAt.IsZero() {
			t.Errorf("status %+v", st)
		}
		// Fake time: the gaps follow 1s, 2s, 4s, 4s, 4s within the jitter.
		for i, base := range []float64{1, 2, 4, 4, 4} {
			gap := times[i+1].Sub(times[i]).Seconds()
			if gap < base*0.9 || gap > min(base*1.1, 4) {
				t.Errorf("retry %d after %.2fs, want about %.0fs", i+1, gap, base)
			}
		}
	})
}

// TestStopTimeoutAbandons stops a stream whose output never accepts: at
// the stop deadline every batch in flight is acknowledged with
// ErrStopTimeout and counted, and Run says so.
func TestStopTimeoutAbandons(t *testing.T) {
	for _, threads := range []int{1, 3} {
		t.Run("threads="+strconv.Itoa(threads), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				in := newInput(-1, 2)
				out := &testOutput{fail: func(int, message.Batch) error { return errors.New("down") }}
				s := mustNew(t, Config{Input: in, Output: out, ThreadNum: threads, MaxInFlight: 4,
					StopTimeout: 5 * time.Second, Processors: []component.Processor{&procFunc{fn: passThrough}}})
				l := watch(s)
				ctx, cancel := context.WithCancel(t.Context())
				done := runAsync(ctx, s)
				time.Sleep(time.Minute) // fake time: let the retries go on
				synctest.Wait()
				if st := s.Status(); st.State != StateRunning || st.Retries == 0 {
					t.Errorf("status while retrying: %+v", st)
				}
				start := time.Now()
				cancel()
				err := <-done
				if !errors.Is(err, ErrStopTimeout) {
					t.Fatalf("Run: %v, want ErrStopTimeout", err)
				}
				if d := time.Since(start); d != 5*time.Second {
					t.Errorf("stop took %s of fake time, want the stop timeout", d)
				}
				reads := int(in.reads.Load())
				st := s.Status()
				if st.Abandoned != reads || st.Abandoned != 5 || st.State != StateStopped || st.InFlight != 0 {
					t.Errorf("abandoned %d of %d reads, status %+v", st.Abandoned, reads, st)
				}
				for i := range reads {
					if a := in.ackCalls(i); len(a) != 1 || !errors.Is(a[0], ErrStopTimeout) {
						t.Errorf("batch %d acknowledged %v, want ErrStopTimeout once", i, a)
					}
				}
				want := []State{StateStarting, StateRunning, StateStopping, StateStopped}
				if diff := cmp.Diff(want, l.get()); diff != "" {
					t.Errorf("states (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestGracefulStopFinishesInFlight stops a stream while batches wait in the
// pipeline and in the buffer: they are all delivered before Run returns.
func TestGracefulStopFinishesInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := newInput(7, 1)
		in.endless = true
		out := &testOutput{block: make(chan struct{})}
		buf := newGroupBuffer(2) // 3 groups handed out, the 7th batch held
		s := mustNew(t, Config{Input: in, Buffer: buf, Output: out, MaxInFlight: 2})
		ctx, cancel := context.WithCancel(t.Context())
		done := runAsync(ctx, s)
		synctest.Wait()
		cancel()
		synctest.Wait()
		if st := s.Status().State; st != StateStopping {
			t.Errorf("state %s while finishing", st)
		}
		close(out.block)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(seqStrings(0, 7), out.messages()); diff != "" {
			t.Errorf("output (-want +got):\n%s", diff)
		}
		in.checkAcks(t)
		if s.Status().State != StateStopped {
			t.Errorf("state %s", s.Status().State)
		}
	})
}

// TestProcessorFailure routes the original batch of a failed processor to
// error_output, with the error in its metadata, or drops it without one.
func TestProcessorFailure(t *testing.T) {
	// mutate changes every message in place, then fails on batches whose
	// first number is odd, or panics on multiples of 10.
	mutate := &procFunc{fn: func(_ context.Context, b message.Batch) ([]message.Batch, error) {
		first := num(b.Messages[0])
		for i := range b.Messages {
			b.Messages[i].SetPayload([]byte("changed"))
		}
		switch {
		case first%10 == 0 && first > 0:
			panic("boom")
		case first%2 == 1:
			return nil, errors.New("bad record")
		}
		return []message.Batch{b}, nil
	}}
	const batches = 12 // single-message batches 0..11
	var failedNums, okNums []string
	for i := range batches {
		if i%2 == 1 || i%10 == 0 && i > 0 {
			failedNums = append(failedNums, strconv.Itoa(i))
		} else {
			okNums = append(okNums, "changed")
		}
	}
	t.Run("error_output", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ev := &events{}
			in := newInput(batches, 1)
			in.ev = ev
			errOut := &testOutput{name: "err", ev: ev, fail: func(attempt int, _ message.Batch) error {
				if attempt <= 2 {
					return errors.New("error sink down")
				}
				return nil
			}}
			out := &testOutput{}
			s := mustNew(t, Config{Input: in, Processors: []component.Processor{mutate}, Output: out, ErrorOutput: errOut, ThreadNum: 2})
			if err := s.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			in.checkAcks(t)
			if diff := cmp.Diff(okNums, out.messages()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(failedNums, errOut.messages()); diff != "" {
				t.Errorf("error_output got changed messages (-want +got):\n%s", diff)
			}
			for _, b := range errOut.written() {
				n := num(b.Messages[0])
				want := "processors[0]: bad record"
				if n%10 == 0 {
					want = "processors[0]: processor panicked: boom"
				}
				if got := b.Messages[0].Meta.Fields[message.MetaError]; got != want {
					t.Errorf("message %d: error metadata %q, want %q", n, got, want)
				}
				// Acknowledged only after error_output accepted it.
				if w, a := ev.index("err "+strconv.Itoa(n)), ev.index("ack "+strconv.Itoa(n)+" <nil>"); w < 0 || a < w {
					t.Errorf("batch %d: written at %d, acknowledged at %d", n, w, a)
				}
			}
			st := s.Status()
			if st.Dropped != 0 || st.Retries != 2 || st.Errors != uint64(len(failedNums))+2 || st.Sent != batches {
				t.Errorf("status %+v", st)
			}
		})
	})
	t.Run("dropped", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			in := newInput(batches, 1)
			out := &testOutput{}
			s := mustNew(t, Config{Input: in, Processors: []component.Processor{mutate}, Output: out})
			if err := s.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			in.checkAcks(t)
			st := s.Status()
			if st.Dropped != uint64(len(failedNums)) || st.Errors != uint64(len(failedNums)) || st.Sent != uint64(len(okNums)) {
				t.Errorf("status %+v", st)
			}
			if st.State != StateCompleted {
				t.Errorf("state %s", st.State)
			}
		})
	})
}

// TestInputReadErrorRetried checks that a failing Read is retried.
func TestInputReadErrorRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := &flakyInput{testInput: newInput(3, 1), failures: 3}
		out := &testOutput{}
		s := mustNew(t, Config{Input: in, Output: out})
		if err := s.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(seqStrings(0, 3), out.messages()); diff != "" {
			t.Errorf("output (-want +got):\n%s", diff)
		}
		if st := s.Status(); st.Retries != 3 || st.Errors != 3 {
			t.Errorf("status %+v", st)
		}
	})
}

type flakyInput struct {
	*testInput
	failures int // guarded by being used from the reader only
}

func (f *flakyInput) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	if f.failures > 0 {
		f.failures--
		return message.Batch{}, nil, errors.New("connection reset")
	}
	return f.testInput.Read(ctx)
}
