package buffer_test

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
)

// TestWindowBounds checks that a window holding its max_messages (or
// max_bytes) makes Write wait — the input is not read further — until an
// emitted window made room, and that nothing is lost or acknowledged early.
func TestWindowBounds(t *testing.T) {
	tests := []struct {
		name string
		conf map[string]any
	}{
		{"tumbling_window", map[string]any{"interval": "1s", "max_messages": 3.0}},
		{"tumbling_window", map[string]any{"interval": "1s", "max_bytes": 3.0}},
		{"session_window", map[string]any{"gap": "1s", "max_messages": 3.0}},
		{"session_window", map[string]any{"gap": "1s", "max_bytes": 3.0}},
		{"sliding_window", map[string]any{"window_size": 2.0, "slide_size": 2.0, "interval": "1s", "max_messages": 3.0}},
		{"sliding_window", map[string]any{"window_size": 2.0, "slide_size": 2.0, "interval": "1s", "max_bytes": 3.0}},
		{"memory", map[string]any{"capacity": 100.0, "timeout": "1s", "max_bytes": 3.0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				buf := newBuffer(t, tt.name, tt.conf)
				a := newAcks()
				// Payloads are one byte each: ids 1..9.
				write(t, buf, batch(1, 2), a.fn("a"))
				write(t, buf, batch(3), a.fn("b")) // exactly at the bound
				done := make(chan error, 1)
				go func() { done <- buf.Write(context.Background(), batch(4), a.fn("c")) }()
				synctest.Wait()
				select {
				case err := <-done:
					t.Fatalf("Write beyond the bound returned %v instead of waiting", err)
				default:
				}
				time.Sleep(10 * time.Second) // windows are due, but nobody reads: still full
				synctest.Wait()
				select {
				case err := <-done:
					t.Fatalf("Write returned %v while nothing was read", err)
				default:
				}

				reads := startReader(t, buf)
				if err := <-done; err != nil {
					t.Fatalf("waiting Write: %v", err)
				}
				time.Sleep(10 * time.Second)
				got := closeAndDrain(t, buf, reads)
				var ids []int
				for _, r := range got {
					if tt.name != "memory" && len(r.IDs) > 3 {
						t.Errorf("a window of %d messages, more than the bound", len(r.IDs))
					}
					ids = append(ids, r.IDs...)
				}
				if diff := cmp.Diff([]int{1, 2, 3, 4}, ids); diff != "" {
					t.Errorf("messages (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(map[string][]string{}, a.snapshot()); diff != "" {
					t.Errorf("acknowledged before delivery (-want +got):\n%s", diff)
				}
				ackAll(t, got, nil)
				want := map[string][]string{"a": {"ok"}, "b": {"ok"}, "c": {"ok"}}
				if diff := cmp.Diff(want, a.snapshot()); diff != "" {
					t.Errorf("acks (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestWindowBoundTakesLargeBatchWhenEmpty checks that a batch larger than
// the bound is not refused forever: an empty window takes it.
func TestWindowBoundTakesLargeBatchWhenEmpty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		buf := newBuffer(t, "tumbling_window", map[string]any{"interval": "1s", "max_messages": 2.0})
		a := newAcks()
		reads := startReader(t, buf)
		write(t, buf, batch(1, 2, 3, 4, 5), a.fn("a"))
		done := make(chan error, 1)
		go func() { done <- buf.Write(context.Background(), batch(6), a.fn("b")) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Write into a window over its bound returned %v", err)
		default:
		}
		time.Sleep(1500 * time.Millisecond)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got := closeAndDrain(t, buf, reads)
		want := []read{{At: time.Second, IDs: []int{1, 2, 3, 4, 5}}, {At: 1500 * time.Millisecond, IDs: []int{6}}}
		if diff := cmp.Diff(want, got, cmpReads); diff != "" {
			t.Errorf("windows (-want +got):\n%s", diff)
		}
	})
}

// TestWindowBoundCancelAndClose checks that a waiting Write gives up with
// its context (not taking the batch) and fails with ErrClosed on Close.
func TestWindowBoundCancelAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		buf := newBuffer(t, "session_window", map[string]any{"gap": "1s", "max_messages": 1.0})
		a := newAcks()
		write(t, buf, batch(1), a.fn("a"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- buf.Write(ctx, batch(2), a.fn("never")) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Write: %v", err)
		}
		go func() { done <- buf.Write(context.Background(), batch(3), a.fn("never")) }()
		synctest.Wait()
		reads := startReader(t, buf)
		got := closeAndDrain(t, buf, reads)
		if err := <-done; !errors.Is(err, buffer.ErrClosed) {
			t.Errorf("Write waiting at Close: %v, want ErrClosed", err)
		}
		if diff := cmp.Diff([]read{{IDs: []int{1}}}, got, cmpReads); diff != "" {
			t.Errorf("windows (-want +got):\n%s", diff)
		}
	})
}

func TestWindowBoundConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		conf map[string]any
		err  string
	}{
		{"tumbling_window", map[string]any{"interval": "1s", "max_messages": 0.0}, "max_messages: must be at least 1, got 0"},
		{"session_window", map[string]any{"gap": "1s", "max_bytes": 0.0}, "max_bytes: must be at least 1, got 0"},
		{"sliding_window", map[string]any{"window_size": 5.0, "slide_size": 1.0, "interval": "1s", "max_messages": 4.0},
			"max_messages: must be at least window_size (5), got 4"},
		{"memory", map[string]any{"max_bytes": 0.0}, "max_bytes: must be at least 1, got 0"},
	}
	for _, tt := range tests {
		_, err := component.Default.NewBuffer(tt.name, tt.conf, component.Resources{})
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s %v: error = %v, want it to contain %q", tt.name, tt.conf, err, tt.err)
		}
	}
	// A window larger than the default bound raises it instead of failing.
	if _, err := component.Default.NewBuffer("sliding_window", map[string]any{
		"window_size": float64(buffer.DefaultMaxMessages + 1), "slide_size": 1.0, "interval": "1s",
	}, component.Resources{}); err != nil {
		t.Errorf("large window without max_messages: %v", err)
	}
}
