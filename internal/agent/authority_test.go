package agent_test

import (
	"testing"

	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/wire"
)

// TestNodeShowsHubGeneration: on a Hub-managed node the Node API shows one
// generation per stream, the Hub's, and says whose write its desired view
// is: a Hub command gives the stream the Hub's generation under authority
// hub (in the view, the observed generation and the operation record), a
// Node API write is the node's (authority node), and after a process
// restart the Agent's recorded desires bring the Hub's generations back.
func TestNodeShowsHubGeneration(t *testing.T) {
	dir := t.TempDir()
	hub := newTestHub(t, testNodeToken)
	tn := startNode(t, nodeOptions{stateDir: dir, hubURLs: []string{hub.URL}, streams: []string{"a", "b"}})
	hub.waitStream(t, "a", "running", func(s wire.ReportStream) bool { return s.State == "running" })
	if s := tn.stream(t, "a"); s.Authority != node.AuthorityNode || s.Desired.Generation != 1 {
		t.Fatalf("before any Hub command: authority %q, desired %+v", s.Authority, s.Desired)
	}
	hub.enqueue(wire.Command{CommandID: "cmd-stop-a", AttemptID: "att-1", Operation: wire.CommandStreamDesiredState, NodeID: testNodeID, ResourceID: "a", Generation: 5, Payload: wire.CommandPayload{State: "stopped"}},
		wire.Command{CommandID: "cmd-restart-b", AttemptID: "att-1", Operation: wire.CommandStreamRestart, NodeID: testNodeID, ResourceID: "b", Generation: 9, ActionID: "act-b"})
	hub.waitFinal(t, "cmd-stop-a", "att-1")
	hub.waitFinal(t, "cmd-restart-b", "att-1")
	check := func(tn *testNode, id, state, authority string, gen int64) {
		t.Helper()
		eventually(t, id+" in sync", func() bool { return tn.stream(t, id).Convergence == wire.ConvergenceInSync })
		s := tn.stream(t, id)
		if s.Authority != authority || s.Desired.Generation != gen || s.Observed.Generation != gen || s.Desired.State != state || s.Observed.State != state {
			t.Errorf("%s: authority %q, desired %+v, observed %s at %d; want %s at generation %d under %s",
				id, s.Authority, s.Desired, s.Observed.State, s.Observed.Generation, state, gen, authority)
		}
	}
	check(tn, "a", "stopped", node.AuthorityHub, 5)
	check(tn, "b", "running", node.AuthorityHub, 9)
	if op := tn.stream(t, "a").LatestOperation; op == nil || op.Generation != 5 || op.Actor != "hub" {
		t.Errorf("a's latest operation %+v, want the Hub's generation 5", op)
	}

	// A Node API write is the node's: one more than the generation shown.
	rec, _, err := tn.n.StreamAction("a", node.OpStart, nodeRequest("operator"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tn.n.WaitOperation(t.Context(), rec.OperationID); err != nil {
		t.Fatal(err)
	}
	check(tn, "a", "running", node.AuthorityNode, 6)
	tn.stop()

	// A new process over the same state directory, no Hub reachable: the
	// Hub's desires come back with their generations, a's by re-applying
	// the Hub's stop, b's as it is.
	offline := startNode(t, nodeOptions{stateDir: dir, hubURLs: []string{deadURL(t)}, streams: []string{"a", "b"}})
	check(offline, "a", "stopped", node.AuthorityHub, 5)
	check(offline, "b", "running", node.AuthorityHub, 9)
	if s := offline.stream(t, "b"); s.Desired.ActionID != "act-b" {
		t.Errorf("b's desired action id %q, want the Hub's act-b", s.Desired.ActionID)
	}
	offline.stop()
}
