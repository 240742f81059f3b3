package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
	"github.com/google/go-cmp/cmp"
)

func TestCancel(t *testing.T) { backends(t, testCancel) }

func testCancel(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	for _, id := range []string{"a", "b"} {
		if _, err := s.WriteDesired(ctx, dw(id, "n1", "s-"+id, t0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.StartAttempt(ctx, AttemptStart{IntentID: "b", AttemptID: "att-b", Now: t0, ExpiresAt: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id   string
		want error
	}{
		{"a", nil},
		{"a", ErrNotCancellable}, // already cancelled
		{"b", ErrNotCancellable}, // dispatched
		{"zz", ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			i, err := s.CancelIntent(ctx, Cancellation{IntentID: tc.id, Actor: "op", CorrelationID: "c", Now: t0.Add(time.Second)})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err == nil && (i.State != wire.OpCancelled || !i.FinishedAt.Equal(t0.Add(time.Second))) {
				t.Errorf("intent after cancel %+v", i)
			}
		})
	}
	if out, _ := s.PendingOutbox(ctx, 10); len(out) != 0 {
		t.Errorf("cancelled intent still in outbox: %+v", out)
	}
	ev, _ := s.ListEvents(ctx, EventFilter{Kind: wire.EventOperationCancelled}, Paging{1, 10})
	au, _ := s.ListAudit(ctx, AuditFilter{ResourceID: "s-a", Action: "operation_cancel"}, Paging{1, 10})
	if ev.Total != 1 || au.Total != 1 {
		t.Errorf("cancel events %d, audit %d; want 1, 1", ev.Total, au.Total)
	}
	if b, _ := s.GetIntent(ctx, "b"); b.State != wire.OpDispatched || b.AttemptID != "att-b" {
		t.Errorf("dispatched intent changed: %+v", b)
	}
}

func TestAttempts(t *testing.T) { backends(t, testAttempts) }

func testAttempts(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	w := dw("i1", "n1", "s1", t0)
	w.ExpiresAt = t0.Add(10 * time.Minute)
	if _, err := s.WriteDesired(ctx, w); err != nil {
		t.Fatal(err)
	}
	start := func(att string, at time.Time) error {
		return s.StartAttempt(ctx, AttemptStart{IntentID: "i1", AttemptID: att, NodeID: "n1", Now: at, ExpiresAt: at.Add(time.Minute)})
	}
	if err := start("a1", t0); err != nil {
		t.Fatal(err)
	}
	if err := start("a1b", t0); !errors.Is(err, ErrNotPending) {
		t.Errorf("second start while dispatched: %v", err)
	}
	if out, _ := s.PendingOutbox(ctx, 10); len(out) != 0 {
		t.Errorf("outbox after dispatch: %+v", out)
	}
	act, _ := s.ActiveAttempts(ctx)
	if len(act) != 1 || act[0].ID != "a1" || act[0].State != wire.OpDispatched {
		t.Errorf("active %+v", act)
	}
	// Ack, then time out: a retry is queued.
	if err := s.FinishAttempt(ctx, AttemptFinish{AttemptID: "a1", State: wire.OpAcknowledged, Now: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if i, _ := s.GetIntent(ctx, "i1"); i.State != wire.OpAcknowledged {
		t.Errorf("after ack intent %s", i.State)
	}
	if err := s.FinishAttempt(ctx, AttemptFinish{AttemptID: "a1", State: wire.OpTimedOut, Now: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishAttempt(ctx, AttemptFinish{AttemptID: "a1", State: wire.OpSucceeded, Now: t0.Add(time.Minute)}); !errors.Is(err, ErrAttemptFinished) {
		t.Errorf("finish twice: %v", err)
	}
	i, _ := s.GetIntent(ctx, "i1")
	out, _ := s.PendingOutbox(ctx, 10)
	if i.State != wire.OpPending || i.RetryCount != 1 || len(out) != 1 || out[0].Attempts != 1 || !out[0].LastFinishedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after timeout: intent %+v, outbox %+v", i, out)
	}
	// Second attempt succeeds with a result.
	if err := start("a2", t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	res := json.RawMessage(`{"valid":true}`)
	if err := s.FinishAttempt(ctx, AttemptFinish{AttemptID: "a2", State: wire.OpSucceeded, Result: res, Now: t0.Add(3 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	i, _ = s.GetIntent(ctx, "i1")
	if i.State != wire.OpSucceeded || string(i.Result) != string(res) || i.AttemptID != "a2" {
		t.Errorf("after success %+v", i)
	}
	if act, _ := s.ActiveAttempts(ctx); len(act) != 0 {
		t.Errorf("active after success: %+v", act)
	}
	kinds := []string{}
	ev, _ := s.ListEvents(ctx, EventFilter{OperationID: "i1"}, Paging{1, 100})
	for _, e := range ev.Items {
		kinds = append([]string{e.Kind}, kinds...)
	}
	want := []string{"intent_accepted", "command_dispatched", "command_acknowledged", "command_timed_out", "command_dispatched", "command_succeeded"}
	if d := cmp.Diff(want, kinds); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	if err := s.FinishAttempt(ctx, AttemptFinish{AttemptID: "nope", State: wire.OpFailed, Now: t0}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown attempt: %v", err)
	}
	if err := s.FinishAttempt(ctx, AttemptFinish{AttemptID: "a2", State: "bogus", Now: t0}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad state: %v", err)
	}
}

func TestTimeoutAfterExpiryFails(t *testing.T) { backends(t, testTimeoutAfterExpiryFails) }

func testTimeoutAfterExpiryFails(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	w := dw("i1", "n1", "s1", t0)
	w.ExpiresAt = t0.Add(time.Minute)
	_, _ = s.WriteDesired(ctx, w)
	_ = s.StartAttempt(ctx, AttemptStart{IntentID: "i1", AttemptID: "a1", Now: t0, ExpiresAt: t0.Add(2 * time.Minute)})
	if err := s.FinishAttempt(ctx, AttemptFinish{AttemptID: "a1", State: wire.OpTimedOut, Now: t0.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	i, _ := s.GetIntent(ctx, "i1")
	if i.State != wire.OpFailed || i.Failure == nil || i.Failure.Code != CodeExpired {
		t.Errorf("intent %+v, want failed expired", i)
	}
	if out, _ := s.PendingOutbox(ctx, 10); len(out) != 0 {
		t.Errorf("expired intent in outbox %+v", out)
	}
	au, _ := s.ListAudit(ctx, AuditFilter{ResourceID: "s1"}, Paging{1, 10})
	if au.Total != 2 || au.Items[0].Outcome != OutcomeRejected || au.Items[0].FailureCode != CodeExpired {
		t.Errorf("audit %+v", au.Items)
	}
	// FailIntent for a pending one.
	_, _ = s.WriteDesired(ctx, dw("i2", "n1", "s2", t0))
	if err := s.FailIntent(ctx, "i2", "incompatible_capability", "needs network_shuffle", t0); err != nil {
		t.Fatal(err)
	}
	if err := s.FailIntent(ctx, "i2", CodeExpired, "", t0); !errors.Is(err, ErrNotPending) {
		t.Errorf("FailIntent twice: %v", err)
	}
}

func TestListIntents(t *testing.T) { backends(t, testListIntents) }

func testListIntents(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	for i := range 7 {
		w := dw(fmt.Sprint("i", i), fmt.Sprint("n", i%2), fmt.Sprint("s", i), t0)
		w.CorrelationID = "c"
		if _, err := s.WriteDesired(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(pg wire.Page[Intent]) []string {
		var out []string
		for _, i := range pg.Items {
			out = append(out, i.ID)
		}
		return out
	}
	tests := []struct {
		name  string
		f     IntentFilter
		p     Paging
		want  []string
		total int
	}{
		{"page 1", IntentFilter{}, Paging{1, 3}, []string{"i6", "i5", "i4"}, 7},
		{"page 3", IntentFilter{}, Paging{3, 3}, []string{"i0"}, 7},
		{"node", IntentFilter{NodeID: "n1"}, Paging{1, 10}, []string{"i5", "i3", "i1"}, 3},
		{"resource+state", IntentFilter{ResourceID: "s2", State: "pending"}, Paging{1, 10}, []string{"i2"}, 1},
		{"correlation", IntentFilter{CorrelationID: "nope"}, Paging{1, 10}, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pg, err := s.ListIntents(ctx, tc.f, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, ids(pg)); d != "" || pg.Total != tc.total {
				t.Errorf("total %d (want %d); ids (-want +got):\n%s", pg.Total, tc.total, d)
			}
		})
	}
	for _, bad := range []Paging{{0, 10}, {1, 0}, {1, 101}} {
		if _, err := s.ListIntents(ctx, IntentFilter{}, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("paging %+v: %v", bad, err)
		}
	}
	op := func() wire.Operation { i, _ := s.GetIntent(ctx, "i3"); return i.Wire() }()
	if op.OperationID != "i3" || op.IntentID != "i3" || op.Generation != 1 || op.NodeID != "n1" {
		t.Errorf("wire op %+v", op)
	}
}
