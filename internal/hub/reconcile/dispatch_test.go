package reconcile

import (
	"errors"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
	"github.com/google/go-cmp/cmp"
)

var testLimits = Limits{QueueBound: 2, AttemptTTL: 30 * time.Second, BackoffInitial: time.Second, BackoffMax: 8 * time.Second}

func TestPlanDispatchRules(t *testing.T) {
	now := t0
	online := Node{Status: StatusOnline, Mode: wire.NodeModeActive}
	row := OutboxRow{IntentID: "i1", NodeID: "n1", CreatedAt: now.Add(-time.Minute)}
	with := func(f func(*OutboxRow)) OutboxRow { r := row; f(&r); return r }
	tests := []struct {
		name string
		row  OutboxRow
		node *Node
		want Decision
	}{
		{"dispatch", row, &online,
			Decision{IntentID: "i1", NodeID: "n1", Action: ActionDispatch, AttemptExpiresAt: now.Add(30 * time.Second)}},
		{"attempt expiry capped by intent expiry", with(func(r *OutboxRow) { r.ExpiresAt = now.Add(5 * time.Second) }), &online,
			Decision{IntentID: "i1", NodeID: "n1", Action: ActionDispatch, AttemptExpiresAt: now.Add(5 * time.Second)}},
		{"expired", with(func(r *OutboxRow) { r.ExpiresAt = now }), &online,
			Decision{IntentID: "i1", NodeID: "n1", Action: ActionFail, Reason: CodeExpired, Code: CodeExpired}},
		{"offline past expiry", with(func(r *OutboxRow) { r.ExpiresAt = now.Add(-time.Second) }), &Node{Status: StatusUnavailable, Mode: wire.NodeModeActive},
			Decision{IntentID: "i1", NodeID: "n1", Action: ActionFail, Reason: CodeNodeUnavailable, Code: CodeNodeUnavailable}},
		{"unknown node past expiry", with(func(r *OutboxRow) { r.ExpiresAt = now.Add(-time.Second) }), nil,
			Decision{IntentID: "i1", NodeID: "n1", Action: ActionFail, Reason: CodeNodeUnavailable, Code: CodeNodeUnavailable}},
		{"draining past expiry", with(func(r *OutboxRow) { r.ExpiresAt = now.Add(-time.Second) }), &Node{Status: StatusOnline, Mode: wire.NodeModeDraining},
			Decision{IntentID: "i1", NodeID: "n1", Action: ActionFail, Reason: CodeExpired, Code: CodeExpired}},
		{"offline waits", row, &Node{Status: StatusUnavailable, Mode: wire.NodeModeActive},
			Decision{IntentID: "i1", NodeID: "n1", Action: ActionWait, Reason: WaitNodeOffline}},
		{"offline waits until expiry", with(func(r *OutboxRow) { r.ExpiresAt = now.Add(time.Hour) }), &Node{Status: StatusUnavailable, Mode: wire.NodeModeActive},
			Decision{IntentID: "i1", NodeID: "n1", Action: ActionWait, Reason: WaitNodeOffline, NextAt: now.Add(time.Hour)}},
		{"never seen waits", row, nil,
			Decision{IntentID: "i1", NodeID: "n1", Action: ActionWait, Reason: WaitNodeOffline}},
		{"incompatible", with(func(r *OutboxRow) { r.RequiredCapabilities = []string{"network_shuffle"} }), &online,
			Decision{IntentID: "i1", NodeID: "n1", Action: ActionFail, Reason: CodeIncompatibleCapability, Code: CodeIncompatibleCapability}},
		{"compatible", with(func(r *OutboxRow) { r.RequiredCapabilities = []string{"network_shuffle"} }), &Node{Status: StatusOnline, Mode: wire.NodeModeActive, Capabilities: []string{"x", "network_shuffle"}},
			Decision{IntentID: "i1", NodeID: "n1", Action: ActionDispatch, AttemptExpiresAt: now.Add(30 * time.Second)}},
		{"offline, capability not judged", with(func(r *OutboxRow) { r.RequiredCapabilities = []string{"network_shuffle"} }), &Node{Status: StatusUnavailable, Mode: wire.NodeModeActive},
			Decision{IntentID: "i1", NodeID: "n1", Action: ActionWait, Reason: WaitNodeOffline}},
		{"draining", row, &Node{Status: StatusOnline, Mode: wire.NodeModeDraining},
			Decision{IntentID: "i1", NodeID: "n1", Action: ActionWait, Reason: WaitDraining}},
		{"maintenance", row, &Node{Status: StatusOnline, Mode: wire.NodeModeMaintenance},
			Decision{IntentID: "i1", NodeID: "n1", Action: ActionWait, Reason: WaitMaintenance}},
		{"backoff", with(func(r *OutboxRow) { r.Attempts = 2; r.LastFinishedAt = now.Add(-time.Second) }), &online,
			Decision{IntentID: "i1", NodeID: "n1", Action: ActionWait, Reason: WaitBackoff, NextAt: now.Add(time.Second)}},
		{"backoff ends at expiry", with(func(r *OutboxRow) {
			r.Attempts = 2
			r.LastFinishedAt = now.Add(-time.Second)
			r.ExpiresAt = now.Add(500 * time.Millisecond)
		}), &online,
			Decision{IntentID: "i1", NodeID: "n1", Action: ActionWait, Reason: WaitBackoff, NextAt: now.Add(500 * time.Millisecond)}},
		{"backoff elapsed", with(func(r *OutboxRow) { r.Attempts = 2; r.LastFinishedAt = now.Add(-2 * time.Second) }), &online,
			Decision{IntentID: "i1", NodeID: "n1", Action: ActionDispatch, AttemptExpiresAt: now.Add(30 * time.Second)}},
		{"capacity", row, &Node{Status: StatusOnline, Mode: wire.NodeModeActive, Active: 2},
			Decision{IntentID: "i1", NodeID: "n1", Action: ActionWait, Reason: WaitCapacity, Code: CodeCapacity}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := map[string]Node{}
			if tt.node != nil {
				nodes["n1"] = *tt.node
			}
			got := PlanDispatch(DispatchInput{Rows: []OutboxRow{tt.row}, Nodes: nodes, Limits: testLimits, Now: now})
			if diff := cmp.Diff(DispatchPlan{Decisions: []Decision{tt.want}}, got); diff != "" {
				t.Errorf("PlanDispatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanDispatchBatch checks that one pass decides every ready row, that
// the queue bound is shared oldest first (ties by intent id, not by row
// order), and that decisions come back in row order.
func TestPlanDispatchBatch(t *testing.T) {
	now := t0
	rows := []OutboxRow{
		{IntentID: "c", NodeID: "n1", CreatedAt: now.Add(-3 * time.Second)},
		{IntentID: "a", NodeID: "n1", CreatedAt: now.Add(-3 * time.Second)},
		{IntentID: "x", NodeID: "n2", CreatedAt: now.Add(-1 * time.Second)},
		{IntentID: "b", NodeID: "n1", CreatedAt: now.Add(-3 * time.Second)},
		{IntentID: "y", NodeID: "n2", CreatedAt: now.Add(-1 * time.Second)},
		{IntentID: "0", NodeID: "n1", CreatedAt: now.Add(-1 * time.Second)},
	}
	nodes := map[string]Node{
		"n1": {Status: StatusOnline, Mode: wire.NodeModeActive, Active: 0},
		"n2": {Status: StatusOnline, Mode: wire.NodeModeActive, Active: 1},
	}
	got := PlanDispatch(DispatchInput{Rows: rows, Nodes: nodes, Limits: testLimits, Now: now})
	var actions []string
	for _, d := range got.Decisions {
		actions = append(actions, d.IntentID+":"+d.Action)
	}
	want := []string{"c:wait", "a:dispatch", "x:dispatch", "b:dispatch", "y:wait", "0:wait"}
	if diff := cmp.Diff(want, actions); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
	if n := len(got.Dispatched()); n != 3 {
		t.Errorf("Dispatched() = %d decisions, want 3", n)
	}
}

func TestPlanDispatchUnboundedQueue(t *testing.T) {
	rows := make([]OutboxRow, 10)
	for i := range rows {
		rows[i] = OutboxRow{IntentID: string(rune('a' + i)), NodeID: "n1", CreatedAt: t0}
	}
	l := testLimits
	l.QueueBound = 0
	got := PlanDispatch(DispatchInput{Rows: rows, Nodes: map[string]Node{"n1": {Status: StatusOnline, Mode: wire.NodeModeActive, Active: 100}}, Limits: l, Now: t0})
	if n := len(got.Dispatched()); n != 10 {
		t.Errorf("dispatched %d of 10 rows with an unbounded queue", n)
	}
}

func TestExpireAttempts(t *testing.T) {
	active := []Attempt{
		{AttemptID: "a1", IntentID: "i1", NodeID: "n1", State: wire.OpDispatched, ExpiresAt: t0.Add(-time.Second)},
		{AttemptID: "a2", IntentID: "i2", NodeID: "n1", State: wire.OpAcknowledged, ExpiresAt: t0},
		{AttemptID: "a3", IntentID: "i3", NodeID: "n1", State: wire.OpDispatched, ExpiresAt: t0.Add(time.Millisecond)},
		{AttemptID: "a4", IntentID: "i4", NodeID: "n2", State: wire.OpSucceeded, ExpiresAt: t0.Add(-time.Hour)},
		{AttemptID: "a5", IntentID: "i5", NodeID: "n2", State: wire.OpDispatched},
	}
	want := []Expired{
		{AttemptID: "a1", IntentID: "i1", NodeID: "n1", From: wire.OpDispatched, State: wire.OpTimedOut},
		{AttemptID: "a2", IntentID: "i2", NodeID: "n1", From: wire.OpAcknowledged, State: wire.OpTimedOut},
	}
	if diff := cmp.Diff(want, ExpireAttempts(active, t0)); diff != "" {
		t.Errorf("ExpireAttempts (-want +got):\n%s", diff)
	}
}

func TestBackoff(t *testing.T) {
	const s = time.Second
	tests := []struct {
		attempt                int
		initial, ceiling, want time.Duration
	}{
		{0, s, 8 * s, 0},
		{-1, s, 8 * s, 0},
		{1, s, 8 * s, s},
		{2, s, 8 * s, 2 * s},
		{3, s, 8 * s, 4 * s},
		{4, s, 8 * s, 8 * s},
		{5, s, 8 * s, 8 * s},
		{1 << 30, s, 8 * s, 8 * s},
		{3, 3 * s, 10 * s, 10 * s},
		{2, s, 0, s},
		{2, 0, 8 * s, 0},
		{100, time.Duration(1) << 62, time.Duration(1<<63 - 1), time.Duration(1<<63 - 1)},
	}
	for _, tt := range tests {
		if got := Backoff(tt.attempt, tt.initial, tt.ceiling); got != tt.want {
			t.Errorf("Backoff(%d, %s, %s) = %s, want %s", tt.attempt, tt.initial, tt.ceiling, got, tt.want)
		}
	}
}

func TestLimitsValidate(t *testing.T) {
	if err := DefaultLimits().Validate(); err != nil {
		t.Fatalf("DefaultLimits().Validate() = %v", err)
	}
	bad := []Limits{
		{QueueBound: -1, AttemptTTL: time.Second, BackoffInitial: 1, BackoffMax: 2},
		{QueueBound: 1, AttemptTTL: 0, BackoffInitial: 1, BackoffMax: 2},
		{QueueBound: 1, AttemptTTL: time.Second, BackoffInitial: 3, BackoffMax: 2},
		{QueueBound: 1, AttemptTTL: time.Second, BackoffInitial: -1, BackoffMax: 2},
	}
	for _, l := range bad {
		if err := l.Validate(); !errors.Is(err, ErrInvalidLimits) {
			t.Errorf("%+v.Validate() = %v, want ErrInvalidLimits", l, err)
		}
	}
}
