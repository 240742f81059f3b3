package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

func TestUnmanageStream(t *testing.T) { backends(t, testUnmanageStream) }

func testUnmanageStream(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	for i, id := range []string{"i1", "i2"} {
		if _, err := s.WriteDesired(ctx, dw(id, "typo-node", "s1", t0.Add(time.Duration(i)*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	at := t0.Add(time.Minute)
	u := Unmanage{NodeID: "typo-node", StreamID: "s1", Actor: "alice", ActorKind: "token", CorrelationID: "c1", Now: at}

	stale := u
	stale.IfMatch = p(1)
	var conflict *GenerationConflictError
	if _, err := s.UnmanageStream(ctx, stale); !errors.As(err, &conflict) || conflict.Current != 2 {
		t.Fatalf("stale If-Match: %v", err)
	}
	cur := u
	cur.IfMatch = p(2)
	res, err := s.UnmanageStream(ctx, cur)
	if err != nil || res.Generation != 2 || res.Superseded != 1 {
		t.Fatalf("UnmanageStream = %+v, %v", res, err)
	}
	if _, err := s.GetResource(ctx, "typo-node", KindStream, "s1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the desired state stays: %v", err)
	}
	if i2, _ := s.GetIntent(ctx, "i2"); i2.State != wire.OpSuperseded {
		t.Fatalf("the pending intent is %s, want superseded", i2.State)
	}
	if out, err := s.PendingOutbox(ctx, 10); err != nil || len(out) != 0 {
		t.Fatalf("PendingOutbox = %+v, %v; want none", out, err)
	}
	held, err := s.NodesHoldingState(ctx)
	if err != nil || held["typo-node"] {
		t.Fatalf("NodesHoldingState = %v, %v: the node still holds state", held, err)
	}
	audit, err := s.ListAudit(ctx, AuditFilter{Action: ActionStreamUnmanage}, Paging{Page: 1, PageSize: 10})
	if err != nil || audit.Total != 1 || audit.Items[0].Actor != "alice" || audit.Items[0].NodeID != "typo-node" || audit.Items[0].ResourceID != "s1" {
		t.Fatalf("audit = %+v, %v", audit, err)
	}
	ev, err := s.ListEvents(ctx, EventFilter{Kind: wire.EventConvergenceChanged}, Paging{1, 10})
	if err != nil || ev.Total != 1 || ev.Items[0].Data["convergence"] != wire.ConvergenceUnknown || ev.Items[0].Data["reason"] != ReasonNotManaged {
		t.Fatalf("events = %+v, %v", ev, err)
	}
	if _, err := s.UnmanageStream(ctx, u); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a second delete: %v, want ErrNotFound", err)
	}
	// Managed again, it starts over.
	if r, err := s.WriteDesired(ctx, dw("i3", "typo-node", "s1", at.Add(time.Second))); err != nil || r.Generation != 1 {
		t.Fatalf("written again: %+v, %v", r, err)
	}
}
