package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

func TestWriteDesired(t *testing.T) { backends(t, testWriteDesired) }

func testWriteDesired(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	r1, err := s.WriteDesired(ctx, dw("i1", "never-seen", "s1", t0))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.WriteDesired(ctx, dw("i2", "never-seen", "s1", t0.Add(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if r1.Generation != 1 || r2.Generation != 2 || r2.Superseded != 1 {
		t.Fatalf("results %+v %+v", r1, r2)
	}
	i1, _ := s.GetIntent(ctx, "i1")
	i2, _ := s.GetIntent(ctx, "i2")
	if i1.State != wire.OpSuperseded || i2.State != wire.OpPending || i2.Generation != 2 {
		t.Errorf("states %s %s gen %d", i1.State, i2.State, i2.Generation)
	}
	out, err := s.PendingOutbox(ctx, 10)
	if err != nil || len(out) != 1 || out[0].IntentID != "i2" {
		t.Errorf("PendingOutbox = %+v, %v; want only i2", out, err)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM audit WHERE outcome = 'accepted' AND resource_id = 's1'"); n != 2 {
		t.Errorf("audit rows = %d", n)
	}
	ev, _ := s.ListEvents(ctx, EventFilter{Kind: wire.EventIntentAccepted}, Paging{1, 10})
	if ev.Total != 2 || ev.Items[0].OperationID != "i2" || ev.Items[0].ID != r2.EventID {
		t.Errorf("events %+v", ev)
	}
	// Another resource has its own generation.
	r3, _ := s.WriteDesired(ctx, dw("i3", "never-seen", "s2", t0))
	if r3.Generation != 1 {
		t.Errorf("other resource generation %d", r3.Generation)
	}
	if _, err := s.WriteDesired(ctx, dw("i3", "n", "s9", t0)); err == nil || errors.Is(err, ErrStorage) {
		t.Errorf("duplicate intent id: %v, want a non-storage error", err)
	}
}

func TestWriteDesiredIfMatch(t *testing.T) { backends(t, testWriteDesiredIfMatch) }

func testWriteDesiredIfMatch(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	tests := []struct {
		name    string
		ifMatch *int64
		wantGen int64
		wantCur int64 // when a conflict
	}{
		{"absent on new resource", nil, 1, 0},
		{"current", p(1), 2, 0},
		{"stale", p(1), 0, 2},
		{"future", p(7), 0, 2},
		{"current again", p(2), 3, 0},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := dw(fmt.Sprint("i", i), "n1", "s1", t0)
			w.IfMatch = tc.ifMatch
			res, err := s.WriteDesired(ctx, w)
			if tc.wantCur != 0 {
				var gc *GenerationConflictError
				if !errors.As(err, &gc) || !errors.Is(err, ErrGenerationConflict) || gc.Current != tc.wantCur || gc.Expected != *tc.ifMatch {
					t.Fatalf("err = %v, want conflict current %d", err, tc.wantCur)
				}
				if _, err := s.GetIntent(ctx, w.IntentID); !errors.Is(err, ErrNotFound) {
					t.Errorf("conflicting write left its intent: %v", err)
				}
				return
			}
			if err != nil || res.Generation != tc.wantGen {
				t.Fatalf("= %+v, %v; want generation %d", res, err, tc.wantGen)
			}
		})
	}
	w := dw("x", "n1", "new", t0)
	w.IfMatch = p(0)
	if res, err := s.WriteDesired(ctx, w); err != nil || res.Generation != 1 {
		t.Errorf("If-Match 0 on a new resource = %+v, %v", res, err)
	}
}

// TestWriteDesiredOneTransaction fails the write after its intent row is
// inserted: nothing of it may be visible, and the writes sharing its batch
// still commit.
func TestWriteDesiredOneTransaction(t *testing.T) { backends(t, testWriteDesiredOneTransaction) }

func testWriteDesiredOneTransaction(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if _, err := s.WriteDesired(ctx, dw("i1", "n1", "s1", t0)); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("injected")
	var failing sync.Map
	s.hook = func(point string) error {
		if point == "after_intent" {
			if _, ok := failing.Load("now"); ok {
				return boom
			}
		}
		return nil
	}
	failing.Store("now", true)
	if _, err := s.WriteDesired(ctx, dw("i2", "n1", "s1", t0)); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want injected", err)
	}
	failing.Delete("now")
	if _, err := s.GetIntent(ctx, "i2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("intent of failed write visible: %v", err)
	}
	i1, _ := s.GetIntent(ctx, "i1")
	r, _ := s.GetResource(ctx, "n1", KindStream, "s1")
	if i1.State != wire.OpPending || r.Generation != 1 {
		t.Errorf("failed write changed state: i1 %s, generation %d", i1.State, r.Generation)
	}
	for q, want := range map[string]int{"SELECT COUNT(*) FROM outbox": 1, "SELECT COUNT(*) FROM audit": 1, "SELECT COUNT(*) FROM events": 1} {
		if n := count(t, s, q); n != want {
			t.Errorf("%s = %d, want %d", q, n, want)
		}
	}
	if res, err := s.WriteDesired(ctx, dw("i3", "n1", "s1", t0)); err != nil || res.Generation != 2 {
		t.Errorf("next write = %+v, %v", res, err)
	}
}

func TestGroupCommit(t *testing.T) { backends(t, testGroupCommit) }

func testGroupCommit(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	const n = 64
	res := [2][]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	before := s.Stats()
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := s.WriteDesired(ctx, dw(fmt.Sprint("i", i), "n1", fmt.Sprint("s", i%2), t0))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			res[i%2] = append(res[i%2], r.Generation)
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	for k, gens := range res {
		seen := map[int64]bool{}
		for _, g := range gens {
			seen[g] = true
		}
		for g := int64(1); g <= n/2; g++ {
			if !seen[g] {
				t.Errorf("resource s%d: generation %d missing (got %v)", k, g, gens)
			}
		}
	}
	st := s.Stats()
	txns, writes := st.Transactions-before.Transactions, st.Writes-before.Writes
	t.Logf("%d writes in %d transactions", writes, txns)
	if writes != n || txns >= n {
		t.Errorf("%d writes in %d transactions: want %d writes in fewer transactions", writes, txns, n)
	}
}
