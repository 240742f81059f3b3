package hub

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/pgtest"
	"github.com/flowplane/flowplane/internal/wire"
)

// twoHubs serves two Hubs on one new PostgreSQL database: the first leads,
// the second stands by.
func twoHubs(t *testing.T) (leader, standby *testHub) {
	t.Helper()
	return twoHubsWith(t, "")
}

// twoHubsWith is twoHubs with operatorToken as both Hubs' operator token
// (and its node token derived from it, as serve does).
func twoHubsWith(t *testing.T, operatorToken string) (leader, standby *testHub) {
	t.Helper()
	url := pgtest.Shared(t).NewDatabase(t, "")
	hub := func(id string) *testHub {
		return serveOptions(t, true, Options{
			Settings: Settings{Address: "127.0.0.1:0", Storage: url, OperatorToken: operatorToken, NodeToken: nodeTokenFor(operatorToken)},
			Logger:   slog.New(slog.DiscardHandler), Version: "test", HubID: id,
		})
	}
	leader = hub("hub-a")
	eventually(t, "hub-a leads", func() bool { return leader.ha(t).Role == roleLeader })
	standby = hub("hub-b")
	eventually(t, "hub-b sees hub-a lead", func() bool {
		ha := standby.ha(t)
		return ha.Role == roleStandby && ha.Leader != nil && ha.Leader.ID == "hub-a"
	})
	return leader, standby
}

func (a *testAgent) heartbeat(t *testing.T) {
	t.Helper()
	if r := a.call(t, "POST", "/heartbeat", wire.HeartbeatRequest{Capabilities: []string{wire.CapabilityStreamControl}}, a.session); r.status != http.StatusOK {
		t.Fatalf("heartbeat: %d %s", r.status, r.body)
	}
}

// sse subscribes to th's event stream of resource id until the test ends.
func sse(t *testing.T, th *testHub, resourceID string) *bufio.Scanner {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", th.base+APIPrefix+"/events/stream?resource_id="+resourceID, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Body.Close() })
	if res.StatusCode != 200 {
		t.Fatalf("SSE: %d", res.StatusCode)
	}
	return bufio.NewScanner(res.Body)
}

// waitEvent reads sc until an event of kind for operation op (any when "")
// comes, and fails when the stream ends first.
func waitEvent(t *testing.T, sc *bufio.Scanner, kind, op string) wire.Event {
	t.Helper()
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e wire.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		if e.Kind == kind && (op == "" || e.OperationID == op) {
			return e
		}
	}
	t.Fatalf("the event stream ended before %s of %s: %v", kind, op, sc.Err())
	return wire.Event{}
}

// TestHubsShareAgentTraffic: an Agent that calls only the standby gets the
// commands the leader dispatches for writes made on either Hub, at once
// through its long-poll; its acknowledgements, results and reports on the
// standby make the resource converge as both Hubs see it; an SSE
// subscriber on the standby sees the events the leader commits.
func TestHubsShareAgentTraffic(t *testing.T) {
	leader, standby := twoHubs(t)
	events := sse(t, standby, "s1")
	a := newTestAgent(standby, "n1")
	a.register(t, "", 15*time.Second)
	a.streams["s1"] = wire.ReportStream{ID: "s1", State: "stopped", ConfigVersion: "v1"}
	a.report(t)
	eventually(t, "the leader sees n1 online", func() bool {
		n, _ := leader.h.fleet.Node("n1")
		return n.Online && n.Observing
	})

	for i, on := range []*testHub{leader, standby} {
		state := []string{"running", "stopped"}[i]
		w := on.put(t, "n1", "s1", `{"state":"`+state+`","config_version":"v1"}`)
		// The leader dispatches; the standby's long-poll is woken with it.
		cmds := a.commands(t, 20*time.Second)
		if len(cmds) != 1 || cmds[0].CommandID != w.OperationID || cmds[0].Payload.State != state || cmds[0].Epoch != leader.h.lead.currentEpoch() {
			t.Fatalf("write %d on %s: commands %+v", i, []string{"the leader", "the standby"}[i], cmds)
		}
		if e := waitEvent(t, events, wire.EventCommandDispatched, w.OperationID); e.NodeID != "n1" {
			t.Fatalf("dispatched event %+v", e)
		}
		a.execute(t, cmds[0])
		for _, th := range []*testHub{leader, standby} {
			eventually(t, "in_sync on "+th.h.lead.id, func() bool {
				s := th.stream(t, "n1", "s1")
				return s.Convergence == wire.ConvergenceInSync && s.Desired.Generation == int64(i+1)
			})
		}
		e := waitEvent(t, events, wire.EventConvergenceChanged, "")
		for e.Data["convergence"] != wire.ConvergenceInSync {
			e = waitEvent(t, events, wire.EventConvergenceChanged, "")
		}
		if n := leader.h.fleet.InFlight(); n != 0 {
			eventually(t, "the leader learns the attempt finished", func() bool { return leader.h.fleet.InFlight() == 0 })
		}
	}
}

// TestStandbyHeartbeatsKeepLease: a node that heartbeats only on the
// standby stays online at the leader over several of its lease TTLs.
func TestStandbyHeartbeatsKeepLease(t *testing.T) {
	leader, standby := twoHubs(t)
	a := newTestAgent(standby, "n1")
	const lease = time.Second
	a.register(t, "", lease)
	eventually(t, "the leader sees n1 online", func() bool { return leader.h.fleet.Status("n1") == "online" })
	for range 20 { // about 4 TTLs, at 5 heartbeats a TTL
		time.Sleep(lease / 5)
		a.heartbeat(t)
		if s := leader.h.fleet.Status("n1"); s != "online" {
			t.Fatalf("the leader sees n1 %s while it heartbeats on the standby", s)
		}
	}
	evs := decode[wire.Page[wire.Event]](t, leader.do(t, "GET", APIPrefix+"/events?kind="+wire.EventNodeUnavailable+"&page_size=100", ""))
	if len(evs.Items) != 0 {
		t.Fatalf("node_unavailable while heartbeating: %+v", evs.Items)
	}
	// Once the heartbeats stop, the leader lets the lease lapse.
	eventually(t, "the lease lapses at the leader", func() bool { return leader.h.fleet.Status("n1") == "unavailable" })
}

// TestAttemptFromBothHubs: an attempt may be handed out by the standby and
// by the leader (an Agent that failed over between them); an
// acknowledgement on either takes it off the other's queue, and its result
// on the standby finishes it at the leader. The Agent runs such a
// duplicate once (internal/agent TestSameAttemptRunsOnce).
func TestAttemptFromBothHubs(t *testing.T) {
	leader, standby := twoHubs(t)
	a := newTestAgent(standby, "n1")
	a.register(t, "", 15*time.Second)
	onLeader := &testAgent{th: leader, nodeID: "n1", bootID: a.bootID, session: a.session, streams: a.streams}
	w := leader.put(t, "n1", "s1", `{"state":"running","config_version":"v1"}`)
	cmds := a.commands(t, 20*time.Second)
	if len(cmds) != 1 || cmds[0].CommandID != w.OperationID {
		t.Fatalf("from the standby: %+v", cmds)
	}
	again := onLeader.commands(t, 0)
	if len(again) != 1 || again[0].AttemptID != cmds[0].AttemptID {
		t.Fatalf("from the leader: %+v, want attempt %s again", again, cmds[0].AttemptID)
	}
	if r := a.result(t, cmds[0], wire.ResultAcknowledged); r.status != http.StatusNoContent {
		t.Fatalf("ack: %d %s", r.status, r.body)
	}
	eventually(t, "the leader learns of the acknowledgement", func() bool {
		n, _ := leader.h.fleet.Node("n1")
		return n.Queued == 0 && n.Active == 1
	})
	if r := a.result(t, cmds[0], wire.ResultSucceeded); r.status != http.StatusNoContent {
		t.Fatalf("succeeded: %d %s", r.status, r.body)
	}
	eventually(t, "the leader learns the attempt finished", func() bool { return leader.h.fleet.InFlight() == 0 })
	if r := onLeader.result(t, cmds[0], wire.ResultSucceeded); r.status != http.StatusConflict {
		t.Fatalf("a second result on the leader: %d %s", r.status, r.body)
	}
}

// TestStandbyRefusesForeignCredentials crosses the trust boundaries on a
// standby, which shares the leader's database but must not share any
// credential's reach: without the operator token, or with a node's token or
// session in its place, the operator API is 401; the agent API refuses the
// operator token, a wrong node token and another node's credential; and a
// node's session, minted by the leader, cannot report for or answer the
// commands of another node.
func TestStandbyRefusesForeignCredentials(t *testing.T) {
	leader, standby := twoHubsWith(t, testToken)
	owner := newTestAgent(leader, "n1")
	ownerReg := owner.register(t, nodeTokenFor(testToken), 15*time.Second)
	other := newTestAgent(standby, "n2")
	other.register(t, nodeTokenFor(testToken), 15*time.Second)

	for _, tc := range []struct{ name, auth string }{
		{"no token", ""},
		{"a wrong token", "Bearer not-the-operator-token-0123456789"},
		{"the node token", "Bearer " + nodeTokenFor(testToken)},
		{"a node session", "Bearer " + ownerReg.SessionToken},
	} {
		var hdr []string
		if tc.auth != "" {
			hdr = []string{"Authorization", tc.auth}
		}
		for _, path := range []string{"/nodes", "/system", "/audit"} {
			if r := standby.do(t, "GET", APIPrefix+path, "", hdr...); r.status != http.StatusUnauthorized {
				t.Errorf("standby GET %s with %s: %d %s, want 401", path, tc.name, r.status, r.body)
			}
		}
		if r := standby.do(t, "PUT", APIPrefix+"/nodes/n1/streams/s1/desired-state", `{"state":"running"}`, hdr...); r.status != http.StatusUnauthorized {
			t.Errorf("standby PUT with %s: %d %s, want 401", tc.name, r.status, r.body)
		}
	}

	// The agent API on the standby: the operator token is no node token, a
	// wrong node token registers nobody, and n1's identity (stored by the
	// leader) is not another credential's to take.
	intruder := newTestAgent(standby, "n1")
	for _, tc := range []struct {
		name, token, cred string
		want              int
	}{
		{"the operator token", testToken, credentialOf("n1"), http.StatusUnauthorized},
		{"a wrong node token", "wrong-node-token-0123456789", credentialOf("n1"), http.StatusUnauthorized},
		{"another credential", nodeTokenFor(testToken), credentialOf("someone-else"), http.StatusForbidden},
	} {
		if r := registerAs(t, intruder, tc.token, tc.cred, 0); r.status != tc.want {
			t.Errorf("standby register n1 with %s: %d %s, want %d", tc.name, r.status, r.body, tc.want)
		}
	}
	if r := owner.call(t, "POST", "/heartbeat", wire.HeartbeatRequest{BootID: owner.bootID}, testToken); r.status != http.StatusUnauthorized {
		t.Errorf("heartbeat with the operator token: %d %s", r.status, r.body)
	}

	// n1's command, dispatched by the leader: n2's session on the standby
	// neither receives it nor answers it.
	w := leader.put(t, "n1", "s1", `{"state":"running","config_version":"v1"}`, "Authorization", "Bearer "+testToken)
	owner.th = standby
	cmds := owner.commands(t, 20*time.Second)
	if len(cmds) != 1 || cmds[0].CommandID != w.OperationID {
		t.Fatalf("n1's commands on the standby: %+v", cmds)
	}
	if got := other.commandsNoFatal(200 * time.Millisecond); len(got) != 0 {
		t.Fatalf("n2 was handed n1's commands: %+v", got)
	}
	if r := other.result(t, cmds[0], wire.ResultSucceeded); r.status != http.StatusNotFound {
		t.Fatalf("n2 answered n1's command: %d %s, want 404", r.status, r.body)
	}
	if op := operatorGet[wire.Operation](t, standby, "/operations/"+w.OperationID); op.State != wire.OpDispatched {
		t.Fatalf("after n2's answer, n1's operation is %s, want %s", op.State, wire.OpDispatched)
	}
	// A report on n2's session is n2's, whatever it names: n1's stream
	// stays unconverged.
	_ = other.call(t, "POST", "/report", wire.Report{BootID: owner.bootID, ReportSeq: 1,
		Streams: []wire.ReportStream{{ID: "s1", State: "running", Generation: 1, ConfigVersion: "v1"}}}, other.session)
	if s := operatorGet[wire.Stream](t, standby, "/nodes/n1/streams/s1"); s.Convergence == wire.ConvergenceInSync {
		t.Fatalf("n2's report made n1's stream in_sync: %+v", s)
	}
}
