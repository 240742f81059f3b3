package node_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/wire"
)

// TestWaitOperation: an operation run for the Hub carries its actor,
// correlation and action id, and WaitOperation returns it finished.
func TestWaitOperation(t *testing.T) {
	h := newHarness(t, doc(hcLocal, genStream("a", "a")))
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	rec, _, err := h.n.StreamAction("a", node.OpRestart, node.Request{Actor: "hub", CorrelationID: "cmd-1", ActionID: "act-1"})
	if err != nil {
		t.Fatal(err)
	}
	done, err := h.n.WaitOperation(ctx, rec.OperationID)
	if err != nil {
		t.Fatal(err)
	}
	if done.State != wire.OpSucceeded || done.Actor != "hub" || done.CorrelationID != "cmd-1" {
		t.Errorf("finished record %+v", done)
	}
	if s := h.stream(t, "a"); s.Desired.ActionID != "act-1" || s.Observed.ActionID != "act-1" {
		t.Errorf("action ids desired %q observed %q, want act-1", s.Desired.ActionID, s.Observed.ActionID)
	}
	if _, err := h.n.WaitOperation(ctx, "nope"); !errors.Is(err, node.ErrOperationNotFound) {
		t.Errorf("unknown operation: err = %v", err)
	}
}

// TestSystemShowsAgent: GET /system carries the agent object only when the
// hook is set.
func TestSystemShowsAgent(t *testing.T) {
	plain := newHarness(t, doc(hcLocal, genStream("a", "a")))
	if r := plain.expect(t, 200, "GET", "/system", ""); strings.Contains(string(r.Body), `"agent"`) {
		t.Errorf("standalone /system shows an agent: %s", r.Body)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	managed := newHarness(t, doc(hcLocal, genStream("a", "a")), harnessOptions{agent: func() node.AgentStatus {
		return node.AgentStatus{HubURL: "http://127.0.0.1:1", Connected: true, SessionExpiresAt: wire.At(at)}
	}})
	sys := decode[node.System](t, managed.expect(t, 200, "GET", "/system", ""))
	if sys.Agent == nil || sys.Agent.HubURL != "http://127.0.0.1:1" || !sys.Agent.Connected || !sys.Agent.SessionExpiresAt.Equal(at) {
		t.Errorf("/system agent = %+v", sys.Agent)
	}
}
