package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/wire"
)

// TestEventSinkGroupCommit runs concurrent writes, one in four of which
// fails after inserting its event, until the writer has shared a
// transaction between failing and succeeding writes (the batch then runs
// again with a savepoint per write). The sink must have received exactly
// the committed events, in id order, as a read gives them back, and every
// succeeding write must be on disk.
func TestEventSinkGroupCommit(t *testing.T) { backends(t, testEventSinkGroupCommit) }

func testEventSinkGroupCommit(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	var mu sync.Mutex
	var got []wire.Event
	s.SetEventSink(func(evs []wire.Event) {
		mu.Lock()
		got = append(got, evs...)
		mu.Unlock()
	})
	boom := errors.New("injected")
	ok := 0
	for round := 0; round < 50 && s.Stats().Reruns == 0; round++ {
		var wg sync.WaitGroup
		for i := range 32 {
			fail := i%4 == 3
			if !fail {
				ok++
			}
			wg.Go(func() {
				err := s.write(ctx, func(ctx context.Context, q querier) error {
					e := event(wire.EventNodeOnline, t0, fmt.Sprintf("n%d-%d", round, i), "", "", "", "", "", "", "")
					e.Data = map[string]any{"n": int64(i), "fail": fail, "s": "x"}
					if _, err := insertEvent(ctx, q, e); err != nil {
						return err
					}
					if fail {
						return boom
					}
					return nil
				})
				if fail != errors.Is(err, boom) || (!fail && err != nil) {
					t.Errorf("write %d (fail %v): %v", i, fail, err)
				}
			})
		}
		wg.Wait()
	}
	if s.Stats().Reruns == 0 {
		t.Fatal("no batch mixed a failing write with others in 50 rounds")
	}
	want, err := s.EventsAfter(ctx, 0, EventFilter{}, MaxEvents)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != ok {
		t.Errorf("%d events on disk, want %d (one per succeeding write)", len(want), ok)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sink differs from the log (-log +sink):\n%s", diff)
	}
}

// TestCommittedTxn checks that a write's Txn is committed when it returns
// and that Committed never goes back.
func TestCommittedTxn(t *testing.T) { backends(t, testCommittedTxn) }

func testCommittedTxn(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	var last int64
	for i := range 3 {
		res, err := s.WriteDesired(ctx, dw(fmt.Sprint("i", i), "n1", "s1", t0.Add(time.Duration(i)*time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		if res.Txn <= last || s.Committed() < res.Txn {
			t.Errorf("write %d: txn %d after %d, committed %d", i, res.Txn, last, s.Committed())
		}
		last = res.Txn
		if res.Intent.ID != fmt.Sprint("i", i) || res.Intent.State != wire.OpPending || res.Intent.Generation != res.Generation {
			t.Errorf("write %d: intent %+v", i, res.Intent)
		}
		in, err := s.GetIntent(ctx, res.Intent.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(in, res.Intent); diff != "" {
			t.Errorf("write %d: intent as written differs from the stored one (-stored +written):\n%s", i, diff)
		}
	}
}

// TestAppendEventsInOrder: the events of one AppendEvents call (one
// statement on PostgreSQL) are stored in the order given, with increasing
// ids, and the sink receives them as a read gives them back.
func TestAppendEventsInOrder(t *testing.T) { backends(t, testAppendEventsInOrder) }

func testAppendEventsInOrder(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	var got []wire.Event
	s.SetEventSink(func(evs []wire.Event) { got = append(got, evs...) })
	for _, n := range []int{1, 7, 3} {
		var evs []wire.Event
		for i := range n {
			e := event(wire.EventConvergenceChanged, t0.Add(time.Duration(i)*time.Millisecond), "n1", fmt.Sprint("s", i), "", "", "hub", "hub", "", fmt.Sprintf("%d of %d", i, n))
			if i%2 == 0 {
				e.Data = map[string]any{"i": int64(i), "tag": "x<&>"}
			}
			evs = append(evs, e)
		}
		if err := s.AppendEvents(ctx, evs); err != nil {
			t.Fatal(err)
		}
	}
	stored, err := s.EventsAfter(ctx, 0, EventFilter{}, MaxEvents)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for i, e := range stored {
		msgs = append(msgs, e.Message)
		if i > 0 && e.ID <= stored[i-1].ID {
			t.Errorf("event %d has id %d after %d", i, e.ID, stored[i-1].ID)
		}
	}
	want := []string{"0 of 1", "0 of 7", "1 of 7", "2 of 7", "3 of 7", "4 of 7", "5 of 7", "6 of 7", "0 of 3", "1 of 3", "2 of 3"}
	if diff := cmp.Diff(want, msgs); diff != "" {
		t.Errorf("stored order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(stored, got); diff != "" {
		t.Errorf("sink differs from the log (-log +sink):\n%s", diff)
	}
}
