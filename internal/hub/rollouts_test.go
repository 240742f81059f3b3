package hub

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/access"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

const rolloutsPath = APIPrefix + "/rollouts"

// rolloutDoc is a configuration document a rollout carries.
const rolloutDoc = `input:
  generate:
    mapping: 'root = "hello"'
output:
  drop: {}
`

// rolloutAgent is a testAgent that executes configuration_apply commands
// as the Agent does, with no node behind: it records the Hub version and
// generation the command made, and reports them.
type rolloutAgent struct {
	*testAgent
	cfg     wire.ReportConfiguration
	applies int
	seen    []wire.Command
	hold    bool // take commands but never answer or apply them
	// problems, when set, is what the agent's validation finds in every
	// configuration (a preflight then fails); validations answered so far.
	problems    []wire.ConfigProblem
	validations int
	failApply   bool // answer every apply failed (validation_failed), applying nothing
}

func newRolloutAgent(t *testing.T, th *testHub, nodeID string) *rolloutAgent {
	t.Helper()
	a := &rolloutAgent{testAgent: newTestAgent(th, nodeID), cfg: wire.ReportConfiguration{NodeVersion: "v1"}}
	a.register(t, "", time.Minute, wire.CapabilityStreamControl, wire.CapabilityConfigControl)
	a.reportConfig(t)
	return a
}

func (a *rolloutAgent) reportConfig(t *testing.T) {
	t.Helper()
	a.seq++
	c := a.cfg
	rep := wire.Report{BootID: a.bootID, ReportSeq: a.seq, Streams: []wire.ReportStream{}, ConfigurationVersion: c.NodeVersion, Configuration: &c}
	if r := a.call(t, "POST", "/report", rep, a.session); r.status != http.StatusNoContent {
		t.Fatalf("report: %d %s", r.status, r.body)
	}
}

// applyAll takes the commands queued for the node (waiting up to wait for
// the first) and carries out every configuration_apply.
func (a *rolloutAgent) applyAll(t *testing.T, wait time.Duration) []wire.Command {
	t.Helper()
	cmds := a.commands(t, wait)
	// The preflight's validations are answered first, as the Agent
	// would (a holding agent too): valid, or the agent's problems. They
	// are not listed in seen.
	cmds = slices.DeleteFunc(cmds, func(c wire.Command) bool {
		if c.Operation != wire.CommandConfigValidate {
			return false
		}
		a.validations++
		res, _ := json.Marshal(map[string]any{"valid": len(a.problems) == 0, "errors": append([]wire.ConfigProblem{}, a.problems...)})
		if r := a.call(t, "POST", "/commands/"+c.CommandID+"/result",
			wire.CommandResult{AttemptID: c.AttemptID, State: wire.ResultSucceeded, Result: res}, a.session); r.status != http.StatusNoContent {
			t.Fatalf("validation result: %d %s", r.status, r.body)
		}
		return true
	})
	a.seen = append(a.seen, cmds...)
	if a.hold {
		return cmds
	}
	for _, c := range cmds {
		if c.Operation != wire.CommandConfigApply {
			t.Fatalf("unexpected command %+v", c)
		}
		if a.failApply {
			if r := a.call(t, "POST", "/commands/"+c.CommandID+"/result", wire.CommandResult{AttemptID: c.AttemptID, State: wire.ResultFailed,
				Failure: &wire.Failure{Class: "permanent", Code: "validation_failed", Message: "configuration has 1 problems"}}, a.session); r.status != http.StatusNoContent {
				t.Fatalf("result: %d %s", r.status, r.body)
			}
			continue
		}
		a.applies++
		nv := c.Payload.NodeVersion
		if nv == "" {
			nv = fmt.Sprintf("v%d", a.applies+1)
		}
		a.cfg = wire.ReportConfiguration{NodeVersion: nv, HubVersion: c.ConfigVersion, Generation: c.Generation}
		res, _ := json.Marshal(wire.ConfigApplyResult{ConfigVersion: c.ConfigVersion, NodeVersion: nv})
		if r := a.call(t, "POST", "/commands/"+c.CommandID+"/result",
			wire.CommandResult{AttemptID: c.AttemptID, State: wire.ResultSucceeded, Result: res}, a.session); r.status != http.StatusNoContent {
			t.Fatalf("result: %d %s", r.status, r.body)
		}
	}
	if len(cmds) > 0 {
		a.reportConfig(t)
	}
	return cmds
}

// validate has each agent answer the preflight validation of a rollout
// just created (bounded: 10 s each).
func validate(t *testing.T, agents ...*rolloutAgent) {
	t.Helper()
	for _, a := range agents {
		before := a.validations
		deadline := time.Now().Add(10 * time.Second)
		for a.validations == before {
			if time.Now().After(deadline) {
				t.Fatalf("node %s got no preflight validation", a.nodeID)
			}
			a.applyAll(t, 200*time.Millisecond)
		}
	}
}

func (th *testHub) getRollout(t *testing.T, id string) wire.Rollout {
	t.Helper()
	r := th.do(t, "GET", rolloutsPath+"/"+id, "")
	if r.status != http.StatusOK {
		t.Fatalf("GET rollout: %d %s", r.status, r.body)
	}
	return decode[wire.Rollout](t, r)
}

func (th *testHub) createRollout(t *testing.T, body string) wire.Rollout {
	t.Helper()
	r := th.do(t, "POST", rolloutsPath, body)
	if r.status != http.StatusCreated {
		t.Fatalf("POST rollouts: %d %s", r.status, r.body)
	}
	ro := decode[wire.Rollout](t, r)
	if loc := r.header.Get("Location"); loc != rolloutsPath+"/"+ro.RolloutID {
		t.Errorf("Location = %q", loc)
	}
	return ro
}

func (th *testHub) rolloutAction(t *testing.T, id, action string) resp {
	t.Helper()
	return th.do(t, "POST", rolloutsPath+"/"+id+"/actions", `{"action":"`+action+`"}`)
}

// waitRollout polls the rollout until cond holds, for up to 30 s; step
// runs between polls (agents carrying out their commands).
func (th *testHub) waitRollout(t *testing.T, id, what string, cond func(wire.Rollout) bool, step func()) wire.Rollout {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ro := th.getRollout(t, id)
		if cond(ro) {
			return ro
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %+v", what, ro)
		}
		if step != nil {
			step()
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// passes waits until the reconciler ran n more passes (bounded).
func (th *testHub) passes(t *testing.T, n int) {
	t.Helper()
	start := th.h.lastPass.Load()
	seen := 0
	last := start
	deadline := time.Now().Add(time.Duration(n+5) * 2 * time.Second)
	for seen < n {
		if time.Now().After(deadline) {
			t.Fatalf("the reconciler ran %d passes, want %d", seen, n)
		}
		time.Sleep(20 * time.Millisecond)
		if p := th.h.lastPass.Load(); p != last {
			last = p
			seen++
		}
	}
}

func nodeOf(ro wire.Rollout, id string) wire.RolloutNode {
	for _, n := range ro.Nodes {
		if n.NodeID == id {
			return n
		}
	}
	return wire.RolloutNode{}
}

func rolloutBody(nodes []string, extra string) string {
	ids, _ := json.Marshal(nodes)
	doc, _ := json.Marshal(rolloutDoc)
	return `{"configuration":{"format":"yaml","content":` + string(doc) + `},"node_ids":` + string(ids) + extra + `}`
}

func TestRolloutValidation(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	newRolloutAgent(t, th, "n1")
	newRolloutAgent(t, th, "n2")
	doc, _ := json.Marshal(rolloutDoc)
	cfg := `"configuration":{"format":"yaml","content":` + string(doc) + `}`
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
		paths      []string
	}{
		{"no configuration", `{"node_ids":["n1"],"batch_size":1}`, 422, "validation_failed", []string{"configuration"}},
		{"both sources", `{` + cfg + `,"config_version":"v1","source_node_id":"n1","node_ids":["n1"],"batch_size":1}`, 422, "validation_failed", []string{"configuration"}},
		{"bad format", `{"configuration":{"format":"ini","content":"a=1"},"node_ids":["n1"],"batch_size":1}`, 422, "validation_failed", []string{"configuration.format"}},
		{"empty content", `{"configuration":{"format":"yaml","content":""},"node_ids":["n1"],"batch_size":1}`, 422, "validation_failed", []string{"configuration.content"}},
		{"content does not parse", `{"configuration":{"format":"json","content":"{"},"node_ids":["n1"],"batch_size":1}`, 422, "validation_failed", []string{"configuration.content"}},
		{"secret reference that resolves nowhere", `{"configuration":{"format":"yaml","content":"output:\n  drop: {}\npassword: ${secret:rollout-test-bad}\n"},"node_ids":["n1"],"batch_size":1}`,
			422, "validation_failed", []string{"configuration.content"}},
		{"source_node_id without config_version", `{` + cfg + `,"source_node_id":"n1","node_ids":["n1"],"batch_size":1}`, 422, "validation_failed", []string{"source_node_id"}},
		{"config_version without source", `{"config_version":"v1","node_ids":["n1"],"batch_size":1}`, 422, "validation_failed", []string{"source_node_id"}},
		{"bad config_version", `{"config_version":"v 1","source_node_id":"n1","node_ids":["n1"],"batch_size":1}`, 422, "validation_failed", []string{"config_version"}},
		{"unknown config_version", `{"config_version":"v9","source_node_id":"n1","node_ids":["n1"],"batch_size":1}`, 404, "configuration_version_not_found", nil},
		{"no node_ids", `{` + cfg + `,"batch_size":1}`, 422, "validation_failed", []string{"node_ids"}},
		{"bad node id", `{` + cfg + `,"node_ids":["n 1"],"batch_size":1}`, 422, "validation_failed", []string{"node_ids[0]"}},
		{"duplicate node id", `{` + cfg + `,"node_ids":["n1","n1"],"batch_size":1}`, 422, "validation_failed", []string{"node_ids[1]"}},
		{"unregistered node", `{` + cfg + `,"node_ids":["n1","ghost"],"batch_size":1}`, 422, "validation_failed", []string{"node_ids[1]"}},
		{"no waves", `{` + cfg + `,"node_ids":["n1"]}`, 422, "validation_failed", []string{"batch_size"}},
		{"both waves", `{` + cfg + `,"node_ids":["n1"],"batch_size":1,"wave_percentages":[100]}`, 422, "validation_failed", []string{"batch_size"}},
		{"negative batch", `{` + cfg + `,"node_ids":["n1"],"batch_size":-1}`, 422, "validation_failed", []string{"batch_size"}},
		{"percentages not ending at 100", `{` + cfg + `,"node_ids":["n1","n2"],"wave_percentages":[50,90]}`, 422, "validation_failed", []string{"wave_percentages"}},
		{"gate too short", `{` + cfg + `,"node_ids":["n1"],"batch_size":1,"gate_timeout_ms":5}`, 422, "validation_failed", []string{"gate_timeout_ms"}},
		{"gate too long", `{` + cfg + `,"node_ids":["n1"],"batch_size":1,"gate_timeout_ms":86400001}`, 422, "validation_failed", []string{"gate_timeout_ms"}},
		{"negative soak, pause, budget", `{` + cfg + `,"node_ids":["n1"],"batch_size":1,"soak_ms":-1,"pause_ms":-1,"max_failures":-1}`,
			422, "validation_failed", []string{"soak_ms", "pause_ms", "max_failures"}},
		{"unknown field", `{` + cfg + `,"node_ids":["n1"],"batch_size":1,"labels":{}}`, 400, "invalid_json", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := th.do(t, "POST", rolloutsPath, tc.body)
			p := r.problem(t)
			if r.status != tc.status || p.Code != tc.code {
				t.Fatalf("%d %s, want %d %s", r.status, r.body, tc.status, tc.code)
			}
			if tc.paths == nil {
				return
			}
			var got []string
			errs, _ := p.Details["errors"].([]any)
			for _, e := range errs {
				m, _ := e.(map[string]any)
				got = append(got, fmt.Sprint(m["path"]))
			}
			if !slices.Equal(got, tc.paths) {
				t.Errorf("paths %v, want %v (%s)", got, tc.paths, r.body)
			}
		})
	}
	if r := th.do(t, "POST", rolloutsPath, `{"configuration":{"format":"yaml","content":"password: ${secret:rollout-test-bad}\n"},"node_ids":["n1"],"batch_size":1}`); !strings.Contains(string(r.body), "${secret:rollout-test-bad}") {
		t.Errorf("the 422 does not name the reference: %s", r.body)
	}

	for _, tc := range []struct{ method, path, body, code string }{
		{"GET", rolloutsPath + "/nope", "", "rollout_not_found"},
		{"GET", rolloutsPath + "?state=bogus", "", "invalid_query"},
		{"POST", rolloutsPath + "/nope/actions", `{"action":"pause"}`, "rollout_not_found"},
		{"POST", rolloutsPath + "/nope/actions", `{"action":"explode"}`, "validation_failed"},
		{"POST", rolloutsPath + "/nope/actions", `{}`, "validation_failed"},
		{"POST", rolloutsPath + "/nope/actions", `{"action":"pause","x":1}`, "invalid_json"},
	} {
		if r := th.do(t, tc.method, tc.path, tc.body); r.problem(t).Code != tc.code {
			t.Errorf("%s %s %s: %d %s, want %s", tc.method, tc.path, tc.body, r.status, r.body, tc.code)
		}
	}

	// A cancelled rollout takes no resume: 409 with the state machine's reason.
	ro := th.createRollout(t, rolloutBody([]string{"n1", "n2"}, `,"batch_size":1`))
	if r := th.rolloutAction(t, ro.RolloutID, "cancel"); r.status != 200 || decode[wire.Rollout](t, r).State != wire.RolloutCancelled {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	r := th.rolloutAction(t, ro.RolloutID, "resume")
	if p := r.problem(t); r.status != 409 || p.Code != "conflict" || p.Message == "" {
		t.Errorf("resume after cancel: %d %s", r.status, r.body)
	}
	audit := decode[wire.Page[store.AuditRecord]](t, th.do(t, "GET", APIPrefix+"/audit?action=rollout_resume", ""))
	if audit.Total != 1 || audit.Items[0].Outcome != store.OutcomeRejected || audit.Items[0].ResourceType != "rollout" ||
		audit.Items[0].ResourceID != ro.RolloutID || audit.Items[0].FailureCode != "conflict" {
		t.Errorf("audit of the rejected resume: %+v", audit)
	}
	audit = decode[wire.Page[store.AuditRecord]](t, th.do(t, "GET", APIPrefix+"/audit?action=rollout_create", ""))
	var rejected, accepted int
	for _, a := range audit.Items {
		switch a.Outcome {
		case store.OutcomeRejected:
			rejected++
		case store.OutcomeAccepted:
			accepted++
		}
	}
	if accepted != 1 || rejected < 20 {
		t.Errorf("rollout_create audit: %d accepted, %d rejected", accepted, rejected)
	}
}

func TestRolloutWavesPauseResume(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	agents := map[string]*rolloutAgent{}
	for _, id := range []string{"n1", "n2", "n3"} {
		agents[id] = newRolloutAgent(t, th, id)
	}
	ro := th.createRollout(t, rolloutBody([]string{"n1", "n2", "n3"}, `,"batch_size":1,"gate_timeout_ms":60000`))
	validate(t, agents["n1"], agents["n2"], agents["n3"])
	if ro.State != wire.RolloutPending || ro.GateTimeoutMS != 60000 || ro.CurrentWave != 0 || len(ro.Nodes) != 3 ||
		!slices.Equal(ro.NodeIDs, []string{"n1", "n2", "n3"}) || len(ro.Waves) != 3 || ro.Configuration == nil || ro.SHA256 == "" {
		t.Fatalf("created: %+v", ro)
	}
	for _, n := range ro.Nodes {
		if n.Phase != wire.RolloutNodeWaiting {
			t.Errorf("node %s phase %s at creation", n.NodeID, n.Phase)
		}
	}
	// The first wave starts: n1 gets its apply, the others wait.
	ro = th.waitRollout(t, ro.RolloutID, "wave 1", func(r wire.Rollout) bool {
		return r.State == wire.RolloutRunning && nodeOf(r, "n1").Phase == wire.RolloutNodeApplying
	}, nil)
	n1 := nodeOf(ro, "n1")
	if ro.CurrentWave != 1 || n1.OperationID == "" || n1.VersionTarget != "v1" || n1.NodeVersionBefore != "v1" ||
		nodeOf(ro, "n2").Phase != wire.RolloutNodeWaiting || nodeOf(ro, "n3").Phase != wire.RolloutNodeWaiting {
		t.Fatalf("wave 1: %+v", ro)
	}
	cmds := agents["n1"].applyAll(t, 5*time.Second)
	if len(cmds) != 1 || cmds[0].CommandID != n1.OperationID || cmds[0].ConfigVersion != "v1" || cmds[0].Payload.Content != rolloutDoc {
		t.Fatalf("n1's commands: %+v", cmds)
	}
	op := decode[wire.Operation](t, th.do(t, "GET", APIPrefix+"/operations/"+n1.OperationID, ""))
	if op.Operation != wire.CommandConfigApply || op.NodeID != "n1" {
		t.Errorf("n1's operation: %+v", op)
	}

	// Paused, the wave's node still passes its gate, and no wave starts.
	if r := th.rolloutAction(t, ro.RolloutID, "pause"); r.status != 200 || decode[wire.Rollout](t, r).State != wire.RolloutPaused {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	th.waitRollout(t, ro.RolloutID, "n1 passed", func(r wire.Rollout) bool { return nodeOf(r, "n1").Phase == wire.RolloutNodePassed }, nil)
	th.passes(t, 2)
	ro = th.getRollout(t, ro.RolloutID)
	if ro.State != wire.RolloutPaused || nodeOf(ro, "n2").Phase != wire.RolloutNodeWaiting {
		t.Fatalf("a wave started while paused: %+v", ro)
	}
	if c := agents["n2"].commands(t, 0); len(c) != 0 {
		t.Fatalf("n2 got commands while paused: %+v", c)
	}
	if r := th.rolloutAction(t, ro.RolloutID, "pause"); r.status != 409 {
		t.Errorf("pause twice: %d %s", r.status, r.body)
	}

	if r := th.rolloutAction(t, ro.RolloutID, "resume"); r.status != 200 || decode[wire.Rollout](t, r).State != wire.RolloutRunning {
		t.Fatalf("resume: %d %s", r.status, r.body)
	}
	step := func() {
		for _, id := range []string{"n1", "n2", "n3"} {
			agents[id].applyAll(t, 0)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ro = th.waitRollout(t, ro.RolloutID, "succeeded", func(r wire.Rollout) bool { return r.State == wire.RolloutSucceeded }, step)
	for _, n := range ro.Nodes {
		if n.Phase != wire.RolloutNodePassed || n.VersionTarget != "v1" {
			t.Errorf("node %+v after success", n)
		}
	}
	if ro.FinishedAt.IsZero() || ro.CurrentWave != 3 {
		t.Errorf("finished: %+v", ro)
	}
	eventually(t, "n3 in_sync in the view", func() bool {
		return nodeOf(th.getRollout(t, ro.RolloutID), "n3").Convergence == wire.ConvergenceInSync
	})

	// Every step is evented and audited; the pause in the operator's name.
	evs := decode[wire.Page[wire.Event]](t, th.do(t, "GET", APIPrefix+"/events?kind=rollout_changed&resource_id="+ro.RolloutID+"&page_size=100", ""))
	if evs.Total < 4 {
		t.Errorf("rollout_changed events: %d", evs.Total)
	}
	var pauseEv, hubEv bool
	for _, e := range evs.Items {
		if e.Kind != wire.EventRolloutChanged || e.ResourceID != ro.RolloutID {
			t.Errorf("event %+v", e)
		}
		if e.Data["action"] == "pause" || strings.Contains(e.Message, "pause") {
			pauseEv = true
			if e.Data["driven_by"] != nil || e.ActorKind != string(access.KindAnonymous) {
				t.Errorf("the operator's pause says the Hub drove it: %+v", e)
			}
		}
		// The waves the reconciler drives: the creator's name, the Hub's hand.
		hubEv = hubEv || (e.Data["driven_by"] == actorHub && e.Actor == ro.Actor && e.ActorKind == string(access.KindHub))
	}
	if !hubEv {
		t.Errorf("no event of a wave the Hub drove for the creator: %+v", evs.Items)
	}
	if !pauseEv {
		t.Errorf("no event of the pause: %+v", evs.Items)
	}
	for _, action := range []string{"rollout_pause", "rollout_resume", "rollout_changed"} {
		au := decode[wire.Page[store.AuditRecord]](t, th.do(t, "GET", APIPrefix+"/audit?resource_id="+ro.RolloutID+"&action="+action, ""))
		if au.Total == 0 || au.Items[len(au.Items)-1].Outcome != store.OutcomeAccepted {
			t.Errorf("audit %s: %+v", action, au)
		}
		if hub := strings.HasSuffix(au.Items[0].Message, drivenByHub); hub != (action == "rollout_changed") {
			t.Errorf("audit %s: message %q", action, au.Items[0].Message)
		}
		// A wave row is the Hub acting for the creator; the operator's
		// own actions are theirs.
		wantKind := access.KindAnonymous
		if action == "rollout_changed" {
			wantKind = access.KindHub
		}
		if a := au.Items[0]; a.Actor != ro.Actor || a.ActorKind != string(wantKind) {
			t.Errorf("audit %s: actor %q (%s), want %q (%s)", action, a.Actor, a.ActorKind, ro.Actor, wantKind)
		}
	}
	list := decode[wire.Page[wire.Rollout]](t, th.do(t, "GET", rolloutsPath+"?state=succeeded", ""))
	if list.Total != 1 || list.Items[0].RolloutID != ro.RolloutID || list.Items[0].ActorKind != string(access.KindAnonymous) {
		t.Errorf("list ?state=succeeded: %+v", list)
	}
	if list := decode[wire.Page[wire.Rollout]](t, th.do(t, "GET", rolloutsPath+"?state=running", "")); list.Total != 0 {
		t.Errorf("list ?state=running: %+v", list)
	}
}

func TestRolloutGateFailureAndRollback(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	n1, n2 := newRolloutAgent(t, th, "n1"), newRolloutAgent(t, th, "n2")
	n1.hold = true // takes its apply and never reports it: the gate times out
	ro := th.createRollout(t, rolloutBody([]string{"n1", "n2"}, `,"batch_size":1,"gate_timeout_ms":1000`))
	validate(t, n1, n2)
	ro = th.waitRollout(t, ro.RolloutID, "failed", func(r wire.Rollout) bool { return r.State == wire.RolloutFailed },
		func() { n1.applyAll(t, 100*time.Millisecond) })
	if f := nodeOf(ro, "n1"); f.Phase != wire.RolloutNodeFailed || f.Failure == nil || ro.Failures != 1 {
		t.Fatalf("n1 after the gate: %+v", ro)
	}
	if p := nodeOf(ro, "n2").Phase; p != wire.RolloutNodeSkipped && p != wire.RolloutNodeWaiting {
		t.Errorf("n2 touched: %s", p)
	}
	if c := n2.commands(t, 0); len(c) != 0 {
		t.Errorf("n2 got commands: %+v", c)
	}

	// Rollback: n1 gets its previous version (its own v1) again.
	n1.hold = false
	r := th.rolloutAction(t, ro.RolloutID, "rollback")
	if r.status != 200 || decode[wire.Rollout](t, r).State != wire.RolloutRolledBack {
		t.Fatalf("rollback: %d %s", r.status, r.body)
	}
	var rollback *wire.Command
	ro = th.waitRollout(t, ro.RolloutID, "n1 rolled back", func(r wire.Rollout) bool {
		return nodeOf(r, "n1").Phase == wire.RolloutNodeRolledBack
	}, func() {
		for _, c := range n1.applyAll(t, 100*time.Millisecond) {
			if c.Payload.NodeVersion != "" {
				rollback = &c
			}
		}
	})
	if rollback == nil || rollback.Payload.NodeVersion != "v1" {
		t.Errorf("rollback command: %+v", rollback)
	}
	if p := nodeOf(ro, "n2").Phase; p != wire.RolloutNodeSkipped {
		t.Errorf("n2 after rollback: %s", p)
	}
	if c := n2.commands(t, 0); len(c) != 0 {
		t.Errorf("n2 got commands: %+v", c)
	}
	if r := th.rolloutAction(t, ro.RolloutID, "rollback"); r.status != 409 {
		t.Errorf("rollback twice: %d %s", r.status, r.body)
	}
}

// TestRolloutSecretNeverStored: the value of a ${secret:} reaches the
// node's command only; the rollout, its events, the audit and the database
// never hold it.
func TestRolloutSecretNeverStored(t *testing.T) {
	const value = "rollout-secret-value-7f3a"
	t.Setenv("SVC_SECRET_ROLLOUT_PW", value)
	path := dbPath(t)
	th := serve(t, path, "", true)
	a := newRolloutAgent(t, th, "n1")
	doc, _ := json.Marshal(rolloutDoc + "password: ${secret:ROLLOUT_PW}\n")
	ro := th.createRollout(t, `{"configuration":{"format":"yaml","content":`+string(doc)+`},"node_ids":["n1"],"batch_size":1}`)
	var got string
	th.waitRollout(t, ro.RolloutID, "succeeded", func(r wire.Rollout) bool { return r.State == wire.RolloutSucceeded }, func() {
		for _, c := range a.applyAll(t, 100*time.Millisecond) {
			got = c.Payload.Secrets["ROLLOUT_PW"]
		}
	})
	if got != value {
		t.Errorf("the command's secret = %q", got)
	}
	for _, p := range []string{rolloutsPath + "/" + ro.RolloutID, rolloutsPath, APIPrefix + "/events?page_size=100", APIPrefix + "/audit?page_size=100",
		APIPrefix + "/operations?page_size=100"} {
		if r := th.do(t, "GET", p, ""); r.status != 200 || strings.Contains(string(r.body), value) {
			t.Errorf("GET %s: %d, holds the value: %v", p, r.status, strings.Contains(string(r.body), value))
		}
	}
	th.stop()
	files, _ := filepath.Glob(path + "*")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), value) {
			t.Errorf("%s holds the secret value", filepath.Base(f))
		}
	}
}

// TestRolloutSurvivesRestart: a Hub stopped mid-wave goes on from the
// durable rollout after a restart, without a second apply for the wave.
func TestRolloutSurvivesRestart(t *testing.T) {
	path := dbPath(t)
	th := serve(t, path, "", true)
	n1, n2 := newRolloutAgent(t, th, "n1"), newRolloutAgent(t, th, "n2")
	ro := th.createRollout(t, rolloutBody([]string{"n1", "n2"}, `,"batch_size":1`))
	validate(t, n1, n2)
	ro = th.waitRollout(t, ro.RolloutID, "wave 1", func(r wire.Rollout) bool { return nodeOf(r, "n1").Phase == wire.RolloutNodeApplying }, nil)
	op := nodeOf(ro, "n1").OperationID
	th.stop()

	th2 := serve(t, path, "", true)
	for _, a := range []*rolloutAgent{n1, n2} {
		a.th = th2
		a.register(t, "", time.Minute, wire.CapabilityStreamControl, wire.CapabilityConfigControl)
		a.reportConfig(t)
	}
	if got := th2.getRollout(t, ro.RolloutID); got.State != wire.RolloutRunning || nodeOf(got, "n1").OperationID != op {
		t.Fatalf("after restart: %+v", got)
	}
	ro = th2.waitRollout(t, ro.RolloutID, "succeeded", func(r wire.Rollout) bool { return r.State == wire.RolloutSucceeded }, func() {
		n1.applyAll(t, 50*time.Millisecond)
		n2.applyAll(t, 50*time.Millisecond)
	})
	if n1.applies != 1 || n2.applies != 1 || n1.seen[0].CommandID != op {
		t.Errorf("applies after restart: n1 %d (%+v), n2 %d", n1.applies, n1.seen, n2.applies)
	}
}

func TestRolloutIdempotencyKey(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	newRolloutAgent(t, th, "n1")
	body := rolloutBody([]string{"n1"}, `,"batch_size":1`)
	first := th.do(t, "POST", rolloutsPath, body, "Idempotency-Key", "ro-1")
	again := th.do(t, "POST", rolloutsPath, body, "Idempotency-Key", "ro-1")
	if first.status != 201 || again.status != 201 || again.header.Get("Idempotent-Replayed") != "true" ||
		decode[wire.Rollout](t, again).RolloutID != decode[wire.Rollout](t, first).RolloutID {
		t.Fatalf("replay: %d %d %q", first.status, again.status, again.header.Get("Idempotent-Replayed"))
	}
	if list := decode[wire.Page[wire.Rollout]](t, th.do(t, "GET", rolloutsPath, "")); list.Total != 1 {
		t.Errorf("rollouts after a replay: %d", list.Total)
	}
}

// TestRolloutPreflight: every target node validates the configuration
// before any node changes. One that finds problems fails the rollout in
// its preflight step (preflight_failed), naming the node and its problems
// on the rollout; no node gets an apply and no configuration version is
// made.
func TestRolloutPreflight(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	n1, n2 := newRolloutAgent(t, th, "n1"), newRolloutAgent(t, th, "n2")
	n2.problems = []wire.ConfigProblem{{Path: "streams[0].pipeline.processors[0]", Message: `unknown processor "jsno"`}}
	ro := th.createRollout(t, rolloutBody([]string{"n1", "n2"}, `,"batch_size":1`))
	validate(t, n1, n2)
	ro = th.waitRollout(t, ro.RolloutID, "failed", func(r wire.Rollout) bool { return r.State == wire.RolloutFailed }, nil)
	if ro.Failure == nil || ro.Failure.Code != CodePreflightFailed || !strings.Contains(ro.Failure.Message, `n2: streams[0].pipeline.processors[0]: unknown processor "jsno"`) ||
		ro.CurrentWave != 0 {
		t.Fatalf("rollout after a refused preflight: %+v (failure %+v)", ro, ro.Failure)
	}
	want := map[string]string{"n1": wire.PreflightValid, "n2": wire.PreflightInvalid}
	for _, p := range ro.Preflight {
		if p.State != want[p.NodeID] || p.OperationID == "" || (p.NodeID == "n2") != (len(p.Problems) == 1) {
			t.Errorf("preflight of %s: %+v", p.NodeID, p)
		}
	}
	if len(ro.Preflight) != 2 {
		t.Fatalf("preflight: %+v", ro.Preflight)
	}
	for _, n := range ro.Nodes {
		if n.Phase != wire.RolloutNodeWaiting || n.OperationID != "" {
			t.Errorf("node %s changed: %+v", n.NodeID, n)
		}
	}
	th.passes(t, 2)
	for _, a := range []*rolloutAgent{n1, n2} {
		if cmds := a.applyAll(t, 100*time.Millisecond); len(cmds) != 0 || a.applies != 0 {
			t.Errorf("node %s got %d commands after the preflight failed (%d applies)", a.nodeID, len(cmds), a.applies)
		}
		vs := decode[wire.Page[wire.ConfigVersion]](t, th.do(t, "GET", APIPrefix+"/nodes/"+a.nodeID+"/configuration/versions", ""))
		if vs.Total != 0 {
			t.Errorf("node %s has configuration versions %+v: a refused configuration takes none", a.nodeID, vs.Items)
		}
	}
	ev := decode[wire.Page[wire.Event]](t, th.do(t, "GET", APIPrefix+"/events?kind=rollout_changed&resource_id="+ro.RolloutID, ""))
	if !slices.ContainsFunc(ev.Items, func(e wire.Event) bool { return e.Data["step"] == "preflight" && e.Data["state"] == wire.RolloutFailed }) {
		t.Errorf("no rollout_changed of the preflight step: %+v", ev.Items)
	}
}

// TestConfigVersionApplyState: a version whose apply failed on the node
// says so in the node's versions (apply_state failed), one applied says
// succeeded.
func TestConfigVersionApplyState(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	n1 := newRolloutAgent(t, th, "n1")
	ro := th.createRollout(t, rolloutBody([]string{"n1"}, `,"batch_size":1`))
	validate(t, n1)
	th.waitRollout(t, ro.RolloutID, "succeeded", func(r wire.Rollout) bool { return r.State == wire.RolloutSucceeded },
		func() { n1.applyAll(t, 100*time.Millisecond) })
	n1.failApply = true
	// Another content: the same one would be v1 again (one content, one version).
	ro = th.createRollout(t, strings.Replace(rolloutBody([]string{"n1"}, `,"batch_size":1`), "hello", "hello again", 1))
	validate(t, n1)
	th.waitRollout(t, ro.RolloutID, "failed", func(r wire.Rollout) bool { return r.State == wire.RolloutFailed },
		func() { n1.applyAll(t, 100*time.Millisecond) })
	vs := decode[wire.Page[wire.ConfigVersion]](t, th.do(t, "GET", APIPrefix+"/nodes/n1/configuration/versions", ""))
	got := map[string]string{}
	for _, v := range vs.Items {
		got[v.Version] = v.ApplyState
	}
	if want := map[string]string{"v1": wire.OpSucceeded, "v2": wire.OpFailed}; !maps.Equal(got, want) {
		t.Fatalf("apply states %v, want %v", got, want)
	}
}
