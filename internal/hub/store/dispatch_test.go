package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// TestMigrateFromVersion1 builds a database at schema version 1 with rows
// in it, as an earlier build left it, and opens it with this build: every
// later migration applies and the rows keep their values.
func TestMigrateFromVersion1(t *testing.T) {
	ctx := context.Background()
	s := openFromVersion(t, 1,
		`INSERT INTO nodes (node_id, registered_at, capabilities) VALUES ('n1', 1000, '["stream_control"]')`,
		`INSERT INTO observed_streams (node_id, stream_id, state, generation, updated_at) VALUES ('n1', 's1', 'running', 3, 1000)`,
		`INSERT INTO resources (node_id, resource_kind, resource_id, state, generation, updated_at) VALUES ('n1', 'stream', 's1', 'running', 3, 1000)`,
	)
	n, err := s.GetNode(ctx, "n1")
	if err != nil || n.LeaseTTL != 15*time.Second || n.Capabilities[0] != "stream_control" || n.Metrics != nil {
		t.Fatalf("node after migration %+v, %v", n, err)
	}
	rs, err := s.GetResourceState(ctx, "n1", KindStream, "s1")
	if err != nil || rs.Generation != 3 || rs.Observed == nil || rs.Observed.Generation != 3 || !rs.Observed.LastErrorAt.IsZero() {
		t.Fatalf("resource after migration %+v, %v", rs, err)
	}
}

func TestStartAttemptsSkipsNonPending(t *testing.T) { backends(t, testStartAttemptsSkipsNonPending) }

func testStartAttemptsSkipsNonPending(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	for _, id := range []string{"i1", "i2"} {
		if _, err := s.WriteDesired(ctx, dw(id, "n1", "s-"+id, t0)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CancelIntent(ctx, Cancellation{IntentID: "i2", Now: t0}); err != nil {
		t.Fatal(err)
	}
	skipped, err := s.StartAttempts(ctx, []AttemptStart{
		{IntentID: "i1", AttemptID: "a1", Now: t0, ExpiresAt: t0.Add(time.Minute)},
		{IntentID: "i2", AttemptID: "a2", Now: t0, ExpiresAt: t0.Add(time.Minute)},
	})
	if err != nil || len(skipped) != 1 || skipped[0] != 1 {
		t.Fatalf("StartAttempts = %v, %v; want [1] skipped", skipped, err)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM attempts"); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
	if i, _ := s.GetIntent(ctx, "i1"); i.State != wire.OpDispatched || i.AttemptID != "a1" {
		t.Fatalf("i1 %+v", i)
	}
	if _, err := s.StartAttempts(ctx, []AttemptStart{{IntentID: "nope", AttemptID: "a3", Now: t0}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown intent: %v", err)
	}
	cmds, err := s.ActiveCommands(ctx)
	if err != nil || len(cmds) != 1 || cmds[0].Attempt.ID != "a1" || cmds[0].Intent.ID != "i1" {
		t.Fatalf("ActiveCommands %+v, %v", cmds, err)
	}
}

func TestOutboxForAndStats(t *testing.T) { backends(t, testOutboxForAndStats) }

func testOutboxForAndStats(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	w := dw("i1", "n1", "s1", t0)
	if _, err := s.WriteDesired(ctx, w); err != nil {
		t.Fatal(err)
	}
	w2 := dw("i2", "n2", "s1", t0)
	w2.ExpiresAt = t0.Add(time.Minute)
	if _, err := s.WriteDesired(ctx, w2); err != nil {
		t.Fatal(err)
	}
	ids := func(es []OutboxEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.IntentID)
		}
		return out
	}
	tests := []struct {
		nodes []string
		now   time.Time
		want  []string
	}{
		{[]string{"n1"}, t0, []string{"i1"}},
		{nil, t0, nil},
		{nil, t0.Add(time.Minute), []string{"i2"}}, // expired, whatever its node
		{[]string{"n1", "n2"}, t0, []string{"i1", "i2"}},
	}
	for _, tc := range tests {
		got, err := s.OutboxFor(ctx, tc.nodes, tc.now, 10)
		if err != nil || len(got) != len(tc.want) || (len(got) > 0 && ids(got)[0] != tc.want[0]) {
			t.Errorf("OutboxFor(%v, %v) = %v, %v; want %v", tc.nodes, tc.now, ids(got), err, tc.want)
		}
	}
	st, err := s.OperationStats(ctx)
	if err != nil || st.ByState["pending"] != 2 || st.OutboxDepth != 2 || !st.OldestPendingAt.Equal(t0) {
		t.Fatalf("OperationStats %+v, %v", st, err)
	}
	if err := s.Probe(ctx, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.Probe(ctx, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM probe"); n != 1 {
		t.Fatalf("probe rows %d", n)
	}
	all, err := s.ResourceStates(ctx, "")
	if err != nil || len(all) != 2 || all[0].Latest == nil || all[0].Latest.ID != "i1" || all[0].Observed != nil {
		t.Fatalf("ResourceStates %+v, %v", all, err)
	}
	if _, err := s.GetResourceState(ctx, "n9", KindStream, "s1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown resource: %v", err)
	}
}

// TestManyReadTransactionsOnAColdCache runs more read transactions at once
// than the read pool has connections, each preparing statements it runs for
// the first time (a fresh store: an empty statement cache): none may wait
// forever for a connection.
func TestManyReadTransactionsOnAColdCache(t *testing.T) {
	backends(t, testManyReadTransactionsOnAColdCache)
}

func testManyReadTransactionsOnAColdCache(t *testing.T) {
	rounds := 20
	if onPostgres(t) {
		rounds = 5 // the pool is database/sql's on both; a PostgreSQL database per round costs 0.3 s
	}
	for round := range rounds {
		// A deadline per round: a pool deadlock never ends, while a loaded
		// machine (-race, other packages' tests) only makes a round slow.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s, _ := openTest(t)
		if _, err := s.WriteDesired(ctx, dw("i1", "n1", "s1", t0)); err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		errs := make(chan error, 16)
		for range 16 {
			go func() {
				<-start
				_, err := s.ResourceStates(ctx, "")
				errs <- err
			}()
		}
		close(start)
		for range 16 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v (a pool deadlock ends with the context's deadline)", round, err)
			}
		}
		_ = s.Close()
	}
}

// TestCancelledReadIsNotAStorageFailure: a read whose caller went away
// answers the context's error, not ErrStorage (which turns readiness off).
func TestCancelledReadIsNotAStorageFailure(t *testing.T) {
	backends(t, testCancelledReadIsNotAStorageFailure)
}

func testCancelledReadIsNotAStorageFailure(t *testing.T) {
	s, _ := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.ResourceStates(ctx, "")
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrStorage) {
		t.Fatalf("cancelled read: %v", err)
	}
}
