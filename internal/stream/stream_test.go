package stream

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func TestNewRejectsBadConfig(t *testing.T) {
	in, out := newInput(1, 1), &testOutput{}
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no input", Config{Output: out}},
		{"no output", Config{Input: in}},
		{"nil processor", Config{Input: in, Output: out, Processors: []component.Processor{nil}}},
		{"negative threads", Config{Input: in, Output: out, ThreadNum: -1}},
		{"negative in flight", Config{Input: in, Output: out, MaxInFlight: -1}},
		{"negative stop timeout", Config{Input: in, Output: out, StopTimeout: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); !errors.Is(err, ErrConfig) {
				t.Fatalf("New: %v, want ErrConfig", err)
			}
		})
	}
	s, err := New(Config{ID: "x", Input: in, Output: out})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.ThreadNum != 1 || s.cfg.MaxInFlight != 8 || s.cfg.StopTimeout != DefaultStopTimeout {
		t.Errorf("defaults: %+v", s.cfg)
	}
	if st := s.Status(); st.State != StateStarting || st.ID != "x" {
		t.Errorf("status before Run: %+v", st)
	}
}

// TestOrdering runs batches through processors with random delays on
// several workers; the output must see them in input order, including
// batches a processor split or filtered out.
func TestOrdering(t *testing.T) {
	for _, threads := range []int{1, 4} {
		t.Run("threads="+strconv.Itoa(threads), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const batches, size = 300, 3
				in := newInput(batches, size)
				// Random delay; then batches whose first number is divisible
				// by 5 are dropped and those divisible by 7 are split in two.
				proc := &procFunc{fn: func(ctx context.Context, b message.Batch) ([]message.Batch, error) {
					time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond)
					first := num(b.Messages[0])
					switch {
					case first%5 == 0:
						return nil, nil
					case first%7 == 0:
						return []message.Batch{{Messages: b.Messages[:1]}, {Messages: b.Messages[1:]}}, nil
					}
					return []message.Batch{b}, nil
				}}
				out := &testOutput{}
				s := mustNew(t, Config{Input: in, Processors: []component.Processor{proc}, Output: out, ThreadNum: threads})
				if err := s.Run(t.Context()); err != nil {
					t.Fatal(err)
				}
				var want []string
				for i := range batches {
					if (i*size)%5 != 0 {
						want = append(want, seqStrings(i*size, i*size+size)...)
					}
				}
				if diff := cmp.Diff(want, out.messages()); diff != "" {
					t.Errorf("output order (-want +got):\n%s", diff)
				}
				in.checkAcks(t)
				st := s.Status()
				if st.State != StateCompleted || st.Received != batches*size || st.Sent != uint64(len(want)) || st.InFlight != 0 {
					t.Errorf("status %+v", st)
				}
			})
		})
	}
}

// TestBackPressure holds the output; the input must not be read beyond the
// in-flight bound.
func TestBackPressure(t *testing.T) {
	for _, tt := range []struct{ threads, maxInFlight int }{{1, 3}, {4, 5}} {
		t.Run("threads="+strconv.Itoa(tt.threads), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				in := newInput(-1, 2)
				out := &testOutput{block: make(chan struct{})}
				s := mustNew(t, Config{Input: in, Output: out, ThreadNum: tt.threads, MaxInFlight: tt.maxInFlight,
					Processors: []component.Processor{&procFunc{fn: passThrough}}})
				ctx, cancel := context.WithCancel(t.Context())
				done := runAsync(ctx, s)
				synctest.Wait()
				// maxInFlight batches in the pipeline, one in the reader's hand.
				if r := in.reads.Load(); r != int64(tt.maxInFlight)+1 {
					t.Errorf("input read %d batches with the output blocked, want %d", r, tt.maxInFlight+1)
				}
				if st := s.Status(); st.InFlight != tt.maxInFlight {
					t.Errorf("in flight %d, want %d", st.InFlight, tt.maxInFlight)
				}
				// Let 10 writes through: exactly 10 more reads follow.
				for range 10 {
					out.block <- struct{}{}
				}
				synctest.Wait()
				if r := in.reads.Load(); r != int64(tt.maxInFlight)+11 {
					t.Errorf("after 10 writes the input read %d batches, want %d", r, tt.maxInFlight+11)
				}
				close(out.block)
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				in.checkAcks(t)
			})
		})
	}
}

func passThrough(_ context.Context, b message.Batch) ([]message.Batch, error) {
	return []message.Batch{b}, nil
}

// TestAtLeastOnce checks that each input batch is acknowledged once, with
// nil, and only after every batch made from it was written, through a flaky
// output, a fan-out processor, and optionally a buffer.
func TestAtLeastOnce(t *testing.T) {
	for _, withBuffer := range []bool{false, true} {
		t.Run("buffer="+strconv.FormatBool(withBuffer), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const batches, size = 40, 4
				ev := &events{}
				in := newInput(batches, size)
				in.ev = ev
				// Each message becomes its own batch; every third is filtered.
				split := &procFunc{fn: func(_ context.Context, b message.Batch) ([]message.Batch, error) {
					var out []message.Batch
					for i := range b.Messages {
						n := num(b.Messages[i])
						if n%3 != 0 {
							out = append(out, message.Batch{Messages: b.Messages[i : i+1]})
						}
					}
					return out, nil
				}}
				out := &testOutput{name: "out", ev: ev, fail: func(attempt int, _ message.Batch) error {
					if attempt%4 == 0 {
						return errors.New("flaky")
					}
					return nil
				}}
				cfg := Config{Input: in, Processors: []component.Processor{split}, Output: out, ThreadNum: 3}
				var buf *groupBuffer
				if withBuffer {
					buf = newGroupBuffer(3) // 40 batches: the last group of 1 is flushed on Close
					cfg.Buffer = buf
				}
				s := mustNew(t, cfg)
				if err := s.Run(t.Context()); err != nil {
					t.Fatal(err)
				}
				in.checkAcks(t)
				for i := range batches {
					ack := ev.index("ack " + strconv.Itoa(i) + " <nil>")
					for n := i * size; n < (i+1)*size; n++ {
						if n%3 == 0 {
							continue
						}
						if w := ev.index("out " + strconv.Itoa(n)); w < 0 || w > ack {
							t.Errorf("batch %d acknowledged at event %d, message %d written at %d", i, ack, n, w)
						}
					}
				}
				st := s.Status()
				if st.Retries == 0 || st.Errors != st.Retries || st.LastError == "" || st.State != StateCompleted {
					t.Errorf("status %+v, want retries counted as errors", st)
				}
				if withBuffer && buf.closes.Load() != 1 {
					t.Errorf("buffer closed %d times", buf.closes.Load())
				}
			})
		})
	}
}

func TestStates(t *testing.T) {
	t.Run("completed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := mustNew(t, Config{Input: newInput(3, 1), Output: &testOutput{}})
			l := watch(s)
			if err := s.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			want := []State{StateStarting, StateRunning, StateCompleted}
			if diff := cmp.Diff(want, l.get()); diff != "" {
				t.Errorf("states (-want +got):\n%s", diff)
			}
			if err := s.Run(t.Context()); !errors.Is(err, ErrAlreadyRun) {
				t.Errorf("second Run: %v", err)
			}
		})
	})
	t.Run("stopped", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			in := newInput(3, 1)
			in.endless = true
			s := mustNew(t, Config{Input: in, Output: &testOutput{}})
			l := watch(s)
			ctx, cancel := context.WithCancel(t.Context())
			done := runAsync(ctx, s)
			synctest.Wait()
			if st := s.Status().State; st != StateRunning {
				t.Errorf("state %s while reading", st)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			want := []State{StateStarting, StateRunning, StateStopping, StateStopped}
			if diff := cmp.Diff(want, l.get()); diff != "" {
				t.Errorf("states (-want +got):\n%s", diff)
			}
		})
	})
	t.Run("connect failure", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			in := newInput(3, 1)
			in.connectErr = errors.New("refused")
			s := mustNew(t, Config{Input: in, Output: &testOutput{}, MaxConnectAttempts: 1})
			l := watch(s)
			err := s.Run(t.Context())
			if !errors.Is(err, ErrConnect) || !errors.Is(err, in.connectErr) {
				t.Fatalf("Run: %v, want ErrConnect wrapping the cause", err)
			}
			if diff := cmp.Diff([]State{StateStarting, StateFailed}, l.get()); diff != "" {
				t.Errorf("states (-want +got):\n%s", diff)
			}
			if st := s.Status(); st.Errors != 1 || st.LastError == "" || in.reads.Load() != 0 {
				t.Errorf("status %+v, reads %d", st, in.reads.Load())
			}
		})
	})
	t.Run("connect retried", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			in := newInput(3, 1)
			in.connectErr, in.connectFails = errors.New("refused"), 2
			out := &testOutput{}
			s := mustNew(t, Config{Input: in, Output: out})
			l := watch(s)
			done := runAsync(t.Context(), s)
			synctest.Wait()
			if st := s.Status(); st.State != StateStarting || !strings.Contains(st.LastError, "input: refused") {
				t.Errorf("while the input does not connect: state %s, last error %q", st.State, st.LastError)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]State{StateStarting, StateRunning, StateCompleted}, l.get()); diff != "" {
				t.Errorf("states (-want +got):\n%s", diff)
			}
			if st := s.Status(); st.Errors != 2 || st.Retries != 2 || st.Sent != 3 || in.connects.Load() != 3 {
				t.Errorf("status %+v after %d connects", st, in.connects.Load())
			}
		})
	})
	t.Run("permanent connect error", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			in := newInput(3, 1)
			in.connectErr = component.Permanent(errors.New("a directory"))
			s := mustNew(t, Config{Input: in, Output: &testOutput{}})
			if err := s.Run(t.Context()); !errors.Is(err, ErrConnect) || in.connects.Load() != 1 {
				t.Fatalf("Run: %v after %d connects, want ErrConnect after one", err, in.connects.Load())
			}
			if st := s.Status().State; st != StateFailed {
				t.Errorf("state %s", st)
			}
		})
	})
	t.Run("connect retried until stopped", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			in := newInput(3, 1)
			in.connectErr = errors.New("refused")
			s := mustNew(t, Config{Input: in, Output: &testOutput{}})
			ctx, cancel := context.WithCancel(t.Context())
			done := runAsync(ctx, s)
			time.Sleep(time.Minute) // fake time: several backoff rounds
			if st := s.Status().State; st != StateStarting || in.connects.Load() < 3 {
				t.Errorf("state %s after %d connects", st, in.connects.Load())
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if st := s.Status().State; st != StateStopped {
				t.Errorf("stopped while connecting: state %s", st)
			}
		})
	})
	t.Run("cancelled before connect", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			out := &testOutput{connectErr: context.Canceled}
			s := mustNew(t, Config{Input: newInput(3, 1), Output: out})
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if err := s.Run(ctx); err != nil {
				t.Fatal(err)
			}
			if st := s.Status().State; st != StateStopped {
				t.Errorf("state %s", st)
			}
		})
	})
}

// TestSubscribeCancel checks that a cancelled subscriber gets no later state.
func TestSubscribeCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, Config{Input: newInput(3, 1), Output: &testOutput{}})
		var got []State
		var cancel func()
		cancel = s.Subscribe(func(st State) {
			got = append(got, st)
			if st == StateRunning {
				cancel()
			}
		})
		if err := s.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]State{StateStarting, StateRunning}, got); diff != "" {
			t.Errorf("states (-want +got):\n%s", diff)
		}
	})
}

// TestCloseExactlyOnce checks every way Run ends.
func TestCloseExactlyOnce(t *testing.T) {
	tests := []struct {
		name    string
		endless bool
		connect error
		failOut bool
		wantErr error
	}{
		{name: "completed"},
		{name: "stopped", endless: true},
		{name: "connect failure", connect: errors.New("no"), wantErr: ErrConnect},
		{name: "stop timeout", endless: true, failOut: true, wantErr: ErrStopTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				in := newInput(5, 1)
				in.endless = tt.endless
				out := &testOutput{connectErr: tt.connect}
				if tt.failOut {
					out.fail = func(int, message.Batch) error { return errors.New("down") }
				}
				errOut := &testOutput{}
				proc := &procFunc{fn: passThrough}
				buf := newGroupBuffer(2)
				s := mustNew(t, Config{Input: in, Buffer: buf, Processors: []component.Processor{proc, proc},
					Output: out, ErrorOutput: errOut, StopTimeout: time.Second, MaxConnectAttempts: 1})
				ctx, cancel := context.WithCancel(t.Context())
				done := runAsync(ctx, s)
				synctest.Wait()
				cancel()
				if err := <-done; !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
					t.Fatalf("Run: %v, want %v", err, tt.wantErr)
				}
				for name, n := range map[string]int32{
					"input": in.closes.Load(), "buffer": buf.closes.Load(), "processor (listed twice)": proc.closes.Load() / 2,
					"output": out.closes.Load(), "error_output": errOut.closes.Load(),
				} {
					if n != 1 {
						t.Errorf("%s closed %d times", name, n)
					}
				}
				if proc.closes.Load() != 2 {
					t.Errorf("processor listed twice closed %d times", proc.closes.Load())
				}
			})
		})
	}
}
