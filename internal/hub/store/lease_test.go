package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// TestLeaseTwoHolders plays two Hubs on one Store handle: b takes the
// lease over only once a's expired or was released, the epoch grows at
// every takeover and never otherwise, and a deposed holder cannot renew.
func TestLeaseTwoHolders(t *testing.T) { backends(t, testLeaseTwoHolders) }

func testLeaseTwoHolders(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	const ttl = 5 * time.Second
	claim := func(id string, at time.Duration) LeaseClaim {
		return LeaseClaim{HolderID: id, Address: "http://" + id + ".test:1", Now: t0.Add(at), TTL: ttl}
	}
	if l, err := s.GetLease(ctx); err != nil || l != (Lease{}) {
		t.Fatalf("fresh lease %+v, %v", l, err)
	}
	steps := []struct {
		name    string
		do      func() (Lease, error)
		holder  string
		epoch   int64
		refused bool
	}{
		{"a acquires a fresh lease", func() (Lease, error) { return s.AcquireLease(ctx, claim("a", 0)) }, "a", 1, false},
		{"b is refused while a holds it", func() (Lease, error) { return s.AcquireLease(ctx, claim("b", 4*time.Second)) }, "a", 1, true},
		{"a renews: same epoch", func() (Lease, error) { return s.AcquireLease(ctx, claim("a", 4*time.Second)) }, "a", 1, false},
		{"b is refused just before the renewed expiry", func() (Lease, error) {
			return s.AcquireLease(ctx, claim("b", 9*time.Second-time.Millisecond))
		}, "a", 1, true},
		{"b takes over at expiry", func() (Lease, error) { return s.AcquireLease(ctx, claim("b", 9*time.Second)) }, "b", 2, false},
		{"deposed a cannot renew", func() (Lease, error) { return s.AcquireLease(ctx, claim("a", 9*time.Second)) }, "b", 2, true},
		{"b renews", func() (Lease, error) { return s.AcquireLease(ctx, claim("b", 10*time.Second)) }, "b", 2, false},
		{"b releases; a takes over at once", func() (Lease, error) {
			if err := s.ReleaseLease(ctx, "b", 2); err != nil {
				return Lease{}, err
			}
			return s.AcquireLease(ctx, claim("a", 11*time.Second))
		}, "a", 3, false},
		{"a stale release of epoch 1 changes nothing", func() (Lease, error) {
			if err := s.ReleaseLease(ctx, "a", 1); err != nil {
				return Lease{}, err
			}
			return s.AcquireLease(ctx, claim("b", 12*time.Second))
		}, "a", 3, true},
		{"a re-acquires its own expired lease: a new term", func() (Lease, error) { return s.AcquireLease(ctx, claim("a", 30*time.Second)) }, "a", 4, false},
		{"b takes the lease by force (exclusive start)", func() (Lease, error) { return s.TakeLease(ctx, claim("b", 31*time.Second)) }, "b", 5, false},
	}
	for _, st := range steps {
		l, err := st.do()
		if st.refused {
			var held *LeaseHeldError
			if !errors.Is(err, ErrLeaseHeld) || !errors.As(err, &held) {
				t.Fatalf("%s: err %v, want ErrLeaseHeld", st.name, err)
			}
			l = held.Lease
		} else if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if l.HolderID != st.holder || l.Epoch != st.epoch {
			t.Fatalf("%s: lease %+v, want holder %s epoch %d", st.name, l, st.holder, st.epoch)
		}
		got, err := s.GetLease(ctx)
		if err != nil || got.HolderID != st.holder || got.Epoch != st.epoch {
			t.Fatalf("%s: stored lease %+v, %v", st.name, got, err)
		}
	}
	// The epoch survives a restart.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	l, err := s2.TakeLease(ctx, claim("c", 40*time.Second))
	if err != nil || l.Epoch != 6 || l.HolderID != "c" || !l.ExpiresAt.Equal(t0.Add(45*time.Second)) {
		t.Fatalf("after restart: %+v, %v", l, err)
	}
	if _, err := s2.AcquireLease(ctx, LeaseClaim{HolderID: "d", Now: t0}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("claim without ttl: %v", err)
	}
}

// TestFencedWrites: a write carrying the leader's epoch runs while that
// epoch holds the lease; after a takeover or a release it fails with
// ErrFenced and leaves no row, while unfenced writes go on.
func TestFencedWrites(t *testing.T) { backends(t, testFencedWrites) }

func testFencedWrites(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	const ttl = 5 * time.Second
	a, err := s.AcquireLease(ctx, LeaseClaim{HolderID: "a", Now: t0, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	asA := WithEpoch(ctx, a.Epoch)
	ev := func(msg string) []wire.Event {
		return []wire.Event{{Kind: wire.EventNodeUnavailable, OccurredAt: wire.At(t0), NodeID: "n1", Message: msg}}
	}
	if err := s.AppendEvents(asA, ev("leader a")); err != nil {
		t.Fatalf("leader write: %v", err)
	}
	if _, err := s.WriteDesired(ctx, dw("i1", "n1", "s1", t0)); err != nil {
		t.Fatal(err)
	}
	b, err := s.AcquireLease(ctx, LeaseClaim{HolderID: "b", Now: t0.Add(ttl), TTL: ttl})
	if err != nil || b.Epoch != a.Epoch+1 {
		t.Fatalf("takeover %+v, %v", b, err)
	}
	if err := s.AppendEvents(asA, ev("deposed a")); !errors.Is(err, ErrFenced) {
		t.Fatalf("deposed leader's event write: %v, want ErrFenced", err)
	}
	_, err = s.StartAttempts(asA, []AttemptStart{{IntentID: "i1", AttemptID: "a1", NodeID: "n1", Now: t0, ExpiresAt: t0.Add(time.Minute)}})
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("deposed leader's StartAttempts: %v, want ErrFenced", err)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM attempts"); n != 0 {
		t.Fatalf("%d attempts after a fenced StartAttempts, want 0", n)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM events WHERE message = 'deposed a'"); n != 0 {
		t.Fatalf("%d events of the deposed leader, want 0", n)
	}
	if i, _ := s.GetIntent(ctx, "i1"); i.State != wire.OpPending {
		t.Fatalf("intent after a fenced start: %+v", i)
	}
	// The new leader's writes and unfenced (request) writes run.
	asB := WithEpoch(ctx, b.Epoch)
	if _, err := s.StartAttempts(asB, []AttemptStart{{IntentID: "i1", AttemptID: "a1", NodeID: "n1", Now: t0, ExpiresAt: t0.Add(time.Minute)}}); err != nil {
		t.Fatalf("leader b's StartAttempts: %v", err)
	}
	if err := s.AppendEvents(ctx, ev("request")); err != nil {
		t.Fatalf("unfenced write: %v", err)
	}
	// Released: no epoch writes any more, not even the releaser's.
	if err := s.ReleaseLease(ctx, "b", b.Epoch); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(asB, ev("released b")); !errors.Is(err, ErrFenced) {
		t.Fatalf("write after release: %v, want ErrFenced", err)
	}
}

// TestFencedWritesInOneBatch: fenced and unfenced writes queued together
// share transactions; the deposed leader's fail alone, the others commit.
func TestFencedWritesInOneBatch(t *testing.T) { backends(t, testFencedWritesInOneBatch) }

func testFencedWritesInOneBatch(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	a, err := s.AcquireLease(ctx, LeaseClaim{HolderID: "a", Now: t0, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireLease(ctx, LeaseClaim{HolderID: "b", Now: t0.Add(time.Second), TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	const n = 64
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := ctx
			if i%2 == 0 {
				c = WithEpoch(ctx, a.Epoch)
			}
			errs[i] = s.AppendEvents(c, []wire.Event{{Kind: wire.EventNodeOnline, OccurredAt: wire.At(t0), NodeID: "n1", Message: "batch"}})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if fenced := i%2 == 0; fenced != errors.Is(err, ErrFenced) || (!fenced && err != nil) {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if got := count(t, s, "SELECT COUNT(*) FROM events WHERE message = 'batch'"); got != n/2 {
		t.Fatalf("%d events committed, want %d", got, n/2)
	}
}
