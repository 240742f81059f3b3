package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

func TestSweepAge(t *testing.T) { backends(t, testSweepAge) }

func testSweepAge(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	// old-done: succeeded; old-pending: pending; old-active: dispatched.
	for _, id := range []string{"old-done", "old-pending", "old-active"} {
		if _, err := s.WriteDesired(ctx, dw(id, "n1", id, t0)); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.StartAttempt(ctx, AttemptStart{IntentID: "old-done", AttemptID: "a-done", Now: t0})
	_ = s.FinishAttempt(ctx, AttemptFinish{AttemptID: "a-done", State: wire.OpSucceeded, Now: t0})
	_ = s.StartAttempt(ctx, AttemptStart{IntentID: "old-active", AttemptID: "a-active", Now: t0})
	_, _ = s.BeginIdempotent(ctx, keyOf("k"), "fp", t0)

	// Nothing is old yet.
	got, err := s.Sweep(ctx, t0.Add(23*time.Hour))
	if err != nil || got != (Swept{}) {
		t.Fatalf("early sweep = %+v, %v", got, err)
	}
	got, err = s.Sweep(ctx, t0.Add(25*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := Swept{Intents: 1, Outbox: 2, Attempts: 1, Idempotency: 1}
	if got != want {
		t.Errorf("sweep = %+v, want %+v", got, want)
	}
	for _, id := range []string{"old-pending", "old-active"} {
		if _, err := s.GetIntent(ctx, id); err != nil {
			t.Errorf("%s reclaimed: %v", id, err)
		}
	}
	if out, _ := s.PendingOutbox(ctx, 10); len(out) != 1 || out[0].IntentID != "old-pending" {
		t.Errorf("unprocessed outbox %+v", out)
	}
	if act, _ := s.ActiveAttempts(ctx); len(act) != 1 {
		t.Errorf("active attempts %+v", act)
	}
	// Audit: 30 days.
	got, _ = s.Sweep(ctx, t0.Add(31*24*time.Hour))
	if got.Audit != 3 {
		t.Errorf("audit swept %d, want 3", got.Audit)
	}
	if _, err := s.GetIntent(ctx, "old-pending"); err != nil {
		t.Errorf("pending reclaimed after 31 days: %v", err)
	}
}

func TestSweepCounts(t *testing.T) { backends(t, testSweepCounts) }

func testSweepCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("writes ~5000 intents")
	}
	ctx := context.Background()
	s, _ := openTest(t)
	const n = MaxTerminalRows + 100
	// Write n cancelled intents and 10 pending ones, all at t0, in batches.
	err := s.write(ctx, func(ctx context.Context, q querier) error {
		for i := range n + 10 {
			state := "cancelled"
			if i >= n {
				state = "pending"
			}
			if _, err := q.ExecContext(ctx, `INSERT INTO intents (id, operation, node_id, resource_kind, resource_id, generation, state, created_at, updated_at)
				VALUES (?, 'op', 'n', 'stream', ?, 1, ?, ?, ?)`, fmt.Sprint("i", i), fmt.Sprint("r", i), state, ms(t0), ms(t0)); err != nil {
				return err
			}
			proc := any(ms(t0))
			if i >= n {
				proc = nil
			}
			if _, err := q.ExecContext(ctx, `INSERT INTO outbox (intent_id, node_id, created_at, processed_at) VALUES (?, 'n', ?, ?)`,
				fmt.Sprint("i", i), ms(t0), proc); err != nil {
				return err
			}
			if _, err := insertEvent(ctx, q, event("k", t0, "", "", "", "", "", "", "", "")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	last, _ := s.LastEventID(ctx)
	got, err := s.Sweep(ctx, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := Swept{Intents: 100, Outbox: 100, Events: n + 10 - MaxEvents}
	if got != want {
		t.Errorf("sweep = %+v, want %+v", got, want)
	}
	if c := count(t, s, "SELECT COUNT(*) FROM intents WHERE state = 'pending'"); c != 10 {
		t.Errorf("pending intents %d, want 10", c)
	}
	if c := count(t, s, "SELECT COUNT(*) FROM outbox WHERE processed_at IS NULL"); c != 10 {
		t.Errorf("unprocessed outbox %d, want 10", c)
	}
	if _, err := s.GetIntent(ctx, "i99"); err == nil {
		t.Error("oldest terminal intent kept")
	}
	if _, err := s.GetIntent(ctx, "i100"); err != nil {
		t.Errorf("newest 4096 terminal intents not all kept: %v", err)
	}
	oldest, newest, _ := s.EventIDs(ctx)
	if newest != last || oldest != last-MaxEvents+1 {
		t.Errorf("event ids %d..%d, want %d..%d", oldest, newest, last-MaxEvents+1, last)
	}
	// Ids keep increasing after the sweep.
	id, _ := s.AppendEvent(ctx, event("k", t0, "", "", "", "", "", "", "", ""))
	if id != last+1 {
		t.Errorf("next event id %d, want %d", id, last+1)
	}
}

func TestSnapshot(t *testing.T) { backends(t, testSnapshot) }

func testSnapshot(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	_ = s.RegisterNode(ctx, reg("n1", "tok", t0))
	_ = s.SetNodeMode(ctx, ModeChange{NodeID: "n1", Mode: wire.NodeModeMaintenance, Now: t0})
	_, _ = s.WriteDesired(ctx, dw("i1", "n1", "s1", t0))
	_, _ = s.WriteDesired(ctx, dw("i2", "n2", "s2", t0))
	_ = s.StartAttempt(ctx, AttemptStart{IntentID: "i2", AttemptID: "a2", Now: t0, ExpiresAt: t0.Add(time.Minute)})
	last, _ := s.LastEventID(ctx)
	_ = s.Close()
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	snap, err := s2.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Nodes) != 1 || snap.Nodes[0].Mode != wire.NodeModeMaintenance || len(snap.Nodes[0].Capabilities) != 1 {
		t.Errorf("nodes %+v", snap.Nodes)
	}
	if len(snap.Resources) != 2 || snap.Resources[0].Generation != 1 {
		t.Errorf("resources %+v", snap.Resources)
	}
	if len(snap.PendingOutbox) != 1 || snap.PendingOutbox[0].IntentID != "i1" {
		t.Errorf("outbox %+v", snap.PendingOutbox)
	}
	if len(snap.ActiveAttempts) != 1 || snap.ActiveAttempts[0].ID != "a2" || !snap.ActiveAttempts[0].ExpiresAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("attempts %+v", snap.ActiveAttempts)
	}
	if snap.LastEventID != last || last == 0 {
		t.Errorf("last event id %d, want %d", snap.LastEventID, last)
	}
}
