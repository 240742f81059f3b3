package buffer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/connect/buffer"
	"github.com/flowplane/flowplane/internal/message"
)

var cmpReads = cmpopts.IgnoreUnexported(read{})

// TestExamples builds every buffer from its documented example, passes a
// batch through it and acknowledges it.
func TestExamples(t *testing.T) {
	for _, name := range []string{"memory", "tumbling_window", "sliding_window", "session_window"} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				conf := componenttest.Example(t, component.Default, component.KindBuffer, name)
				buf := newBuffer(t, name, conf)
				a := newAcks()
				reads := startReader(t, buf)
				write(t, buf, batch(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11), a.fn("a"))
				time.Sleep(time.Second)
				got := closeAndDrain(t, buf, reads)
				if len(got) == 0 {
					t.Fatal("nothing emitted")
				}
				ackAll(t, got, nil)
				if diff := cmp.Diff(map[string][]string{"a": {"ok"}}, a.snapshot()); diff != "" {
					t.Errorf("acks (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		conf map[string]any
		err  string
	}{
		{"memory", map[string]any{"capacity": 0.0}, "capacity: must be at least 1"},
		{"memory", map[string]any{"timeout": "0s"}, `timeout: "0s" is not a positive duration`},
		{"memory", map[string]any{"size": 1.0}, `unknown field "size"`},
		{"tumbling_window", map[string]any{}, "interval: required"},
		{"tumbling_window", map[string]any{"interval": "soon"}, `interval: "soon"`},
		{"session_window", map[string]any{}, "gap: required"},
		{"sliding_window", map[string]any{"window_size": 2.0, "slide_size": 3.0, "interval": "1s"}, "slide_size: must be between 1 and window_size (2), got 3"},
		{"sliding_window", map[string]any{"window_size": 0.0, "slide_size": 1.0, "interval": "1s"}, "window_size: must be at least 1"},
		{"sliding_window", map[string]any{"window_size": 1.0, "slide_size": 1.0}, "interval: required"},
	}
	for _, tt := range tests {
		_, err := component.Default.NewBuffer(tt.name, tt.conf, component.Resources{})
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s %v: error = %v, want it to contain %q", tt.name, tt.conf, err, tt.err)
		}
	}
}

// TestAckOnce checks that each emitted batch acknowledges its inputs once,
// only when it is acknowledged, passes the error on, and refuses a second
// call.
func TestAckOnce(t *testing.T) {
	for _, name := range []string{"memory", "tumbling_window", "session_window"} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				conf := map[string]map[string]any{
					"memory":          {"timeout": "1s"},
					"tumbling_window": {"interval": "1s"},
					"session_window":  {"gap": "1s"},
				}[name]
				buf := newBuffer(t, name, conf)
				a := newAcks()
				reads := startReader(t, buf)
				write(t, buf, batch(1), a.fn("a"))
				write(t, buf, batch(2, 3), a.fn("b"))
				time.Sleep(3 * time.Second)
				write(t, buf, batch(4), a.fn("c"))
				got := closeAndDrain(t, buf, reads)
				if len(got) != 2 {
					t.Fatalf("got %d batches, want 2: %+v", len(got), got)
				}
				if diff := cmp.Diff(map[string][]string{}, a.snapshot()); diff != "" {
					t.Errorf("acks before any emitted batch was acknowledged (-want +got):\n%s", diff)
				}
				boom := errors.New("output failed")
				if err := got[0].ack(context.Background(), boom); err != nil {
					t.Fatal(err)
				}
				if err := got[0].ack(context.Background(), nil); !errors.Is(err, buffer.ErrAlreadyAcked) {
					t.Errorf("second ack: %v, want ErrAlreadyAcked", err)
				}
				want := map[string][]string{"a": {"output failed"}, "b": {"output failed"}}
				if diff := cmp.Diff(want, a.snapshot()); diff != "" {
					t.Errorf("acks after the first batch (-want +got):\n%s", diff)
				}
				ackAll(t, got[1:], nil)
				want["c"] = []string{"ok"}
				if diff := cmp.Diff(want, a.snapshot()); diff != "" {
					t.Errorf("acks after both batches (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestTumblingWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		buf := newBuffer(t, "tumbling_window", map[string]any{"interval": "1s"})
		a := newAcks()
		reads := startReader(t, buf)
		write(t, buf, batch(1, 2), a.fn("a")) // window [0s, 1s)
		time.Sleep(500 * time.Millisecond)
		write(t, buf, batch(3), a.fn("b"))
		time.Sleep(700 * time.Millisecond) // 1.2s: window [1s, 2s)
		write(t, buf, batch(4), a.fn("c"))
		time.Sleep(800 * time.Millisecond) // exactly 2s: the next window
		write(t, buf, batch(5), a.fn("d"))
		time.Sleep(2500 * time.Millisecond) // 4.5s: window [4s, 5s); [3s, 4s) is empty
		write(t, buf, batch(6), a.fn("e"))
		time.Sleep(time.Second)
		synctest.Wait()
		want := []read{
			{At: time.Second, IDs: []int{1, 2, 3}},
			{At: 2 * time.Second, IDs: []int{4}},
			{At: 3 * time.Second, IDs: []int{5}},
			{At: 5 * time.Second, IDs: []int{6}},
		}
		if diff := cmp.Diff(want, drain(reads), cmpReads); diff != "" {
			t.Errorf("windows (-want +got):\n%s", diff)
		}
		time.Sleep(200 * time.Millisecond) // 5.7s
		write(t, buf, batch(7), a.fn("f"))
		time.Sleep(100 * time.Millisecond)
		got := closeAndDrain(t, buf, reads)
		if diff := cmp.Diff([]read{{At: 5800 * time.Millisecond, IDs: []int{7}}}, got, cmpReads); diff != "" {
			t.Errorf("Close did not flush the open window (-want +got):\n%s", diff)
		}
		if err := buf.Write(context.Background(), batch(8), a.fn("g")); !errors.Is(err, buffer.ErrClosed) {
			t.Errorf("Write after Close: %v, want ErrClosed", err)
		}
	})
}

// TestTumblingWindowLateReader checks that windows that ended before Read
// was called still come out one by one.
func TestTumblingWindowLateReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		buf := newBuffer(t, "tumbling_window", map[string]any{"interval": "1s"})
		a := newAcks()
		write(t, buf, batch(1), a.fn("a"))
		time.Sleep(1500 * time.Millisecond)
		write(t, buf, batch(2), a.fn("b"))
		time.Sleep(1500 * time.Millisecond)
		write(t, buf, batch(3), a.fn("c"))
		time.Sleep(2 * time.Second)
		reads := startReader(t, buf)
		synctest.Wait()
		want := []read{{IDs: []int{1}}, {IDs: []int{2}}, {IDs: []int{3}}}
		if diff := cmp.Diff(want, drain(reads), cmpReads); diff != "" {
			t.Errorf("windows (-want +got):\n%s", diff)
		}
		closeAndDrain(t, buf, reads)
	})
}

func TestSessionWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		buf := newBuffer(t, "session_window", map[string]any{"gap": "1s"})
		a := newAcks()
		reads := startReader(t, buf)
		write(t, buf, batch(1), a.fn("a"))
		time.Sleep(500 * time.Millisecond)
		write(t, buf, batch(2), a.fn("b"))
		time.Sleep(900 * time.Millisecond) // 1.4s: gap not reached
		write(t, buf, batch(3), a.fn("c"))
		time.Sleep(3 * time.Second) // session ends at 2.4s
		write(t, buf, batch(4), a.fn("d"))
		time.Sleep(1500 * time.Millisecond) // ends at 5.4s
		write(t, buf, batch(5), a.fn("e"))
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		want := []read{
			{At: 2400 * time.Millisecond, IDs: []int{1, 2, 3}},
			{At: 5400 * time.Millisecond, IDs: []int{4}},
		}
		if diff := cmp.Diff(want, drain(reads), cmpReads); diff != "" {
			t.Errorf("sessions (-want +got):\n%s", diff)
		}
		got := closeAndDrain(t, buf, reads)
		if diff := cmp.Diff([]read{{At: 6 * time.Second, IDs: []int{5}}}, got, cmpReads); diff != "" {
			t.Errorf("Close did not flush the open session (-want +got):\n%s", diff)
		}
	})
}

func TestMemoryTimeoutAndCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		buf := newBuffer(t, "memory", map[string]any{"capacity": 3.0, "timeout": "1s"})
		a := newAcks()
		reads := startReader(t, buf)
		write(t, buf, batch(1), a.fn("a"))
		time.Sleep(600 * time.Millisecond)
		write(t, buf, batch(2), a.fn("b"))
		time.Sleep(600 * time.Millisecond) // the oldest is 1s old at 1s
		write(t, buf, batch(3, 4), a.fn("c"))
		write(t, buf, batch(5), a.fn("d")) // capacity reached at 1.2s
		time.Sleep(100 * time.Millisecond)
		write(t, buf, batch(6, 7, 8, 9), a.fn("e")) // larger than capacity: taken alone
		time.Sleep(100 * time.Millisecond)
		write(t, buf, batch(10, 11), a.fn("f"))
		write(t, buf, batch(12, 13), a.fn("g")) // would not fit: what is held goes at once
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		want := []read{
			{At: time.Second, IDs: []int{1, 2}},
			{At: 1200 * time.Millisecond, IDs: []int{3, 4, 5}},
			{At: 1300 * time.Millisecond, IDs: []int{6, 7, 8, 9}},
			{At: 1400 * time.Millisecond, IDs: []int{10, 11}},
		}
		if diff := cmp.Diff(want, drain(reads), cmpReads); diff != "" {
			t.Errorf("batches (-want +got):\n%s", diff)
		}
		closeAndDrain(t, buf, reads)
	})
}

// TestMemoryBackPressure checks that Write waits while the buffer is full
// and resumes once Read takes what is held.
func TestMemoryBackPressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		buf := newBuffer(t, "memory", map[string]any{"capacity": 2.0, "timeout": "1h"})
		a := newAcks()
		write(t, buf, batch(1, 2), a.fn("a"))
		done := make(chan error, 1)
		go func() { done <- buf.Write(context.Background(), batch(3), a.fn("b")) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Write into a full buffer returned %v instead of waiting", err)
		default:
		}
		b, ack, err := buf.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]int{1, 2}, idsOf(t, b)); diff != "" {
			t.Errorf("first batch (-want +got):\n%s", diff)
		}
		if err := <-done; err != nil {
			t.Fatalf("waiting Write: %v", err)
		}
		_ = ack(context.Background(), nil)

		// A Write that gives up waiting does not take the batch.
		ctx, cancel := context.WithCancel(context.Background())
		write(t, buf, batch(4), a.fn("c"))
		go func() { done <- buf.Write(ctx, batch(5, 6), a.fn("never")) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Write: %v", err)
		}
		reads := startReader(t, buf)
		got := closeAndDrain(t, buf, reads)
		if diff := cmp.Diff([]read{{IDs: []int{3, 4}}}, got, cmpReads); diff != "" {
			t.Errorf("rest (-want +got):\n%s", diff)
		}
		ackAll(t, got, nil)
		want := map[string][]string{"a": {"ok"}, "b": {"ok"}, "c": {"ok"}}
		if diff := cmp.Diff(want, a.snapshot()); diff != "" {
			t.Errorf("acks (-want +got):\n%s", diff)
		}
	})
}

func TestEmptyBatchIsAckedAtOnce(t *testing.T) {
	for _, name := range []string{"memory", "tumbling_window", "sliding_window", "session_window"} {
		conf := map[string]any{
			"memory": map[string]any{}, "tumbling_window": map[string]any{"interval": "1s"},
			"sliding_window": map[string]any{"interval": "1s", "window_size": 1.0, "slide_size": 1.0},
			"session_window": map[string]any{"gap": "1s"},
		}[name].(map[string]any)
		buf := newBuffer(t, name, conf)
		a := newAcks()
		write(t, buf, message.Batch{}, a.fn("empty"))
		if diff := cmp.Diff(map[string][]string{"empty": {"ok"}}, a.snapshot()); diff != "" {
			t.Errorf("%s: acks (-want +got):\n%s", name, diff)
		}
		_ = buf.Close(context.Background())
		if _, _, err := buf.Read(context.Background()); !errors.Is(err, message.ErrEndOfInput) {
			t.Errorf("%s: Read after Close of an empty buffer: %v", name, err)
		}
	}
}
