package eventlog

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/wire"
)

// testCtx is a context that ends a stuck test instead of hanging it.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// drain reads deliveries until none is ready, rendering each as "R<oldest>"
// for a resync or the event id.
func drain(t *testing.T, s *Subscription) []string {
	t.Helper()
	var out []string
	for range 100_000 {
		d, ok, _ := s.poll()
		if !ok {
			return out
		}
		out = append(out, render(d))
	}
	t.Fatal("subscription never ran dry")
	return nil
}

func render(d Delivery) string {
	if d.Resync {
		return fmt.Sprintf("R%d", d.OldestID)
	}
	return fmt.Sprint(d.Event.ID)
}

func strs(ids ...int64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = fmt.Sprint(id)
	}
	return out
}

func appendN(l *Log, n int, kind string) {
	for range n {
		l.Append(wire.Event{Kind: kind})
	}
}

func TestSubscribeStart(t *testing.T) {
	// Each log holds ids 7..10 (capacity 4, ten appended) unless lastID says
	// otherwise.
	tests := []struct {
		name    string
		lastID  int64 // Options.LastID
		appends int
		afterID int64
		want    []string
	}{
		{name: "live gets nothing old", appends: 10, afterID: Live, want: nil},
		{name: "replay after a retained id", appends: 10, afterID: 8, want: strs(9, 10)},
		{name: "after the newest", appends: 10, afterID: 10, want: nil},
		{name: "after the last dropped id: nothing missing", appends: 10, afterID: 6, want: strs(7, 8, 9, 10)},
		{name: "older than the oldest retained", appends: 10, afterID: 5, want: append([]string{"R7"}, strs(7, 8, 9, 10)...)},
		{name: "from zero after drops", appends: 10, afterID: 0, want: append([]string{"R7"}, strs(7, 8, 9, 10)...)},
		{name: "from zero, nothing dropped", appends: 3, afterID: 0, want: strs(1, 2, 3)},
		{name: "an id from another log", appends: 10, afterID: 99, want: append([]string{"R7"}, strs(7, 8, 9, 10)...)},
		{name: "restored log, old id", lastID: 100, afterID: 50, want: []string{"R101"}},
		{name: "restored log, its last id", lastID: 100, afterID: 100, want: nil},
		{name: "restored log with events", lastID: 100, appends: 2, afterID: 3, want: []string{"R101", "101", "102"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(Options{Capacity: 4, LastID: tt.lastID})
			appendN(l, tt.appends, "k")
			s := l.Subscribe(testCtx(t), tt.afterID, Filter{})
			if diff := cmp.Diff(tt.want, drain(t, s)); diff != "" {
				t.Errorf("deliveries (-want +got):\n%s", diff)
			}
			// Whatever came before, the next event arrives exactly once.
			id := l.Append(wire.Event{Kind: "k"}).ID
			if diff := cmp.Diff(strs(id), drain(t, s)); diff != "" {
				t.Errorf("after one more append (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSubscribeFilter(t *testing.T) {
	l := New(Options{Capacity: 4})
	s := l.Subscribe(testCtx(t), 0, Filter{Kinds: []string{"b"}})
	for _, k := range []string{"a", "b", "a", "b", "a", "a", "a", "a", "b"} {
		l.Append(wire.Event{Kind: k})
	}
	// ids 1..9, kinds b at 2, 4, 9; the log kept 6..9, so the subscriber
	// learns of the drop even though only one retained event matches.
	if diff := cmp.Diff([]string{"R6", "9"}, drain(t, s)); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
}

// TestSubscribeRacingAppends subscribes while other goroutines append and
// checks that the subscriber sees every id after its start exactly once.
func TestSubscribeRacingAppends(t *testing.T) {
	const writers, each, trials = 4, 300, 20
	for trial := range trials {
		l := New(Options{Capacity: writers * each})
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range writers {
			wg.Go(func() {
				<-start
				for i := range each {
					l.Append(wire.Event{Kind: "k"})
					if i%16 == 0 {
						runtime.Gosched()
					}
				}
			})
		}
		close(start)
		// Let some appends land first, differently in each trial.
		for range trial * 10 {
			runtime.Gosched()
		}
		after := l.LastID()
		ctx := testCtx(t)
		live := l.Subscribe(ctx, Live, Filter{})
		replay := l.Subscribe(ctx, after, Filter{})
		wg.Wait()
		last := l.LastID()

		got := readUntil(t, ctx, replay, last)
		if diff := cmp.Diff(seq(after+1, last, 1), got); diff != "" {
			t.Fatalf("trial %d: replay subscriber after %d (-want +got):\n%s", trial, after, diff)
		}
		got = readUntil(t, ctx, live, last)
		if len(got) > 0 {
			if diff := cmp.Diff(seq(got[0], last, 1), got); diff != "" {
				t.Fatalf("trial %d: live subscriber (-want +got):\n%s", trial, diff)
			}
			if got[0] <= after {
				t.Fatalf("trial %d: live subscriber made at id >= %d saw id %d", trial, after, got[0])
			}
		}
	}
}

// readUntil reads event ids from s until it has seen id last.
func readUntil(t *testing.T, ctx context.Context, s *Subscription, last int64) []int64 {
	t.Helper()
	var got []int64
	for len(got) == 0 || got[len(got)-1] < last {
		d, ok, _ := s.poll()
		if !ok {
			break
		}
		if d.Resync {
			t.Fatalf("unexpected resync after %v", got)
		}
		got = append(got, d.Event.ID)
	}
	if ctx.Err() != nil {
		t.Fatal(ctx.Err())
	}
	return got
}

// TestNextWaitsForAppend plays ping-pong between an appender and a reader
// blocked in Next: the appender adds the next event only once the reader has
// the previous one, so a single lost wake-up stalls the test.
func TestNextWaitsForAppend(t *testing.T) {
	ctx := testCtx(t)
	l := New(Options{})
	s := l.Subscribe(ctx, Live, Filter{})
	const n = 2000
	got := make(chan int64)
	errc := make(chan error, 1)
	go func() {
		for range n {
			d, err := s.Next(ctx)
			if err != nil {
				errc <- err
				return
			}
			got <- d.Event.ID
		}
	}()
	for i := range int64(n) {
		want := l.Append(wire.Event{Kind: "k"}).ID
		select {
		case id := <-got:
			if id != want || id != i+1 {
				t.Fatalf("Next = event %d, want %d", id, want)
			}
		case err := <-errc:
			t.Fatalf("Next after %d events: %v", i, err)
		}
	}
}

// TestSlowSubscribers checks that subscribers who never read do not slow or
// block Append, and that each learns of what it missed by one resync.
func TestSlowSubscribers(t *testing.T) {
	const capacity, appends, subs = 16, 10_000, 100
	l := New(Options{Capacity: capacity})
	ctx := testCtx(t)
	var all []*Subscription
	for range subs {
		all = append(all, l.Subscribe(ctx, Live, Filter{}))
	}
	for range appends {
		l.Append(wire.Event{Kind: "k"})
	}
	oldest := int64(appends - capacity + 1)
	want := append([]string{fmt.Sprintf("R%d", oldest)}, strs(seq(oldest, appends, 1)...)...)
	for i, s := range all {
		if diff := cmp.Diff(want, drain(t, s)); diff != "" {
			t.Fatalf("subscriber %d (-want +got):\n%s", i, diff)
		}
	}
}

// TestSubscriptionEnds checks that a subscription's context ends it, that
// a waiting Next returns, and that nothing is left running.
func TestSubscriptionEnds(t *testing.T) {
	base := runtime.NumGoroutine()
	l := New(Options{})
	subCtx, cancelSub := context.WithCancel(t.Context())
	s := l.Subscribe(subCtx, Live, Filter{})
	errc := make(chan error, 1)
	go func() {
		_, err := s.Next(t.Context())
		errc <- err
	}()
	cancelSub()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Next = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return after its subscription ended")
	}
	// Events are ready, but the subscription has ended.
	l.Append(wire.Event{Kind: "k"})
	if _, err := s.Next(t.Context()); !errors.Is(err, context.Canceled) {
		t.Errorf("Next after the end = %v, want context.Canceled", err)
	}

	// Next's own context bounds one wait without ending the subscription.
	s2 := l.Subscribe(t.Context(), Live, Filter{})
	waitCtx, cancelWait := context.WithCancel(t.Context())
	go func() {
		_, err := s2.Next(waitCtx)
		errc <- err
	}()
	cancelWait()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Next = %v, want context.Canceled", err)
	}
	id := l.Append(wire.Event{Kind: "k"}).ID
	d, err := s2.Next(testCtx(t))
	if err != nil || d.Event.ID != id {
		t.Errorf("Next after a cancelled wait = %v, %v; want event %d", d, err, id)
	}
	checkGoroutines(t, base)
}
