package buffer_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
)

func sliding(t *testing.T, size, slide int) *acksAndReads {
	t.Helper()
	buf := newBuffer(t, "sliding_window", map[string]any{
		"window_size": float64(size), "slide_size": float64(slide), "interval": "1s",
	})
	return &acksAndReads{buf: buf, acks: newAcks()}
}

type acksAndReads struct {
	buf  component.Buffer
	acks *acks
}

// TestSlidingWindow follows ArkFlow's semantics with window_size 3 and
// slide_size 1, and checks when each input batch is acknowledged.
func TestSlidingWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sliding(t, 3, 1)
		reads := startReader(t, s.buf)
		time.Sleep(100 * time.Millisecond)
		write(t, s.buf, batch(0, 1), s.acks.fn("a"))
		write(t, s.buf, batch(2), s.acks.fn("b"))
		write(t, s.buf, batch(3, 4), s.acks.fn("c"))
		time.Sleep(5 * time.Second)
		synctest.Wait()
		got := drain(reads)
		want := []read{
			{At: time.Second, IDs: []int{0, 1, 2}},
			{At: 2 * time.Second, IDs: []int{1, 2, 3}},
			{At: 3 * time.Second, IDs: []int{2, 3, 4}},
		}
		if diff := cmp.Diff(want, got, cmpReads); diff != "" {
			t.Fatalf("windows (-want +got):\n%s", diff)
		}

		ack := func(i int, err error) {
			t.Helper()
			if e := got[i].ack(context.Background(), err); e != nil {
				t.Fatal(e)
			}
		}
		check := func(when string, want map[string][]string) {
			t.Helper()
			if diff := cmp.Diff(want, s.acks.snapshot()); diff != "" {
				t.Errorf("acks %s (-want +got):\n%s", when, diff)
			}
		}
		// a (0, 1) is in windows 0 and 1 and has slid out of the buffer.
		ack(1, nil)
		check("after window 1", map[string][]string{})
		ack(0, nil)
		check("after windows 0, 1", map[string][]string{"a": {"ok"}})
		// b (2) is in all three windows; c (3, 4) is still held.
		boom := errors.New("output failed")
		ack(2, boom)
		check("after all windows", map[string][]string{"a": {"ok"}, "b": {"output failed"}})

		// 3 and 4 were in windows already: Close lets them go without a
		// window of their own, and c takes the error of window 2.
		rest := closeAndDrain(t, s.buf, reads)
		if len(rest) != 0 {
			t.Errorf("Close emitted %+v; every message was in a window", rest)
		}
		check("after Close", map[string][]string{"a": {"ok"}, "b": {"output failed"}, "c": {"output failed"}})
	})
}

// TestSlidingWindowCloseFlushes checks the shorter last window of messages
// no window held yet, and that acks wait for it.
func TestSlidingWindowCloseFlushes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sliding(t, 3, 2)
		reads := startReader(t, s.buf)
		write(t, s.buf, batch(0, 1, 2, 3), s.acks.fn("a"))
		write(t, s.buf, batch(4), s.acks.fn("b"))
		time.Sleep(1500 * time.Millisecond)
		got := closeAndDrain(t, s.buf, reads)
		want := []read{
			{At: time.Second, IDs: []int{0, 1, 2}},
			{At: 1500 * time.Millisecond, IDs: []int{2, 3, 4}}, // a full window, due now
		}
		if diff := cmp.Diff(want, got, cmpReads); diff != "" {
			t.Fatalf("windows (-want +got):\n%s", diff)
		}
		ackAll(t, got, nil)
		if diff := cmp.Diff(map[string][]string{"a": {"ok"}, "b": {"ok"}}, s.acks.snapshot()); diff != "" {
			t.Errorf("acks (-want +got):\n%s", diff)
		}

		s = sliding(t, 3, 3)
		reads = startReader(t, s.buf)
		write(t, s.buf, batch(0, 1, 2, 3), s.acks.fn("c"))
		time.Sleep(1500 * time.Millisecond)
		got = closeAndDrain(t, s.buf, reads)
		want = []read{
			{At: time.Second, IDs: []int{0, 1, 2}},
			{At: 1500 * time.Millisecond, IDs: []int{3}}, // never in a window: a last, shorter one
		}
		if diff := cmp.Diff(want, got, cmpReads); diff != "" {
			t.Fatalf("windows (-want +got):\n%s", diff)
		}
		ackAll(t, got[:1], nil)
		if _, ok := s.acks.snapshot()["c"]; ok {
			t.Errorf("c acknowledged before its last window was")
		}
		ackAll(t, got[1:], nil)
		if diff := cmp.Diff([]string{"ok"}, s.acks.snapshot()["c"]); diff != "" {
			t.Errorf("acks of c (-want +got):\n%s", diff)
		}
	})
}

// TestSlidingWindowTicks checks one window per interval, that a window
// waits for the tick after its newest message, and that a late reader
// catches up.
func TestSlidingWindowTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sliding(t, 2, 2)
		write(t, s.buf, batch(0), s.acks.fn("a"))
		time.Sleep(2500 * time.Millisecond)
		write(t, s.buf, batch(1, 2, 3, 4, 5), s.acks.fn("b")) // at 2.5s: ticks 3, 4, 5 are due
		time.Sleep(5 * time.Second)                           // 7.5s
		reads := startReader(t, s.buf)
		synctest.Wait()
		want := []read{{IDs: []int{0, 1}}, {IDs: []int{2, 3}}, {IDs: []int{4, 5}}}
		if diff := cmp.Diff(want, drain(reads), cmpReads); diff != "" {
			t.Errorf("late reader (-want +got):\n%s", diff)
		}
		write(t, s.buf, batch(6, 7, 8, 9), s.acks.fn("c")) // at 7.5s
		time.Sleep(3 * time.Second)
		synctest.Wait()
		want = []read{{At: 500 * time.Millisecond, IDs: []int{6, 7}}, {At: 1500 * time.Millisecond, IDs: []int{8, 9}}}
		if diff := cmp.Diff(want, drain(reads), cmpReads); diff != "" {
			t.Errorf("windows (-want +got):\n%s", diff)
		}
		closeAndDrain(t, s.buf, reads)
	})
}

// TestSlidingWindowCopies checks that overlapping windows do not share
// metadata fields, which processors may set.
func TestSlidingWindowCopies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sliding(t, 2, 1)
		b := batch(0, 1, 2)
		for i := range b.Messages {
			b.Messages[i].SetMeta("k", "orig")
		}
		write(t, s.buf, b, s.acks.fn("a"))
		time.Sleep(time.Second)
		w1, _, err := s.buf.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		w1.Messages[1].SetMeta("k", "changed")
		time.Sleep(time.Second)
		w2, _, err := s.buf.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got := w2.Messages[0].Meta.Fields["k"]; got != "orig" {
			t.Errorf("window 2 sees metadata set in window 1: %q", got)
		}
		_ = s.buf.Close(context.Background())
	})
}
