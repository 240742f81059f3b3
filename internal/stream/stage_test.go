package stream

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/connect/buffer"
	"github.com/flowplane/flowplane/internal/connect/processor"
	"github.com/flowplane/flowplane/internal/message"
)

func newBatchProc(t *testing.T, conf map[string]any) component.Processor {
	t.Helper()
	p, err := processor.NewBatch(conf, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func sizes(bs []message.Batch) []int {
	out := make([]int, len(bs))
	for i, b := range bs {
		out[i] = b.Len()
	}
	return out
}

// acked lists the input batches acknowledged so far (each must be once,
// with nil).
func acked(t *testing.T, in *testInput, n int) []int {
	t.Helper()
	var out []int
	for i := range n {
		switch a := in.ackCalls(i); {
		case len(a) == 0:
		case len(a) == 1 && a[0] == nil:
			out = append(out, i)
		default:
			t.Errorf("batch %d acknowledged %v", i, a)
		}
	}
	return out
}

// TestBatchProcessorMergesAcrossInputs checks that the batch processor
// merges input batches into batches of count messages, and that an input
// batch is acknowledged only once every merged batch holding its messages
// was accepted by the output.
func TestBatchProcessorMergesAcrossInputs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := newInput(5, 3) // 15 messages
		out := &testOutput{block: make(chan struct{})}
		upper := &procFunc{fn: func(_ context.Context, b message.Batch) ([]message.Batch, error) { return []message.Batch{b}, nil }}
		s := mustNew(t, Config{
			Input:      in,
			Processors: []component.Processor{newBatchProc(t, map[string]any{"count": 4.0, "timeout_ms": 3600000.0}), upper},
			Output:     out,
		})
		done := runAsync(t.Context(), s)
		synctest.Wait() // the output holds the first merged batch
		if got := acked(t, in, 5); len(got) != 0 {
			t.Fatalf("inputs %v acknowledged before any merged batch was accepted", got)
		}
		out.block <- struct{}{} // accepts 0..3: input 0 is complete, input 1 (3, 4, 5) is not
		synctest.Wait()
		if diff := cmp.Diff([]int{0}, acked(t, in, 5)); diff != "" {
			t.Errorf("acks after the first merged batch (-want +got):\n%s", diff)
		}
		out.block <- struct{}{} // 4..7: inputs 1 and (not 2: 6, 7, 8)
		synctest.Wait()
		if diff := cmp.Diff([]int{0, 1}, acked(t, in, 5)); diff != "" {
			t.Errorf("acks after the second merged batch (-want +got):\n%s", diff)
		}
		close(out.block)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]int{4, 4, 4, 3}, sizes(out.written())); diff != "" {
			t.Errorf("merged batch sizes (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(seqStrings(0, 15), out.messages()); diff != "" {
			t.Errorf("messages (-want +got):\n%s", diff)
		}
		in.checkAcks(t)
	})
}

// TestBatchProcessorFlushes checks the flush on timeout_ms (measured from
// the oldest held message) and on max_bytes, with the input idle.
func TestBatchProcessorFlushes(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			in := newInput(2, 2) // 4 one-byte messages, then idle
			in.endless = true
			out := &testOutput{}
			s := mustNew(t, Config{
				Input:      in,
				Processors: []component.Processor{newBatchProc(t, map[string]any{"count": 100.0, "timeout_ms": 500.0})},
				Output:     out,
			})
			ctx, cancel := context.WithCancel(t.Context())
			done := runAsync(ctx, s)
			time.Sleep(499 * time.Millisecond)
			synctest.Wait()
			if n := len(out.written()); n != 0 {
				t.Fatalf("%d batches written before timeout_ms", n)
			}
			time.Sleep(time.Millisecond)
			synctest.Wait()
			if diff := cmp.Diff([]int{4}, sizes(out.written())); diff != "" {
				t.Errorf("batches at timeout_ms (-want +got):\n%s", diff)
			}
			in.checkAcks(t)
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("max_bytes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			in := newInput(1, 10) // "0".."9": one byte each
			in.endless = true
			out := &testOutput{}
			s := mustNew(t, Config{
				Input:      in,
				Processors: []component.Processor{newBatchProc(t, map[string]any{"count": 100.0, "timeout_ms": 3600000.0, "max_bytes": 4.0})},
				Output:     out,
			})
			ctx, cancel := context.WithCancel(t.Context())
			done := runAsync(ctx, s)
			synctest.Wait()
			// 4 + 4 go at once; the last 2 are short of max_bytes and wait.
			if diff := cmp.Diff([]int{4, 4}, sizes(out.written())); diff != "" {
				t.Errorf("batches by max_bytes (-want +got):\n%s", diff)
			}
			if a := in.ackCalls(0); len(a) != 0 {
				t.Errorf("input acknowledged %v while 2 of its messages are held", a)
			}
			cancel() // stopping flushes what is held
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]int{4, 4, 2}, sizes(out.written())); diff != "" {
				t.Errorf("batches after stop (-want +got):\n%s", diff)
			}
			in.checkAcks(t)
		})
	})
}

// TestBatchProcessorFailingOutput checks that inputs merged into a batch
// the output keeps refusing stay unacknowledged, and are given back (with
// ErrStopTimeout) only when the stream gives up at the stop deadline.
func TestBatchProcessorFailingOutput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := newInput(3, 2)
		in.endless = true
		var tried []int // sizes of the batches offered to the output (one goroutine writes)
		out := &testOutput{fail: func(_ int, b message.Batch) error {
			tried = append(tried, b.Len())
			return errors.New("output down")
		}}
		s := mustNew(t, Config{
			Input:       in,
			Processors:  []component.Processor{newBatchProc(t, map[string]any{"count": 6.0, "timeout_ms": 3600000.0})},
			Output:      out,
			StopTimeout: 10 * time.Second,
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := runAsync(ctx, s)
		time.Sleep(time.Minute)
		synctest.Wait()
		for i := range 3 {
			if a := in.ackCalls(i); len(a) != 0 {
				t.Errorf("input %d acknowledged %v although the output refused its batch", i, a)
			}
		}
		cancel()
		if err := <-done; !errors.Is(err, ErrStopTimeout) {
			t.Fatalf("Run: %v, want ErrStopTimeout", err)
		}
		for _, n := range tried {
			if n != 6 {
				t.Fatalf("the output was offered a batch of %d messages, want only the merged 6: %v", n, tried)
			}
		}
		if len(tried) == 0 {
			t.Fatal("the output was never offered the merged batch")
		}
		for i := range 3 {
			if a := in.ackCalls(i); len(a) != 1 || !errors.Is(a[0], ErrStopTimeout) {
				t.Errorf("input %d acknowledged %v, want once with ErrStopTimeout", i, a)
			}
		}
	})
}

// TestBatchProcessorAfterBuffer checks the chain buffer -> batch: a window
// is split into batches of count, and everything is acknowledged once.
func TestBatchProcessorAfterBuffer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		win, err := buffer.NewTumblingWindow(map[string]any{"interval": "1s"}, component.Resources{})
		if err != nil {
			t.Fatal(err)
		}
		in := newInput(1, 5)
		out := &testOutput{}
		failing := &procFunc{fn: func(_ context.Context, b message.Batch) ([]message.Batch, error) {
			if num(b.Messages[0]) == 4 {
				return nil, errors.New("boom")
			}
			return []message.Batch{b}, nil
		}}
		errOut := &testOutput{}
		s := mustNew(t, Config{
			Input:       in,
			Buffer:      win,
			Processors:  []component.Processor{newBatchProc(t, map[string]any{"count": 2.0}), failing},
			Output:      out,
			ErrorOutput: errOut,
		})
		if err := s.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]int{2, 2}, sizes(out.written())); diff != "" {
			t.Errorf("batches (-want +got):\n%s", diff)
		}
		errs := errOut.written()
		if len(errs) != 1 || errs[0].Len() != 1 {
			t.Fatalf("error_output got %v, want the last message", sizes(errs))
		}
		// The failing processor keeps its configured index.
		if got := errs[0].Messages[0].Meta.Fields[message.MetaError]; !strings.HasPrefix(got, "processors[1]: boom") {
			t.Errorf("error metadata %q, want it to name processors[1]", got)
		}
		in.checkAcks(t)
	})
}

// TestBatchProcessorMustComeFirst checks that a batch processor after
// another processor is a configuration error.
func TestBatchProcessorMustComeFirst(t *testing.T) {
	pass := &procFunc{fn: func(_ context.Context, b message.Batch) ([]message.Batch, error) { return []message.Batch{b}, nil }}
	_, err := New(Config{
		Input:      newInput(1, 1),
		Processors: []component.Processor{pass, newBatchProc(t, map[string]any{"count": 2.0})},
		Output:     &testOutput{},
	})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "processors[1]") {
		t.Errorf("New: %v, want ErrConfig naming processors[1]", err)
	}
}

// TestWindowBoundStopsReading checks that a bounded window gives the input
// back-pressure through the whole stream: with the output stuck, the input
// is read only until the window and the in-flight batches are full.
func TestWindowBoundStopsReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		win, err := buffer.NewTumblingWindow(map[string]any{"interval": "1s", "max_messages": 5.0}, component.Resources{})
		if err != nil {
			t.Fatal(err)
		}
		const n = 200
		in := newInput(n, 1)
		out := &testOutput{block: make(chan struct{})}
		s := mustNew(t, Config{Input: in, Buffer: win, Output: out})
		done := runAsync(t.Context(), s)
		time.Sleep(time.Minute)
		synctest.Wait()
		// MaxInFlight windows of at most 5 in flight, one more read from
		// the window and waiting for a slot, one window being filled, one
		// batch read and waiting to enter it.
		bound := int64((s.cfg.MaxInFlight+1)*5 + 5 + 1)
		reads := in.reads.Load()
		if reads > bound {
			t.Errorf("%d batches read with the output stuck, want at most %d", reads, bound)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if again := in.reads.Load(); again != reads {
			t.Errorf("the input was read further (%d -> %d) while the window was full", reads, again)
		}
		close(out.block)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := len(out.messages()); got != n {
			t.Errorf("%d messages delivered, want %d", got, n)
		}
		in.checkAcks(t)
	})
}
