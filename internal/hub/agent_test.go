package hub

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// testAgent speaks the agent protocol over HTTP, as a real Agent would.
type testAgent struct {
	th      *testHub
	nodeID  string
	bootID  string
	session string
	seq     int64
	// streams is what the agent reports: id -> observation.
	streams map[string]wire.ReportStream
}

func newTestAgent(th *testHub, nodeID string) *testAgent {
	return &testAgent{th: th, nodeID: nodeID, bootID: "boot-" + nodeID, streams: map[string]wire.ReportStream{}}
}

func (a *testAgent) call(t *testing.T, method, path string, body any, token string) resp {
	t.Helper()
	b := ""
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		b = string(j)
	}
	var hdr []string
	if token != "" {
		hdr = []string{"Authorization", "Bearer " + token}
	}
	return a.th.do(t, method, APIPrefix+"/agent"+path, b, hdr...)
}

func (a *testAgent) register(t *testing.T, nodeToken string, lease time.Duration, caps ...string) wire.RegisterResponse {
	t.Helper()
	if caps == nil {
		caps = []string{wire.CapabilityStreamControl}
	}
	r := a.call(t, "POST", "/register", wire.RegisterRequest{NodeID: a.nodeID, BootID: a.bootID, Version: "test",
		ProtocolVersion: wire.ProtocolVersion, Capabilities: caps, LeaseTTLMS: lease.Milliseconds(), NodeCredential: credentialOf(a.nodeID)}, nodeToken)
	if r.status != http.StatusOK {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	got := decode[wire.RegisterResponse](t, r)
	a.session = got.SessionToken
	return got
}

func (a *testAgent) report(t *testing.T) resp {
	t.Helper()
	a.seq++
	rep := wire.Report{BootID: a.bootID, ReportSeq: a.seq, ConfigurationVersion: "v1", Metrics: map[string]float64{"streams_running": 1}}
	for _, s := range a.streams {
		rep.Streams = append(rep.Streams, s)
	}
	r := a.call(t, "POST", "/report", rep, a.session)
	if r.status != http.StatusNoContent {
		t.Fatalf("report: %d %s", r.status, r.body)
	}
	return r
}

func (a *testAgent) commands(t *testing.T, wait time.Duration) []wire.Command {
	t.Helper()
	r := a.call(t, "GET", "/commands?wait_ms="+itoa(wait.Milliseconds()), nil, a.session)
	if r.status != http.StatusOK {
		t.Fatalf("commands: %d %s", r.status, r.body)
	}
	return decode[wire.Page[wire.Command]](t, r).Items
}

func (a *testAgent) result(t *testing.T, c wire.Command, state string) resp {
	t.Helper()
	return a.call(t, "POST", "/commands/"+c.CommandID+"/result", wire.CommandResult{AttemptID: c.AttemptID, State: state}, a.session)
}

// execute acknowledges, "runs" and reports a command like an Agent.
func (a *testAgent) execute(t *testing.T, c wire.Command) {
	t.Helper()
	if r := a.result(t, c, wire.ResultAcknowledged); r.status != http.StatusNoContent {
		t.Fatalf("ack: %d %s", r.status, r.body)
	}
	state := c.Payload.State
	a.streams[c.ResourceID] = wire.ReportStream{ID: c.ResourceID, State: state, Generation: c.Generation, ConfigVersion: "v1", ActionID: c.ActionID}
	if r := a.result(t, c, wire.ResultSucceeded); r.status != http.StatusNoContent {
		t.Fatalf("succeeded: %d %s", r.status, r.body)
	}
	a.report(t)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// eventually polls cond every 10 ms for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (th *testHub) stream(t *testing.T, node, id string) wire.Stream {
	t.Helper()
	r := th.do(t, "GET", APIPrefix+"/nodes/"+node+"/streams/"+id, "")
	if r.status != http.StatusOK {
		t.Fatalf("GET stream: %d %s", r.status, r.body)
	}
	return decode[wire.Stream](t, r)
}

func (th *testHub) put(t *testing.T, node, id, body string, hdr ...string) wire.DesiredStateResponse {
	t.Helper()
	r := th.do(t, "PUT", APIPrefix+"/nodes/"+node+"/streams/"+id+"/desired-state", body, hdr...)
	if r.status != http.StatusAccepted {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	return decode[wire.DesiredStateResponse](t, r)
}

func TestAgentConvergesDesiredState(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	a := newTestAgent(th, "n1")
	reg := a.register(t, "", 15*time.Second)
	if reg.HeartbeatIntervalMS != 5000 || reg.LeaseTTLMS != 15000 || reg.SessionToken == "" || reg.Epoch != 1 {
		t.Fatalf("register answer %+v", reg)
	}
	a.streams["s1"] = wire.ReportStream{ID: "s1", State: "stopped", ConfigVersion: "v1"}
	a.report(t)

	w := th.put(t, "n1", "s1", `{"state":"running","config_version":"v1"}`)
	cmds := a.commands(t, 5*time.Second)
	if len(cmds) != 1 {
		t.Fatalf("commands = %+v", cmds)
	}
	c := cmds[0]
	if c.CommandID != w.OperationID || c.Operation != wire.CommandStreamDesiredState || c.Payload.State != "running" ||
		c.Generation != 1 || c.ConfigVersion != "v1" || c.ExpiresAt.IsZero() || c.AttemptID == "" || c.Epoch != reg.Epoch {
		t.Fatalf("command %+v", c)
	}
	// Acknowledgement alone never converges.
	if r := a.result(t, c, wire.ResultAcknowledged); r.status != http.StatusNoContent {
		t.Fatalf("ack: %d %s", r.status, r.body)
	}
	if got := th.stream(t, "n1", "s1"); got.Convergence != wire.ConvergenceApplying {
		t.Fatalf("after ack: %s", got.Convergence)
	}
	if r := a.result(t, c, wire.ResultSucceeded); r.status != http.StatusNoContent {
		t.Fatalf("succeeded: %d %s", r.status, r.body)
	}
	if got := th.stream(t, "n1", "s1"); got.Convergence != wire.ConvergenceApplying {
		t.Fatalf("after success without report: %s", got.Convergence)
	}
	a.streams["s1"] = wire.ReportStream{ID: "s1", State: "running", Generation: 1, ConfigVersion: "v1"}
	a.report(t)
	got := th.stream(t, "n1", "s1")
	if got.Convergence != wire.ConvergenceInSync || got.Observed.State != "running" || got.LatestOperation == nil ||
		got.LatestOperation.State != wire.OpSucceeded {
		t.Fatalf("after report: %+v", got)
	}
	// A second result for a finished attempt conflicts.
	if r := a.result(t, c, wire.ResultSucceeded); r.status != http.StatusConflict {
		t.Fatalf("second result: %d %s", r.status, r.body)
	}
	// The operation's events are in order, and convergence reached in_sync.
	eventually(t, "convergence_changed in_sync", func() bool {
		evs := decode[wire.Page[wire.Event]](t, th.do(t, "GET", APIPrefix+"/events?operation_id="+w.OperationID+"&page_size=100", ""))
		for _, e := range evs.Items {
			if e.Kind == wire.EventConvergenceChanged && e.Data["convergence"] == wire.ConvergenceInSync {
				return true
			}
		}
		return false
	})
}

func TestAgentRestartNeedsActionID(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	a := newTestAgent(th, "n1")
	a.register(t, "", 15*time.Second)
	th.put(t, "n1", "s1", `{"state":"running","config_version":"v1"}`)
	a.execute(t, a.commands(t, 5*time.Second)[0])
	if got := th.stream(t, "n1", "s1"); got.Convergence != wire.ConvergenceInSync {
		t.Fatalf("before restart: %s", got.Convergence)
	}
	r := th.do(t, "POST", APIPrefix+"/nodes/n1/streams/s1/actions/restart", "")
	if r.status != http.StatusAccepted {
		t.Fatalf("restart: %d %s", r.status, r.body)
	}
	rs := decode[wire.DesiredStateResponse](t, r)
	if rs.ActionID == "" || rs.Generation != 2 {
		t.Fatalf("restart answer %+v", rs)
	}
	c := a.commands(t, 5*time.Second)[0]
	if c.Operation != wire.CommandStreamRestart || c.ActionID != rs.ActionID {
		t.Fatalf("restart command %+v", c)
	}
	// A report of generation 2 without the action id does not converge.
	a.streams["s1"] = wire.ReportStream{ID: "s1", State: "running", Generation: 2, ConfigVersion: "v1", ActionID: "other"}
	a.report(t)
	if got := th.stream(t, "n1", "s1"); got.Convergence == wire.ConvergenceInSync {
		t.Fatalf("in_sync without the action id")
	}
	a.execute(t, c)
	if got := th.stream(t, "n1", "s1"); got.Convergence != wire.ConvergenceInSync || got.Observed.ActionID != rs.ActionID {
		t.Fatalf("after restart: %+v", got)
	}
}

func TestAgentOfflineNodeGetsIntentLater(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	w := th.put(t, "late", "s1", `{"state":"running"}`)
	if got := th.stream(t, "late", "s1"); got.Convergence != wire.ConvergencePending {
		t.Fatalf("before the node exists: %s", got.Convergence)
	}
	a := newTestAgent(th, "late")
	a.register(t, "", 15*time.Second)
	cmds := a.commands(t, 5*time.Second)
	if len(cmds) != 1 || cmds[0].CommandID != w.OperationID {
		t.Fatalf("commands %+v", cmds)
	}
	a.execute(t, cmds[0])
	if got := th.stream(t, "late", "s1"); got.Convergence != wire.ConvergenceInSync {
		t.Fatalf("after: %+v", got)
	}
}

func TestAgentLongPollWakesOnWrite(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	a := newTestAgent(th, "n1")
	a.register(t, "", 15*time.Second)
	got := make(chan []wire.Command, 1)
	go func() {
		r := a.th.do(t, "GET", APIPrefix+"/agent/commands?wait_ms=20000", "", "Authorization", "Bearer "+a.session)
		var p wire.Page[wire.Command]
		_ = json.Unmarshal(r.body, &p)
		got <- p.Items
	}()
	// Let the poll start waiting, then write.
	eventually(t, "a waiting poll", func() bool { return pollers(th, "n1") == 1 })
	w := th.put(t, "n1", "s1", `{"state":"running"}`)
	select {
	case cmds := <-got:
		if len(cmds) != 1 || cmds[0].CommandID != w.OperationID {
			t.Fatalf("woken with %+v", cmds)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the long poll was not woken by the write")
	}
}

func TestAgentSessions(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	a := newTestAgent(th, "n1")
	if r := a.call(t, "POST", "/register", wire.RegisterRequest{NodeID: "n1", BootID: "b", ProtocolVersion: wire.ProtocolVersion}, testToken); r.status != 401 {
		t.Fatalf("register with the operator token: %d", r.status)
	}
	first := a.register(t, nodeTokenFor(testToken), 15*time.Second)
	if r := a.call(t, "POST", "/heartbeat", wire.HeartbeatRequest{BootID: a.bootID}, first.SessionToken); r.status != 200 {
		t.Fatalf("heartbeat: %d %s", r.status, r.body)
	}
	second := a.register(t, nodeTokenFor(testToken), 15*time.Second)
	if second.SessionToken == first.SessionToken {
		t.Fatal("same session token twice")
	}
	r := a.call(t, "POST", "/heartbeat", wire.HeartbeatRequest{BootID: a.bootID}, first.SessionToken)
	if r.status != 401 || r.problem(t).Code != CodeSessionExpired {
		t.Fatalf("replaced session: %d %s", r.status, r.body)
	}
	// Session and node tokens never land in events or audit.
	for _, path := range []string{"/events?page_size=100", "/audit?page_size=100"} {
		b := string(th.do(t, "GET", APIPrefix+path, "", "Authorization", "Bearer "+testToken).body)
		for _, secret := range []string{first.SessionToken, second.SessionToken, nodeTokenFor(testToken), testToken} {
			if strings.Contains(b, secret) {
				t.Fatalf("%s holds a credential", path)
			}
		}
	}
	// A session past its TTL expires.
	short := newTestAgent(th, "n2")
	r = short.call(t, "POST", "/register", wire.RegisterRequest{NodeID: "n2", BootID: "b2", ProtocolVersion: wire.ProtocolVersion,
		SessionTTLMS: 1000, NodeCredential: credentialOf("n2")}, nodeTokenFor(testToken))
	reg := decode[wire.RegisterResponse](t, r)
	eventually(t, "the session to expire", func() bool {
		r := short.call(t, "POST", "/heartbeat", wire.HeartbeatRequest{BootID: "b2"}, reg.SessionToken)
		return r.status == 401 && r.problem(t).Code == CodeSessionExpired
	})
}

func TestAgentLeaseExpiry(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	a := newTestAgent(th, "n1")
	a.register(t, "", 300*time.Millisecond)
	nodeStatus := func() string {
		v := decode[NodeView](t, th.do(t, "GET", APIPrefix+"/nodes/n1", ""))
		return v.Status
	}
	if s := nodeStatus(); s != "online" {
		t.Fatalf("after register: %s", s)
	}
	eventually(t, "the lease to lapse", func() bool { return nodeStatus() == "unavailable" })
	eventually(t, "a node_unavailable event", func() bool {
		evs := decode[wire.Page[wire.Event]](t, th.do(t, "GET", APIPrefix+"/events?kind=node_unavailable", ""))
		return evs.Total == 1 && evs.Items[0].NodeID == "n1"
	})
	// A write for the unavailable node is accepted and waits.
	th.put(t, "n1", "s1", `{"state":"running"}`)
	if got := th.stream(t, "n1", "s1"); got.Convergence != wire.ConvergencePending {
		t.Fatalf("while unavailable: %s", got.Convergence)
	}
	if r := a.call(t, "POST", "/heartbeat", wire.HeartbeatRequest{BootID: a.bootID, Capabilities: []string{wire.CapabilityStreamControl}}, a.session); r.status != 200 {
		t.Fatalf("heartbeat: %d", r.status)
	}
	if len(a.commands(t, 5*time.Second)) != 1 {
		t.Fatal("no command after the node came back")
	}
}

func TestAgentDrainSuppressesDispatch(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	a := newTestAgent(th, "n1")
	a.register(t, "", 15*time.Second)
	th.put(t, "n1", "s1", `{"state":"running"}`)
	inflight := a.commands(t, 5*time.Second)[0]
	if r := th.do(t, "POST", APIPrefix+"/nodes/n1/drain", ""); r.status != 200 || decode[NodeView](t, r).Mode != "draining" {
		t.Fatalf("drain: %d %s", r.status, r.body)
	}
	th.put(t, "n1", "s2", `{"state":"running"}`)
	if cmds := a.commands(t, 300*time.Millisecond); len(cmds) != 0 {
		t.Fatalf("dispatched while draining: %+v", cmds)
	}
	if got := th.stream(t, "n1", "s2"); got.Convergence != wire.ConvergenceBlocked || got.Desired.State != "running" {
		t.Fatalf("s2 while draining: %+v", got)
	}
	// In-flight work completes; desired state is kept.
	a.execute(t, inflight)
	if got := th.stream(t, "n1", "s1"); got.Convergence != wire.ConvergenceInSync {
		t.Fatalf("in-flight work while draining: %s", got.Convergence)
	}
	if r := th.do(t, "DELETE", APIPrefix+"/nodes/n1/maintenance", ""); r.status != 200 {
		t.Fatalf("back to active: %d %s", r.status, r.body)
	}
	cmds := a.commands(t, 5*time.Second)
	if len(cmds) != 1 || cmds[0].ResourceID != "s2" {
		t.Fatalf("after drain ended: %+v", cmds)
	}
	evs := decode[wire.Page[wire.Event]](t, th.do(t, "GET", APIPrefix+"/events?kind=node_maintenance_changed", ""))
	if evs.Total != 2 || evs.Items[0].Actor == "" || evs.Items[0].CorrelationID == "" {
		t.Fatalf("maintenance events %+v", evs)
	}
	if r := th.do(t, "POST", APIPrefix+"/nodes/ghost/maintenance", ""); r.status != 404 || r.problem(t).Code != CodeNodeNotFound {
		t.Fatalf("unknown node: %d %s", r.status, r.body)
	}
}

func TestAgentIncompatibleCapability(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	a := newTestAgent(th, "n1")
	a.register(t, "", 15*time.Second, "input/generate")
	w := th.put(t, "n1", "s1", `{"state":"running"}`)
	eventually(t, "the intent to fail", func() bool {
		op := decode[wire.Operation](t, th.do(t, "GET", APIPrefix+"/operations/"+w.OperationID, ""))
		return op.State == wire.OpFailed && op.Failure != nil && op.Failure.Code == "incompatible_capability"
	})
	if got := th.stream(t, "n1", "s1"); got.Convergence != wire.ConvergenceBlocked {
		t.Fatalf("convergence %s", got.Convergence)
	}
	au := decode[wire.Page[store.AuditRecord]](t, th.do(t, "GET", APIPrefix+"/audit?resource_id=s1", ""))
	if au.Items[0].Outcome != store.OutcomeRejected || au.Items[0].FailureCode != "incompatible_capability" {
		t.Fatalf("audit %+v", au.Items)
	}
}

func TestCancelPendingAndAfterDispatch(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	w := th.put(t, "n1", "s1", `{"state":"running"}`)
	r := th.do(t, "DELETE", APIPrefix+"/operations/"+w.OperationID, "")
	if r.status != 200 || decode[wire.Operation](t, r).State != wire.OpCancelled {
		t.Fatalf("cancel pending: %d %s", r.status, r.body)
	}
	a := newTestAgent(th, "n1")
	a.register(t, "", 15*time.Second)
	if cmds := a.commands(t, 300*time.Millisecond); len(cmds) != 0 {
		t.Fatalf("a cancelled intent was dispatched: %+v", cmds)
	}
	w2 := th.put(t, "n1", "s1", `{"state":"stopped"}`)
	c := a.commands(t, 5*time.Second)[0]
	r = th.do(t, "DELETE", APIPrefix+"/operations/"+w2.OperationID, "")
	if r.status != 409 || r.problem(t).Code != CodeOperationNotCancellable {
		t.Fatalf("cancel after dispatch: %d %s", r.status, r.body)
	}
	a.execute(t, c)
	op := decode[wire.Operation](t, th.do(t, "GET", APIPrefix+"/operations/"+w2.OperationID, ""))
	if op.State != wire.OpSucceeded || op.AttemptID != c.AttemptID {
		t.Fatalf("outcome after a refused cancel: %+v", op)
	}
	au := decode[wire.Page[store.AuditRecord]](t, th.do(t, "GET", APIPrefix+"/audit?resource_id=s1", ""))
	found := false
	for _, rec := range au.Items {
		if rec.Action == "operation_cancel" && rec.Outcome == store.OutcomeRejected && rec.FailureCode == CodeOperationNotCancellable {
			found = true
		}
	}
	if !found {
		t.Fatalf("rejected cancel not audited: %+v", au.Items)
	}
}

func TestLegacyRoutes(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	if r := th.do(t, "POST", APIPrefix+"/streams/nowhere/stop", ""); r.status != 404 || r.problem(t).Code != CodeStreamNotFound {
		t.Fatalf("unknown stream: %d %s", r.status, r.body)
	}
	th.put(t, "n1", "s1", `{"state":"running"}`)
	r := th.do(t, "POST", APIPrefix+"/streams/s1/stop", "")
	if r.status != 202 {
		t.Fatalf("legacy stop: %d %s", r.status, r.body)
	}
	if got := decode[wire.DesiredStateResponse](t, r); got.NodeID != "n1" || got.DesiredState != "stopped" || got.Generation != 2 {
		t.Fatalf("legacy stop answer %+v", got)
	}
	th.put(t, "n2", "s1", `{"state":"running"}`)
	r = th.do(t, "POST", APIPrefix+"/streams/s1/restart", "")
	if r.status != 409 || r.problem(t).Code != CodeAmbiguousStream {
		t.Fatalf("ambiguous: %d %s", r.status, r.body)
	}
	if r := th.do(t, "POST", APIPrefix+"/streams/s1/explode", ""); r.status != 404 {
		t.Fatalf("unknown action: %d", r.status)
	}
}

func TestReadsAndMetrics(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	a := newTestAgent(th, "n1")
	a.register(t, "", 15*time.Second)
	a.streams["s1"] = wire.ReportStream{ID: "s1", State: "running", ConfigVersion: "v1"}
	a.streams["s2"] = wire.ReportStream{ID: "s2", State: "failed", ConfigVersion: "v1", LastError: "boom"}
	a.report(t)
	th.put(t, "n1", "s1", `{"state":"running","config_version":"v1"}`)
	a.execute(t, a.commands(t, 5*time.Second)[0])
	th.put(t, "n9", "s9", `{"state":"running"}`)

	st := decode[Status](t, th.do(t, "GET", APIPrefix+"/status", ""))
	conv := st.Streams.Convergence
	if st.Streams.Total != 2 || st.Streams.Running != 1 || st.Streams.Failed != 1 || st.Nodes.Online != 1 || st.Version != "test" {
		t.Fatalf("status %+v", st)
	}
	// Every stream of GET /streams by convergence: s2 reported, not
	// desired; s9 desired on a node never seen; s1 after its command.
	if conv["unknown"] != 1 || conv["pending"] != 1 || conv["unknown"]+conv["pending"]+conv["applying"]+conv["in_sync"] != 3 {
		t.Fatalf("streams by convergence %v", conv)
	}
	for _, tc := range []struct{ query, want string }{
		{"state=failed", "n1/s2"}, {"state=none", "n9/s9"}, {"state=running&node_id=n1", "n1/s1"}, {"state=stopped", ""},
	} {
		page := decode[wire.Page[wire.Stream]](t, th.do(t, "GET", APIPrefix+"/streams?"+tc.query, ""))
		var got []string
		for _, s := range page.Items {
			got = append(got, s.NodeID+"/"+s.ID)
		}
		if strings.Join(got, ",") != tc.want || page.Total != len(got) {
			t.Errorf("GET /streams?%s: %v (total %d), want %q", tc.query, got, page.Total, tc.want)
		}
	}
	nodes := decode[wire.Page[NodeView]](t, th.do(t, "GET", APIPrefix+"/nodes", ""))
	if nodes.Total != 2 || nodes.Items[0].NodeID != "n1" || nodes.Items[0].Status != "online" || nodes.Items[1].Status != "unknown" {
		t.Fatalf("nodes %+v", nodes)
	}
	streams := decode[wire.Page[wire.Stream]](t, th.do(t, "GET", APIPrefix+"/streams", ""))
	if streams.Total != 3 {
		t.Fatalf("streams %+v", streams)
	}
	byID := map[string]wire.Stream{}
	for _, s := range streams.Items {
		byID[s.NodeID+"/"+s.ID] = s
	}
	if byID["n1/s1"].Convergence != wire.ConvergenceInSync || byID["n1/s2"].Convergence != wire.ConvergenceUnknown || byID["n9/s9"].Convergence != wire.ConvergencePending {
		t.Fatalf("stream convergence %+v", byID)
	}
	ops := decode[OperationsStatus](t, th.do(t, "GET", APIPrefix+"/operations/status", ""))
	if ops.ByState["succeeded"] != 1 || ops.ByState["pending"] != 1 || ops.OutboxDepth != 1 || ops.OldestPendingAgeMS < 0 {
		t.Fatalf("operations status %+v", ops)
	}
	mj := decode[MetricsJSON](t, th.do(t, "GET", APIPrefix+"/metrics?format=json", ""))
	if len(mj.Items) != 1 || mj.Items[0].NodeID != "n1" || mj.Aggregate["streams_running"] != 1 {
		t.Fatalf("metrics json %+v", mj)
	}
	if r := th.do(t, "GET", APIPrefix+"/metrics?node_id=n1", "", "Accept", "application/json"); decode[MetricsJSON](t, r).Items[0].NodeID != "n1" {
		t.Fatalf("metrics json by Accept: %s", r.body)
	}
	text := string(th.do(t, "GET", "/metrics", "").body)
	for _, want := range []string{`svc_command_total{command="stream_start",outcome="enqueued"} 1`,
		`svc_command_total{command="stream_start",outcome="acknowledged"} 1`, `svc_command_duration_bucket{command="stream_start",le=`,
		`svc_command_total{command="other",outcome="rejected"} 0`} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, forbidden := range []string{`node_id="n1",outcome`, "s1\""} {
		if strings.Contains(text, "svc_command") && strings.Contains(text, forbidden) {
			t.Errorf("/metrics has label %s", forbidden)
		}
	}
	if r := th.do(t, "GET", APIPrefix+"/components/input/generate", ""); r.status != 200 && r.status != 404 {
		t.Fatalf("component: %d", r.status)
	}
	if r := th.do(t, "GET", APIPrefix+"/schema", ""); r.status != 200 {
		t.Fatalf("schema: %d", r.status)
	}
}

// TestSSEOperationLife subscribes to the event stream and sees one
// operation's whole life, in order.
func TestSSEOperationLife(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	a := newTestAgent(th, "n1")
	a.register(t, "", 15*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", th.base+APIPrefix+"/events/stream?resource_id=s1", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("SSE: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(res.Body)
	if !sc.Scan() || sc.Text() != "retry: 2000" {
		t.Fatalf("first line %q", sc.Text())
	}
	w := th.put(t, "n1", "s1", `{"state":"running","config_version":"v1"}`)
	a.execute(t, a.commands(t, 5*time.Second)[0])
	want := []string{wire.EventIntentAccepted, wire.EventCommandDispatched, wire.EventCommandAcknowledged, wire.EventCommandSucceeded}
	var kinds []string
	lastID := int64(0)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		var e wire.Event
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e); err != nil {
			t.Fatal(err)
		}
		if e.ID <= lastID {
			t.Fatalf("event ids not increasing: %d after %d", e.ID, lastID)
		}
		lastID = e.ID
		if e.OperationID == w.OperationID && e.Kind != wire.EventConvergenceChanged {
			kinds = append(kinds, e.Kind)
		}
		if e.Kind == wire.EventConvergenceChanged && e.Data["convergence"] == wire.ConvergenceInSync {
			break
		}
	}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		t.Fatalf("operation events %v, want %v", kinds, want)
	}
}

// TestEventQueryFilters: GET /events takes the filters of the SSE stream.
func TestEventQueryFilters(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	a := newTestAgent(th, "n1")
	a.register(t, "", 15*time.Second)
	th.put(t, "n1", "s1", `{"state":"running"}`)
	all := decode[wire.Page[wire.Event]](t, th.do(t, "GET", APIPrefix+"/events?page_size=100", ""))
	if all.Total < 3 {
		t.Fatalf("events %+v", all)
	}
	newest := all.Items[0].ID
	cases := []struct {
		query string
		want  func(wire.Page[wire.Event]) bool
	}{
		{"since_id=" + itoa(newest-1), func(p wire.Page[wire.Event]) bool {
			// Later events may have come in since; none older may show.
			return p.Total >= 1 && p.Items[len(p.Items)-1].ID == newest
		}},
		{"kind=node_registered,intent_accepted", func(p wire.Page[wire.Event]) bool { return p.Total == 2 }},
		{"kind=node_registered&kind=intent_accepted", func(p wire.Page[wire.Event]) bool { return p.Total == 2 }},
		{"since=2099-01-01T00:00:00Z", func(p wire.Page[wire.Event]) bool { return p.Total == 0 }},
		{"resource_id=s1&kind=intent_accepted", func(p wire.Page[wire.Event]) bool { return p.Total == 1 }},
	}
	for _, c := range cases {
		if got := decode[wire.Page[wire.Event]](t, th.do(t, "GET", APIPrefix+"/events?"+c.query, "")); !c.want(got) {
			t.Errorf("?%s: %+v", c.query, got)
		}
	}
	for _, bad := range []string{"since_id=abc", "since=yesterday", "page_size=101"} {
		if r := th.do(t, "GET", APIPrefix+"/events?"+bad, ""); r.status != 400 || r.problem(t).Code != "invalid_query" {
			t.Errorf("?%s: %d %s", bad, r.status, r.body)
		}
	}
}

// TestReportedCountersAndEmptyViews: the view shows the counters of the
// latest report; nothing desired or nothing observed is left out.
func TestReportedCountersAndEmptyViews(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	th.put(t, "n1", "s1", `{"state":"running"}`)
	if r := th.do(t, "GET", APIPrefix+"/nodes/n1/streams/s1", ""); strings.Contains(string(r.body), `"observed"`) {
		t.Fatalf("observed shown before any report: %s", r.body)
	}
	a := newTestAgent(th, "n1")
	a.register(t, "", 15*time.Second)
	a.streams["s1"] = wire.ReportStream{ID: "s1", State: "running", Counters: &wire.StreamCounters{Received: 13, Sent: 12}}
	a.streams["s2"] = wire.ReportStream{ID: "s2", State: "running", Counters: &wire.StreamCounters{Sent: 5}}
	a.report(t)
	if got := th.stream(t, "n1", "s1"); got.Observed.Counters.Received != 13 || got.Observed.Counters.Sent != 12 {
		t.Fatalf("counters %+v", got.Observed.Counters)
	}
	// Counters change without a new durable observation.
	a.streams["s1"] = wire.ReportStream{ID: "s1", State: "running", Counters: &wire.StreamCounters{Received: 20, Sent: 20}}
	a.report(t)
	if got := th.stream(t, "n1", "s1"); got.Observed.Counters.Received != 20 {
		t.Fatalf("counters after a second report %+v", got.Observed.Counters)
	}
	r := th.do(t, "GET", APIPrefix+"/nodes/n1/streams/s2", "")
	if r.status != 200 || strings.Contains(string(r.body), `"desired"`) || decode[wire.Stream](t, r).Observed.Counters.Sent != 5 {
		t.Fatalf("reported-only stream: %d %s", r.status, r.body)
	}
}

// TestWrongMethodAndAuditNames: a POST on desired-state is 405 (PUT sets
// it, DELETE stops managing the stream), not an
// unknown action; rejected and accepted mutations of one route share their
// audit action name.
func TestWrongMethodAndAuditNames(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	r := th.do(t, "POST", APIPrefix+"/nodes/n1/streams/s1/desired-state", `{"state":"running"}`)
	if r.status != 405 || r.header.Get("Allow") != "DELETE, PUT" || r.problem(t).Code != "method_not_allowed" {
		t.Fatalf("POST desired-state: %d %v %s", r.status, r.header, r.body)
	}
	if r := th.do(t, "POST", APIPrefix+"/nodes/ghost/drain", ""); r.status != 404 {
		t.Fatalf("drain unknown node: %d", r.status)
	}
	a := newTestAgent(th, "n1")
	a.register(t, "", 15*time.Second)
	if r := th.do(t, "POST", APIPrefix+"/nodes/n1/drain", ""); r.status != 200 {
		t.Fatalf("drain: %d", r.status)
	}
	if r := th.do(t, "POST", APIPrefix+"/nodes/n1/streams/s1/stop", "", "If-Match", `"generation-7"`); r.status != 412 {
		t.Fatalf("stop with a stale If-Match: %d", r.status)
	}
	th.do(t, "POST", APIPrefix+"/nodes/n1/streams/s1/stop", "")
	outcomes := func(action string) map[string]bool {
		out := map[string]bool{}
		for _, rec := range decode[wire.Page[store.AuditRecord]](t, th.do(t, "GET", APIPrefix+"/audit?action="+action, "")).Items {
			out[rec.Outcome] = true
		}
		return out
	}
	for _, action := range []string{"node_mode_draining", "stream_stop"} {
		if got := outcomes(action); !got[store.OutcomeAccepted] || !got[store.OutcomeRejected] {
			t.Errorf("audit of %s: %v, want both outcomes", action, got)
		}
	}
	if got := outcomes("stream_desired_state"); len(got) != 0 {
		t.Errorf("a 405 was audited: %v", got)
	}
}

// TestAuditQueryFilters: GET /audit narrows by resource, node, actor,
// action and outcome, combined with AND; an unknown outcome is a 400.
func TestAuditQueryFilters(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	w := th.put(t, "n1", "s1", `{"state":"running"}`)
	th.put(t, "n2", "s2", `{"state":"running"}`)
	if r := th.do(t, "DELETE", APIPrefix+"/operations/"+w.OperationID, ""); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	if r := th.do(t, "DELETE", APIPrefix+"/operations/"+w.OperationID, ""); r.status != 409 {
		t.Fatalf("cancel again: %d %s", r.status, r.body)
	}
	cases := []struct {
		query string
		want  int
	}{
		{"", 4},
		{"outcome=accepted", 3},
		{"outcome=rejected", 1},
		{"outcome=rejected&action=operation_cancel", 1},
		{"outcome=rejected&action=stream_desired_state", 0},
		{"outcome=accepted&resource_id=s1", 2},
		{"outcome=accepted&node_id=n2", 1},
		{"action=stream_desired_state", 2},
		{"outcome=", 4},
	}
	for _, c := range cases {
		got := decode[wire.Page[store.AuditRecord]](t, th.do(t, "GET", APIPrefix+"/audit?"+c.query, ""))
		if got.Total != c.want || len(got.Items) != c.want {
			t.Errorf("?%s: total %d, %d rows, want %d: %+v", c.query, got.Total, len(got.Items), c.want, got.Items)
			continue
		}
		if o := strings.TrimPrefix(c.query, "outcome="); strings.HasPrefix(c.query, "outcome=") && o != "" {
			o, _, _ = strings.Cut(o, "&")
			for _, rec := range got.Items {
				if rec.Outcome != o {
					t.Errorf("?%s: row %+v", c.query, rec)
				}
			}
		}
	}
	if r := th.do(t, "GET", APIPrefix+"/audit?outcome=maybe", ""); r.status != 400 || r.problem(t).Code != "invalid_query" {
		t.Errorf("?outcome=maybe: %d %s", r.status, r.body)
	}
}

// TestTimedOutResultKeepsAgentFailure: an Agent's timed_out result keeps
// its failure on the operation while the intent is retried.
func TestTimedOutResultKeepsAgentFailure(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	a := newTestAgent(th, "n1")
	a.register(t, "", 15*time.Second)
	w := th.put(t, "n1", "s1", `{"state":"stopped"}`)
	c := a.commands(t, 5*time.Second)[0]
	r := a.call(t, "POST", "/commands/"+c.CommandID+"/result", wire.CommandResult{AttemptID: c.AttemptID, State: wire.ResultTimedOut,
		Failure: &wire.Failure{Class: "transient", Code: "stop_timeout", Message: "the stream did not stop in time"}}, a.session)
	if r.status != 204 {
		t.Fatalf("result: %d %s", r.status, r.body)
	}
	op := decode[wire.Operation](t, th.do(t, "GET", APIPrefix+"/operations/"+w.OperationID, ""))
	if op.State != wire.OpPending || op.Retry.Count != 1 || op.Failure == nil || op.Failure.Code != "stop_timeout" || op.Failure.Class != "transient" {
		t.Fatalf("operation %+v", op)
	}
}

// credentialOf is the node credential test agents register nodeID with.
func credentialOf(nodeID string) string { return "test-node-credential-0123456789abcdef-" + nodeID }
