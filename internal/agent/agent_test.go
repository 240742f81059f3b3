package agent_test

import (
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/agent"
	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/wire"
)

// deadURL is a loopback URL nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// TestRegisterAndReport: the Agent registers with the node token and its
// identity and capabilities, then reports every stream (generation 0: the
// Hub never commanded it) with report_seq from 1.
func TestRegisterAndReport(t *testing.T) {
	hub := newTestHub(t, testNodeToken)
	tn := startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{hub.URL}, streams: []string{"a", "b"}})
	// Both streams running in the newest report (the two start
	// independently: waiting for one alone left the other "starting" in
	// the last report now and then).
	for _, id := range []string{"a", "b"} {
		hub.waitStream(t, id, "running", func(s wire.ReportStream) bool { return s.State == "running" })
	}
	tn.stop()
	hub.checkNoTokenLeak(t, testNodeToken)

	hub.mu.Lock()
	defer hub.mu.Unlock()
	reg := hub.registers[0]
	if reg.NodeID != testNodeID || reg.BootID == "" || reg.ProtocolVersion != wire.ProtocolVersion || reg.LeaseTTLMS != 15000 || reg.SessionTTLMS != 3600000 || reg.DataAddress != "" {
		t.Errorf("register body %+v", reg)
	}
	if !slices.Contains(reg.Capabilities, wire.CapabilityStreamControl) || !slices.Contains(reg.Capabilities, "input:generate") || slices.Contains(reg.Capabilities, wire.CapabilityNetworkShuffle) {
		t.Errorf("capabilities %v", reg.Capabilities)
	}
	if hub.reports[0].ReportSeq != 1 {
		t.Errorf("first report_seq %d", hub.reports[0].ReportSeq)
	}
	for i, r := range hub.reports {
		if r.BootID != reg.BootID || i > 0 && r.ReportSeq <= hub.reports[i-1].ReportSeq {
			t.Fatalf("report %d: boot %s seq %d after %d", i, r.BootID, r.ReportSeq, hub.reports[max(i-1, 0)].ReportSeq)
		}
	}
	last := hub.reports[len(hub.reports)-1]
	if last.ConfigurationVersion != "v1" || len(last.Streams) != 2 || last.Metrics["streams_running"] != 2 {
		t.Errorf("last report %+v", last)
	}
	for _, s := range last.Streams {
		if s.Generation != 0 || s.ConfigVersion != "v1" || s.Counters == nil {
			t.Errorf("stream %+v", s)
		}
	}
}

// TestSessionExpiry: an expired session (401) is renewed by registering
// again, transparently: the streams are not touched. A short session is
// renewed before it expires, without a 401.
func TestSessionExpiry(t *testing.T) {
	hub := newTestHub(t, testNodeToken)
	hub.heartbeatMS = 20
	tn := startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{hub.URL}, streams: []string{"a"}})
	hub.waitStream(t, "a", "running", func(s wire.ReportStream) bool { return s.State == "running" })
	before := tn.stream(t, "a").Observed.StartedAt

	hub.expireSessions()
	hub.waitFor(t, "a second register after a 401", func() bool { return len(hub.registers) >= 2 && hub.answered401s > 0 })
	hub.waitFor(t, "a heartbeat with the new session", func() bool {
		r := hub.requests[len(hub.requests)-1]
		return r.Path == "/api/v1/agent/heartbeat" && r.Status == 200 && r.Auth == "Bearer session-2"
	})
	if s := tn.stream(t, "a"); !s.Observed.StartedAt.Equal(before.Time) || s.Observed.State != "running" || s.LatestOperation != nil {
		t.Errorf("the stream was touched by a re-register: %+v", s)
	}

	// Proactive renewal: sessions of 300ms are renewed before they end.
	hub.update(func() { hub.sessionLife = 300 * time.Millisecond; hub.answered401s = 0 })
	hub.expireSessions() // the next register issues a short session
	var n int
	hub.waitFor(t, "a register after the 401 of the expired session", func() bool {
		n = len(hub.registers)
		return hub.answered401s > 0 && len(hub.sessions) > 0
	})
	hub.update(func() { hub.answered401s = 0 })
	hub.waitFor(t, "two renewals", func() bool { return len(hub.registers) >= n+2 })
	hub.mu.Lock()
	if hub.answered401s != 0 {
		t.Errorf("%d calls answered 401 while sessions were renewed ahead of expiry", hub.answered401s)
	}
	hub.mu.Unlock()
	tn.stop()
	hub.checkNoTokenLeak(t, testNodeToken)
}

// TestFailover: a dead first Hub URL is skipped; when the Hub in use
// answers 5xx the Agent moves to the next one and registers there.
func TestFailover(t *testing.T) {
	one, two := newTestHub(t, testNodeToken), newTestHub(t, testNodeToken)
	tn := startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{deadURL(t), one.URL, two.URL}, streams: []string{"a"}})
	one.waitStream(t, "a", "running", func(s wire.ReportStream) bool { return s.State == "running" })
	if st := tn.agent.Status(); st.HubURL != one.URL || !st.Connected || st.SessionExpiresAt.IsZero() || st.LastError == "" {
		t.Errorf("status after failover to the second URL: %+v", st)
	}
	one.setUnavailable(true)
	two.waitStream(t, "a", "running", func(s wire.ReportStream) bool { return s.State == "running" })
	if st := tn.agent.Status(); st.HubURL != two.URL || !st.Connected {
		t.Errorf("status after failover to the third URL: %+v", st)
	}
	if s := tn.stream(t, "a"); s.Observed.State != "running" {
		t.Errorf("lost connectivity touched the stream: %s", s.Observed.State)
	}
	tn.stop()
	one.checkNoTokenLeak(t, testNodeToken)
	two.checkNoTokenLeak(t, testNodeToken)
}

// TestWrongNodeToken: a refused register is retried with backoff, logged
// at error level without the token, and never reaches other routes.
func TestWrongNodeToken(t *testing.T) {
	hub := newTestHub(t, "another-token")
	tn := startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{hub.URL}, streams: []string{"a"}})
	hub.waitFor(t, "three refused registers", func() bool { return len(hub.requests) >= 3 })
	tn.stop()
	hub.mu.Lock()
	defer hub.mu.Unlock()
	for _, r := range hub.requests {
		if r.Path != "/api/v1/agent/register" || r.Status != 401 {
			t.Errorf("%s %s answered %d", r.Method, r.Path, r.Status)
		}
	}
	if st := tn.agent.Status(); st.Connected || st.LastError == "" {
		t.Errorf("status %+v", st)
	}
	if !containsAll(tn.logs.String(), "level=ERROR", "node_token") {
		t.Errorf("no error-level log names node_token:\n%s", tn.logs.String())
	}
}

// TestCommandRunsOnce: a command delivered twice in one page, and again
// after it finished, runs once; every attempt gets the same outcome.
func TestCommandRunsOnce(t *testing.T) {
	hub := newTestHub(t, testNodeToken)
	tn := startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{hub.URL}, streams: []string{"a"}})
	hub.waitStream(t, "a", "running", func(s wire.ReportStream) bool { return s.State == "running" })
	stop := wire.Command{CommandID: "cmd-stop", AttemptID: "att-1", Operation: wire.CommandStreamDesiredState, NodeID: testNodeID, ResourceID: "a", Generation: 5, Payload: wire.CommandPayload{State: "stopped"}}
	again := stop
	again.AttemptID = "att-2"
	hub.enqueue(stop, again)
	for _, att := range []string{"att-1", "att-2"} {
		if r := hub.waitFinal(t, "cmd-stop", att); r.State != wire.ResultSucceeded {
			t.Errorf("%s: %+v", att, r)
		}
	}
	hub.waitStream(t, "a", "stopped at generation 5", func(s wire.ReportStream) bool { return s.State == "stopped" && s.Generation == 5 })
	late := stop
	late.AttemptID = "att-3"
	hub.enqueue(late)
	if r := hub.waitFinal(t, "cmd-stop", "att-3"); r.State != wire.ResultSucceeded {
		t.Errorf("att-3: %+v", r)
	}
	if evs := tn.hubEvents(wire.EventIntentAccepted, "cmd-stop"); len(evs) != 1 {
		t.Errorf("the command ran %d times", len(evs))
	}
	if rs := hub.resultsFor("cmd-stop"); rs[0].AttemptID != "att-1" || rs[0].State != wire.ResultAcknowledged {
		t.Errorf("first result %+v, want the acknowledgement of att-1", rs[0])
	}
	tn.stop()
	hub.checkNoTokenLeak(t, testNodeToken)
}

// TestSameAttemptRunsOnce: one attempt handed out twice (two Hubs on one
// database each delivered it, in one page and again after it finished)
// runs once, and its outcome is posted once while it runs.
func TestSameAttemptRunsOnce(t *testing.T) {
	hub := newTestHub(t, testNodeToken)
	tn := startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{hub.URL}, streams: []string{"a"}})
	hub.waitStream(t, "a", "running", func(s wire.ReportStream) bool { return s.State == "running" })
	stop := wire.Command{CommandID: "cmd-stop", AttemptID: "att-1", Operation: wire.CommandStreamDesiredState, NodeID: testNodeID, ResourceID: "a", Generation: 5, Payload: wire.CommandPayload{State: "stopped"}}
	hub.enqueue(stop, stop)
	if r := hub.waitFinal(t, "cmd-stop", "att-1"); r.State != wire.ResultSucceeded {
		t.Fatalf("att-1: %+v", r)
	}
	hub.waitStream(t, "a", "stopped at generation 5", func(s wire.ReportStream) bool { return s.State == "stopped" && s.Generation == 5 })
	finals := 0
	for _, r := range hub.resultsFor("cmd-stop") {
		if r.State != wire.ResultAcknowledged {
			finals++
		}
	}
	if finals != 1 {
		t.Errorf("%d final results for one attempt delivered twice at once", finals)
	}
	hub.enqueue(stop)
	hub.waitFor(t, "the recorded outcome of the late delivery", func() bool {
		n := 0
		for _, r := range hub.results {
			if r.CommandID == "cmd-stop" && r.State == wire.ResultSucceeded {
				n++
			}
		}
		return n == 2
	})
	if evs := tn.hubEvents(wire.EventIntentAccepted, "cmd-stop"); len(evs) != 1 {
		t.Errorf("the attempt ran %d times", len(evs))
	}
	tn.stop()
}

// TestStaleEpochRefused: a command of a leader epoch older than one the
// Agent has seen (in the register answer, or on a newer command) fails
// with stale_epoch and never runs; the same command at the current epoch
// then runs, since the refusal is not its recorded outcome.
func TestStaleEpochRefused(t *testing.T) {
	hub := newTestHub(t, testNodeToken)
	hub.epoch = 3
	tn := startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{hub.URL}, streams: []string{"a"}})
	hub.waitStream(t, "a", "running", func(s wire.ReportStream) bool { return s.State == "running" })
	stop := wire.Command{CommandID: "cmd-stop", AttemptID: "att-1", Operation: wire.CommandStreamDesiredState, NodeID: testNodeID, ResourceID: "a",
		Generation: 5, Epoch: 2, Payload: wire.CommandPayload{State: "stopped"}}
	hub.enqueue(stop)
	r := hub.waitFinal(t, "cmd-stop", "att-1")
	if r.State != wire.ResultFailed || r.Failure == nil || r.Failure.Code != wire.FailureStaleEpoch || !strings.Contains(r.Failure.Message, "epoch 2") {
		t.Fatalf("command of epoch 2 after epoch 3: %+v %+v", r, r.Failure)
	}
	if rs := hub.resultsFor("cmd-stop"); len(rs) != 1 {
		t.Errorf("results %+v, want the refusal alone (no acknowledgement)", rs)
	}
	if evs := tn.hubEvents(wire.EventIntentAccepted, "cmd-stop"); len(evs) != 0 {
		t.Fatalf("the stale command ran: %+v", evs)
	}
	if s := tn.stream(t, "a"); s.Observed.State != "running" {
		t.Fatalf("the stale command stopped the stream: %s", s.Observed.State)
	}
	current := stop
	current.AttemptID, current.Epoch = "att-2", 3
	hub.enqueue(current)
	if r := hub.waitFinal(t, "cmd-stop", "att-2"); r.State != wire.ResultSucceeded {
		t.Fatalf("the command at the current epoch: %+v", r)
	}
	hub.waitStream(t, "a", "stopped at generation 5", func(s wire.ReportStream) bool { return s.State == "stopped" && s.Generation == 5 })
	// A command of a newer epoch teaches it: epoch 4 is stale after 5.
	start := wire.Command{CommandID: "cmd-start", AttemptID: "att-1", Operation: wire.CommandStreamDesiredState, NodeID: testNodeID, ResourceID: "a",
		Generation: 6, Epoch: 5, Payload: wire.CommandPayload{State: "running"}}
	older := start
	older.CommandID, older.Generation, older.Epoch = "cmd-older", 7, 4
	older.Payload.State = "stopped"
	hub.enqueue(start, older)
	if r := hub.waitFinal(t, "cmd-start", "att-1"); r.State != wire.ResultSucceeded {
		t.Fatalf("command of epoch 5: %+v", r)
	}
	if r := hub.waitFinal(t, "cmd-older", "att-1"); r.State != wire.ResultFailed || r.Failure == nil || r.Failure.Code != wire.FailureStaleEpoch {
		t.Fatalf("command of epoch 4 after 5: %+v", r)
	}
	hub.waitStream(t, "a", "running at generation 6", func(s wire.ReportStream) bool { return s.State == "running" && s.Generation == 6 })
	if evs := tn.hubEvents(wire.EventIntentAccepted, "cmd-older"); len(evs) != 0 {
		t.Fatalf("the stale command ran: %+v", evs)
	}
	tn.stop()
}

// TestCommandOutcomes: commands that cannot run fail with a stable code,
// and an expired one is timed_out without running.
func TestCommandOutcomes(t *testing.T) {
	hub := newTestHub(t, testNodeToken)
	tn := startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{hub.URL}, streams: []string{"a"}})
	hub.waitStream(t, "a", "running", func(s wire.ReportStream) bool { return s.State == "running" })
	desired := func(id, resource, state, cv string) wire.Command {
		return wire.Command{CommandID: id, AttemptID: id + "-1", Operation: wire.CommandStreamDesiredState, NodeID: testNodeID, ResourceID: resource, Generation: 2, ConfigVersion: cv, Payload: wire.CommandPayload{State: state}}
	}
	expired := desired("expired", "a", "stopped", "")
	expired.ExpiresAt = wire.At(time.Now().Add(-time.Second))
	unknownOp := desired("unknown-op", "a", "", "")
	unknownOp.Operation = "job_start"
	cases := []struct {
		cmd         wire.Command
		state, code string
	}{
		{expired, wire.ResultTimedOut, ""},
		{unknownOp, wire.ResultFailed, "unsupported_operation"},
		{desired("no-stream", "nope", "stopped", ""), wire.ResultFailed, "stream_not_found"},
		{desired("other-version", "a", "stopped", "v9"), wire.ResultFailed, "config_version_unavailable"},
		{desired("bad-state", "a", "paused", ""), wire.ResultFailed, "invalid_payload"},
	}
	for _, c := range cases {
		hub.enqueue(c.cmd)
	}
	for _, c := range cases {
		r := hub.waitFinal(t, c.cmd.CommandID, c.cmd.AttemptID)
		code := ""
		if r.Failure != nil {
			code = r.Failure.Code
			if r.Failure.Message == "" || r.Failure.Class == "" {
				t.Errorf("%s: failure %+v", c.cmd.CommandID, r.Failure)
			}
		}
		if r.State != c.state || code != c.code {
			t.Errorf("%s: %s %s, want %s %s", c.cmd.CommandID, r.State, code, c.state, c.code)
		}
		if evs := tn.hubEvents(wire.EventIntentAccepted, c.cmd.CommandID); len(evs) != 0 {
			t.Errorf("%s ran on the node", c.cmd.CommandID)
		}
	}
	if s := tn.stream(t, "a"); s.Observed.State != "running" {
		t.Errorf("stream %s", s.Observed.State)
	}
	tn.stop()
	hub.checkNoTokenLeak(t, testNodeToken)
}

// TestRestartAndDrift: a restart is reported with its action id; a local
// stop through the node is reported (drift) and not reverted.
func TestRestartAndDrift(t *testing.T) {
	hub := newTestHub(t, testNodeToken)
	tn := startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{hub.URL}, streams: []string{"a"}, tune: func(o *agent.Options) {
		o.ReportPeriod = 30 * time.Millisecond
	}})
	hub.waitStream(t, "a", "running", func(s wire.ReportStream) bool { return s.State == "running" })
	first := tn.stream(t, "a").Observed.StartedAt
	hub.enqueue(wire.Command{CommandID: "cmd-restart", AttemptID: "att-1", Operation: wire.CommandStreamRestart, NodeID: testNodeID, ResourceID: "a", Generation: 7, ActionID: "act-7"})
	if r := hub.waitFinal(t, "cmd-restart", "att-1"); r.State != wire.ResultSucceeded {
		t.Fatalf("restart: %+v", r)
	}
	hub.waitStream(t, "a", "running with act-7", func(s wire.ReportStream) bool {
		return s.State == "running" && s.Generation == 7 && s.ActionID == "act-7"
	})
	s := tn.stream(t, "a")
	if s.Observed.StartedAt.Equal(first.Time) || s.Observed.ActionID != "act-7" {
		t.Errorf("node view after the restart: %+v", s.Observed)
	}
	if evs := tn.hubEvents(wire.EventCommandSucceeded, "cmd-restart"); len(evs) != 1 {
		t.Errorf("%d command_succeeded events by the hub for the restart", len(evs))
	}

	// Drift: stopped through the Node API by an operator.
	rec, _, err := tn.n.StreamAction("a", "stop", nodeRequest("operator"))
	if err != nil {
		t.Fatal(err)
	}
	hub.waitStream(t, "a", "stopped, generation kept", func(s wire.ReportStream) bool { return s.State == "stopped" && s.Generation == 7 })
	if _, err := tn.n.WaitOperation(t.Context(), rec.OperationID); err != nil {
		t.Fatal(err)
	}
	hub.mu.Lock()
	n := len(hub.reports)
	hub.mu.Unlock()
	hub.waitFor(t, "three periodic reports", func() bool { return len(hub.reports) >= n+3 })
	hub.mu.Lock()
	for _, r := range hub.reports[n:] {
		if r.Streams[0].State != "stopped" {
			t.Errorf("report %d: the Agent reverted a local stop: %+v", r.ReportSeq, r.Streams[0])
		}
	}
	hub.mu.Unlock()
	tn.stop()
	hub.checkNoTokenLeak(t, testNodeToken)
}

// TestDesireSurvivesRestart: the Hub's desire is kept in the state
// directory. A new process (new engine, node and Agent over the same
// directory) keeps a stream the Hub wants stopped stopped, without ever
// starting it, even with no Hub reachable, and reports the same generation
// once one is.
func TestDesireSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	hub := newTestHub(t, testNodeToken)
	tn := startNode(t, nodeOptions{stateDir: dir, hubURLs: []string{hub.URL}, streams: []string{"a", "b"}})
	hub.waitStream(t, "a", "running", func(s wire.ReportStream) bool { return s.State == "running" })
	hub.enqueue(wire.Command{CommandID: "cmd-stop-a", AttemptID: "att-1", Operation: wire.CommandStreamDesiredState, NodeID: testNodeID, ResourceID: "a", Generation: 3, Payload: wire.CommandPayload{State: "stopped"}},
		wire.Command{CommandID: "cmd-restart-b", AttemptID: "att-1", Operation: wire.CommandStreamRestart, NodeID: testNodeID, ResourceID: "b", Generation: 4, ActionID: "act-b"})
	hub.waitFinal(t, "cmd-stop-a", "att-1")
	hub.waitFinal(t, "cmd-restart-b", "att-1")
	tn.stop()

	// No Hub: the desire is re-applied from the state directory.
	offline := startNode(t, nodeOptions{stateDir: dir, hubURLs: []string{deadURL(t)}, streams: []string{"a", "b"}})
	eventually(t, "the boot re-apply of a's stop", func() bool {
		return len(offline.hubEvents(wire.EventCommandSucceeded, "cmd-stop-a")) == 1
	})
	if s := offline.stream(t, "a"); s.Observed.State != "stopped" || s.Observed.Counters.Received != 0 || s.Desired.State != "stopped" {
		t.Errorf("a after a restart without Hub: desired %+v observed %+v", s.Desired, s.Observed)
	}
	eventually(t, "b running", func() bool { return offline.stream(t, "b").Observed.State == "running" })
	offline.stop()

	// With the Hub: same generations and action id, and the redelivered
	// command is answered from the outcome cache.
	next := startNode(t, nodeOptions{stateDir: dir, hubURLs: []string{hub.URL}, streams: []string{"a", "b"}})
	hub.waitStream(t, "a", "stopped at generation 3", func(s wire.ReportStream) bool { return s.State == "stopped" && s.Generation == 3 })
	hub.waitStream(t, "b", "running at generation 4 with act-b", func(s wire.ReportStream) bool {
		return s.State == "running" && s.Generation == 4 && s.ActionID == "act-b"
	})
	hub.enqueue(wire.Command{CommandID: "cmd-restart-b", AttemptID: "att-2", Operation: wire.CommandStreamRestart, NodeID: testNodeID, ResourceID: "b", Generation: 4, ActionID: "act-b"})
	if r := hub.waitFinal(t, "cmd-restart-b", "att-2"); r.State != wire.ResultSucceeded {
		t.Errorf("redelivered after restart: %+v", r)
	}
	if evs := next.hubEvents(wire.EventIntentAccepted, "cmd-restart-b"); len(evs) != 0 {
		t.Errorf("the redelivered restart ran again after the process restart")
	}
	next.stop()
	hub.checkNoTokenLeak(t, testNodeToken)
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func nodeRequest(actor string) node.Request { return node.Request{Actor: actor} }

// TestOutcomeBeforeReport: no report shows a command applied (its
// generation) before the command's outcome was answered, even when the
// answer is slow and the stream's own events ask for a report meanwhile;
// so the Hub records command_succeeded before the in_sync it causes.
func TestOutcomeBeforeReport(t *testing.T) {
	hub := newTestHub(t, testNodeToken)
	startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{hub.URL}, streams: []string{"a"}})
	hub.waitStream(t, "a", "running", func(s wire.ReportStream) bool { return s.State == "running" })
	hub.update(func() { hub.resultDelay = 200 * time.Millisecond })
	hub.enqueue(wire.Command{CommandID: "cmd-stop", AttemptID: "att-1", Operation: wire.CommandStreamDesiredState, NodeID: testNodeID, ResourceID: "a", Generation: 3, Payload: wire.CommandPayload{State: "stopped"}})
	hub.waitStream(t, "a", "stopped at generation 3", func(s wire.ReportStream) bool { return s.State == "stopped" && s.Generation == 3 })

	hub.mu.Lock()
	defer hub.mu.Unlock()
	answered, stoppedEarly := false, false
	for _, r := range hub.requests { // in the order they were answered
		switch {
		case strings.HasSuffix(r.Path, "/commands/cmd-stop/result") && strings.Contains(string(r.Body), `"succeeded"`):
			answered = true
		case strings.HasSuffix(r.Path, "/agent/report"):
			if strings.Contains(string(r.Body), `"generation":3`) && !answered {
				t.Fatalf("a report showed generation 3 before the outcome was answered: %s", r.Body)
			}
			stoppedEarly = stoppedEarly || strings.Contains(string(r.Body), `"state":"stopped","generation":0`)
		}
	}
	if !answered {
		t.Fatal("no succeeded result")
	}
	if !stoppedEarly {
		t.Error("no report showed the stream stopped before the outcome was answered: the slow answer tested nothing")
	}
}
