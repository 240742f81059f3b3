package hub

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/flowplane/flowplane/internal/connect/all" // the components job specs name
	"github.com/flowplane/flowplane/internal/wire"
)

// jobCaps are what a node advertises to run testJobSpec.
var jobCaps = []string{wire.CapabilityStreamControl, wire.CapabilityJobControl, "input:generate", "output:drop"}

// testJobSpec is a stateful job at version v with max parallelism maxPar.
func testJobSpec(id string, v, maxPar int) string {
	return fmt.Sprintf(`{"id": %q, "version": %d, "max_parallelism": %d,
  "operators": [{"id": "src", "kind": "source"},
    {"id": "counts", "kind": "aggregate", "config": {"key": "this.user", "aggregations": [{"name": "n", "function": "count"}]}},
    {"id": "out", "kind": "sink"}],
  "edges": [{"from": "src", "to": "counts", "partitioned": true}, {"from": "counts", "to": "out"}],
  "sources": [{"operator_id": "src", "input_type": "generate", "config": {"context": "{\"user\": \"u{{random:3}}\"}", "interval": "10ms"}}],
  "sinks": [{"operator_id": "out", "output_type": "drop"}],
  "state": {"backend": "embedded_kv"},
  "checkpoint": {"interval_ms": 1000, "object_store_uri": "file:///tmp/unused"}}`, id, v, maxPar)
}

// jobAgent is a testAgent that runs job commands: it answers them and
// observes its jobs as the real Agent does, with no kernel behind.
type jobAgent struct {
	*testAgent
	jobs   map[string]wire.JobObservation
	nextID int64
	jseq   int64
}

func newJobAgent(t *testing.T, th *testHub, nodeID string) *jobAgent {
	t.Helper()
	a := &jobAgent{testAgent: newTestAgent(th, nodeID), jobs: map[string]wire.JobObservation{}}
	a.register(t, nodeTokenFor(testToken), time.Minute, jobCaps...)
	a.report(t)
	return a
}

func (a *jobAgent) observe(t *testing.T) {
	t.Helper()
	a.jseq++
	body := wire.JobObservations{BootID: a.bootID, ReportSeq: a.jseq}
	for _, o := range a.jobs {
		body.Jobs = append(body.Jobs, o)
	}
	if r := a.call(t, "POST", "/job-observations", body, a.session); r.status != http.StatusNoContent {
		t.Fatalf("job-observations: %d %s", r.status, r.body)
	}
}

// artifact is what the agent's kernel would have written.
func (a *jobAgent) artifact(c wire.Command, kind string) wire.JobArtifact {
	a.nextID++
	o := a.jobs[c.ResourceID]
	return wire.JobArtifact{JobID: c.ResourceID, Kind: kind, ID: a.nextID, JobVersion: o.Version, FormatVersion: 1,
		MaxParallelism: 128, StatefulOperators: []string{"counts"}, Location: "file:///tmp/unused/x", Bytes: 42,
		State: wire.ArtifactCompleted, CreatedAt: wire.At(time.Now())}
}

// runAll executes every pending command: job_start and job_stop change
// the observed job; checkpoints and savepoints answer an artifact.
func (a *jobAgent) runAll(t *testing.T) []wire.Command {
	t.Helper()
	cmds := a.commands(t, 5*time.Second)
	for _, c := range cmds {
		var result any
		switch c.Operation {
		case wire.CommandJobStart:
			if len(c.Payload.Spec) == 0 {
				t.Fatalf("job_start without a spec: %+v", c)
			}
			tasks := []wire.JobTask{{ID: "src#0", State: "running"}}
			if len(c.Payload.TaskNodes) > 0 { // split: the tasks placed here
				tasks = nil
				for _, id := range slices.Sorted(maps.Keys(c.Payload.TaskNodes)) {
					if c.Payload.TaskNodes[id] == a.nodeID {
						tasks = append(tasks, wire.JobTask{ID: id, State: "running"})
					}
				}
			}
			a.jobs[c.ResourceID] = wire.JobObservation{ID: c.ResourceID, State: wire.JobRunning, Generation: c.Generation,
				Version: c.Payload.JobVersion, ActionID: c.ActionID, Tasks: tasks}
		case wire.CommandJobStop:
			o := a.jobs[c.ResourceID]
			if c.Payload.Savepoint && o.State == wire.JobRunning {
				result = a.artifact(c, wire.ArtifactSavepoint)
			}
			o.ID, o.State, o.Generation, o.Version, o.Tasks = c.ResourceID, wire.JobStopped, c.Generation, c.Payload.JobVersion, nil
			a.jobs[c.ResourceID] = o
		case wire.CommandJobCheckpoint:
			result = a.artifact(c, wire.ArtifactCheckpoint)
		case wire.CommandJobSavepoint:
			result = a.artifact(c, wire.ArtifactSavepoint)
		}
		res := wire.CommandResult{AttemptID: c.AttemptID, State: wire.ResultSucceeded}
		if result != nil {
			b, err := json.Marshal(result)
			if err != nil {
				t.Fatal(err)
			}
			res.Result = b
		}
		if r := a.call(t, "POST", "/commands/"+c.CommandID+"/result", res, a.session); r.status != http.StatusNoContent {
			t.Fatalf("result: %d %s", r.status, r.body)
		}
	}
	a.observe(t)
	return cmds
}

func (th *testHub) job(t *testing.T, id string) wire.Job {
	t.Helper()
	r := th.do(t, "GET", APIPrefix+"/jobs/"+id, "", "Authorization", "Bearer "+testToken)
	if r.status != http.StatusOK {
		t.Fatalf("GET job: %d %s", r.status, r.body)
	}
	return decode[wire.Job](t, r)
}

func (th *testHub) op(t *testing.T, method, path, body string, want int, hdr ...string) resp {
	t.Helper()
	r := th.do(t, method, APIPrefix+path, body, append([]string{"Authorization", "Bearer " + testToken}, hdr...)...)
	if r.status != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, r.status, want, r.body)
	}
	return r
}

// auditOf is the audit of a resource as action/outcome/failure_code.
func (th *testHub) auditOf(t *testing.T, resourceID string) []string {
	t.Helper()
	audit := decode[wire.Page[map[string]any]](t, th.op(t, "GET", "/audit?page_size=100&resource_id="+resourceID, "", http.StatusOK))
	var got []string
	for _, rec := range audit.Items {
		got = append(got, fmt.Sprint(rec["action"], "/", rec["outcome"], "/", rec["failure_code"]))
	}
	return got
}

func (th *testHub) waitJobConvergence(t *testing.T, id, want string) wire.Job {
	t.Helper()
	var j wire.Job
	eventually(t, id+" "+want, func() bool {
		j = th.job(t, id)
		return j.Convergence == want
	})
	return j
}

func TestJobLifecycle(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	a := newJobAgent(t, th, "n1")
	b := newJobAgent(t, th, "n2")

	// Created stopped on the least loaded capable node; a stop is sent.
	r := th.op(t, "POST", "/jobs", `{"spec": `+testJobSpec("j1", 1, 128)+`, "desired_state": "stopped"}`, http.StatusAccepted)
	created := decode[wire.JobDesiredResponse](t, r)
	if created.NodeID != "n1" || created.Generation != 1 || r.header.Get("ETag") != `"generation-1"` ||
		!strings.HasSuffix(r.header.Get("Location"), "/operations/"+created.OperationID) {
		t.Fatalf("create: %+v %v", created, r.header)
	}
	if cmds := a.runAll(t); len(cmds) != 1 || cmds[0].Operation != wire.CommandJobStop {
		t.Fatalf("commands after a stopped create: %+v", cmds)
	}
	th.waitJobConvergence(t, "j1", wire.ConvergenceInSync)
	// A second job goes to the other node: it has no job yet.
	r = th.op(t, "POST", "/jobs", `{"spec": `+testJobSpec("j2", 1, 128)+`, "desired_state": "stopped"}`, http.StatusAccepted)
	if got := decode[wire.JobDesiredResponse](t, r); got.NodeID != "n2" {
		t.Fatalf("second job placed on %s, want the least loaded n2", got.NodeID)
	}

	// Running: job_start carries the spec; in_sync once observed.
	th.op(t, "PUT", "/jobs/j1/desired-state", `{"state": "running"}`, http.StatusAccepted, "If-Match", `"generation-1"`)
	a.runAll(t)
	j := th.waitJobConvergence(t, "j1", wire.ConvergenceInSync)
	if j.Observed.State != wire.JobRunning || j.Desired.Generation != 2 {
		t.Fatalf("running job: %+v", j)
	}
	d := decode[wire.JobDetail](t, th.op(t, "GET", "/jobs/j1/detail", "", http.StatusOK))
	if d.TasksTotal < 2 || d.TasksObserved != 1 {
		t.Fatalf("detail: %+v", d)
	}
	for _, task := range d.Assignment {
		if (task.TaskID == "src#0") != task.Observed || (!task.Observed && task.State != wire.TaskNotObserved) {
			t.Fatalf("task %+v", task)
		}
	}

	// A checkpoint: pending, then completed with the node's artifact.
	ck := decode[wire.JobCommandResponse](t, th.op(t, "POST", "/jobs/j1/checkpoints", "", http.StatusAccepted))
	arts := decode[wire.Page[wire.JobArtifact]](t, th.op(t, "GET", "/jobs/j1/checkpoints", "", http.StatusOK))
	if len(arts.Items) != 1 || arts.Items[0].State != wire.ArtifactPending {
		t.Fatalf("checkpoints before the node answered: %+v", arts.Items)
	}
	a.runAll(t)
	eventually(t, "checkpoint completed", func() bool {
		arts = decode[wire.Page[wire.JobArtifact]](t, th.op(t, "GET", "/jobs/j1/checkpoints", "", http.StatusOK))
		return len(arts.Items) == 1 && arts.Items[0].State == wire.ArtifactCompleted && arts.Items[0].OperationID == ck.OperationID
	})
	evs := decode[wire.Page[wire.Event]](t, th.op(t, "GET", "/events?kind=checkpoint_completed", "", http.StatusOK))
	if len(evs.Items) != 1 || evs.Items[0].ResourceID != "j1" {
		t.Fatalf("checkpoint_completed events: %+v", evs.Items)
	}

	// Upgrades wait for a stopped, converged job.
	r = th.op(t, "POST", "/jobs/j1/upgrades", `{"spec": `+testJobSpec("j1", 2, 128)+`, "mode": "savepoint"}`, http.StatusConflict)
	if p := r.problem(t); p.Code != CodeJobMustBeStopped {
		t.Fatalf("upgrade of a running job: %+v", p)
	}
	// Strict refuses a stop without savepoint.
	th.op(t, "PUT", "/jobs/j1/desired-state", `{"state": "stopped"}`, http.StatusAccepted)
	a.runAll(t)
	th.waitJobConvergence(t, "j1", wire.ConvergenceInSync)
	r = th.op(t, "POST", "/jobs/j1/upgrades", `{"spec": `+testJobSpec("j1", 2, 128)+`, "mode": "savepoint", "strict": true}`, http.StatusConflict)
	if p := r.problem(t); p.Code != "savepoint_required" {
		t.Fatalf("strict upgrade without a stop savepoint: %+v", p)
	}
	// Started and stopped with a savepoint: strict takes it.
	th.op(t, "PUT", "/jobs/j1/desired-state", `{"state": "running"}`, http.StatusAccepted)
	a.runAll(t)
	th.waitJobConvergence(t, "j1", wire.ConvergenceInSync)
	stop := decode[wire.JobDesiredResponse](t, th.op(t, "PUT", "/jobs/j1/desired-state", `{"state": "stopped", "savepoint": true}`, http.StatusAccepted))
	a.runAll(t)
	th.waitJobConvergence(t, "j1", wire.ConvergenceInSync)
	sps := decode[wire.Page[wire.JobArtifact]](t, th.op(t, "GET", "/jobs/j1/savepoints", "", http.StatusOK))
	if len(sps.Items) != 1 || sps.Items[0].Trigger != wire.TriggerStop || sps.Items[0].OperationID != stop.OperationID {
		t.Fatalf("savepoints: %+v", sps.Items)
	}
	// Another max_parallelism cannot read the savepoint.
	r = th.op(t, "POST", "/jobs/j1/upgrades", `{"spec": `+testJobSpec("j1", 2, 256)+`, "mode": "savepoint", "strict": true}`, http.StatusConflict)
	if p := r.problem(t); p.Code != CodeStateFormatIncompatible || p.Details["field"] != "max_parallelism" {
		t.Fatalf("incompatible upgrade: %+v", p)
	}
	r = th.op(t, "POST", "/jobs/j1/upgrades", `{"spec": `+testJobSpec("j1", 2, 128)+`, "mode": "savepoint", "savepoint_id": 999}`, http.StatusNotFound)
	if p := r.problem(t); p.Code != CodeCheckpointNotFound {
		t.Fatalf("unknown savepoint: %+v", p)
	}
	up := decode[wire.JobDesiredResponse](t, th.op(t, "POST", "/jobs/j1/upgrades",
		`{"spec": `+testJobSpec("j1", 2, 128)+`, "mode": "savepoint", "strict": true, "desired_state": "running"}`, http.StatusAccepted))
	if up.Upgrade == nil || up.Upgrade.Restore == nil || up.Upgrade.Restore.ID != sps.Items[0].ID || up.Version != 2 {
		t.Fatalf("upgrade: %+v", up)
	}
	cmds := a.runAll(t)
	if len(cmds) != 1 || cmds[0].Payload.Recovery != wire.RecoveryArtifact || cmds[0].Payload.Restore == nil ||
		cmds[0].Payload.Restore.ID != sps.Items[0].ID || cmds[0].Payload.JobVersion != 2 {
		t.Fatalf("upgrade start: %+v", cmds)
	}
	th.waitJobConvergence(t, "j1", wire.ConvergenceInSync)
	vs := decode[wire.Page[wire.JobVersion]](t, th.op(t, "GET", "/jobs/j1/versions", "", http.StatusOK))
	if len(vs.Items) != 2 || !vs.Items[0].Current || vs.Items[0].Version != 2 || vs.Items[0].UpgradeID != up.Upgrade.UpgradeID {
		t.Fatalf("versions: %+v", vs.Items)
	}

	// Roll back: stop with a savepoint, back to version 1, nothing deleted.
	th.op(t, "PUT", "/jobs/j1/desired-state", `{"state": "stopped", "savepoint": true}`, http.StatusAccepted)
	a.runAll(t)
	th.waitJobConvergence(t, "j1", wire.ConvergenceInSync)
	rb := decode[wire.JobDesiredResponse](t, th.op(t, "POST", "/jobs/j1/upgrades/"+up.Upgrade.UpgradeID+"/rollback", "", http.StatusAccepted))
	if rb.Version != 1 {
		t.Fatalf("rollback: %+v", rb)
	}
	a.runAll(t)
	j = th.waitJobConvergence(t, "j1", wire.ConvergenceInSync)
	if j.Desired.Restore == nil || j.Desired.Restore.Recovery != wire.RecoveryArtifact {
		t.Fatalf("rolled back job restores %+v", j.Desired.Restore)
	}
	vs = decode[wire.Page[wire.JobVersion]](t, th.op(t, "GET", "/jobs/j1/versions", "", http.StatusOK))
	if len(vs.Items) != 2 || vs.Items[1].Version != 1 || !vs.Items[1].Current {
		t.Fatalf("versions after rollback: %+v", vs.Items)
	}
	th.op(t, "POST", "/jobs/j1/upgrades/"+up.Upgrade.UpgradeID+"/rollback", "", http.StatusConflict)

	// Restart converges only on the action id.
	th.op(t, "PUT", "/jobs/j1/desired-state", `{"state": "running"}`, http.StatusAccepted)
	a.runAll(t)
	th.waitJobConvergence(t, "j1", wire.ConvergenceInSync)
	rs := decode[wire.JobDesiredResponse](t, th.op(t, "POST", "/jobs/j1/actions/restart", "", http.StatusAccepted))
	if rs.ActionID == "" {
		t.Fatalf("restart: %+v", rs)
	}
	a.runAll(t)
	j = th.waitJobConvergence(t, "j1", wire.ConvergenceInSync)
	if j.Observed.ActionID != rs.ActionID {
		t.Fatalf("restart in sync without its action id: %+v", j)
	}

	// Move to n2: n1 gets a stop that never expires, at the new generation.
	mv := decode[wire.JobDesiredResponse](t, th.op(t, "POST", "/jobs/j1/actions/move", `{"node_id": "n2"}`, http.StatusAccepted))
	if mv.NodeID != "n2" {
		t.Fatalf("move: %+v", mv)
	}
	fence := a.commands(t, 5*time.Second)
	if len(fence) != 1 || fence[0].Operation != wire.CommandJobStop || fence[0].Generation != mv.Generation || fence[0].Payload.JobVersion != 1 {
		t.Fatalf("fence stop for the old node: %+v", fence)
	}
	if op := decode[wire.Operation](t, th.op(t, "GET", "/operations/"+fence[0].CommandID, "", http.StatusOK)); !op.ExpiresAt.IsZero() {
		t.Fatalf("the fence stop expires: %+v", op)
	}
	moved := b.runAll(t) // j2's stop too
	if i := slices.IndexFunc(moved, func(c wire.Command) bool { return c.ResourceID == "j1" }); i < 0 ||
		moved[i].Operation != wire.CommandJobStart || moved[i].Payload.Recovery != wire.RecoveryNewest {
		t.Fatalf("start on the new node: %+v", moved)
	}
	j = th.waitJobConvergence(t, "j1", wire.ConvergenceInSync)
	if j.NodeID != "n2" || j.Desired.Generation != mv.Generation {
		t.Fatalf("moved job: %+v", j)
	}

	got := th.auditOf(t, "j1")
	for _, want := range []string{"job_create/accepted/<nil>", "job_start/accepted/<nil>", "job_checkpoint/accepted/<nil>",
		"job_upgrade/rejected/job_must_be_stopped", "job_upgrade/rejected/state_format_incompatible", "job_upgrade/accepted/<nil>",
		"job_rollback/accepted/<nil>", "job_restart/accepted/<nil>", "job_move/accepted/<nil>"} {
		if !slices.Contains(got, want) {
			t.Errorf("audit lacks %s: %v", want, got)
		}
	}
}

func TestJobErrors(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	newJobAgent(t, th, "n1")
	th.op(t, "POST", "/jobs", `{"spec": `+testJobSpec("j1", 1, 128)+`, "desired_state": "stopped"}`, http.StatusAccepted)
	spec := testJobSpec("j1", 1, 128)
	cases := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		code                     string
		check                    func(t *testing.T, p wire.Problem)
	}{
		{name: "bad spec has every path", method: "POST", path: "/jobs", body: `{"spec": {"id": "x", "version": 0, "operators": [{"id": "a", "kind": "join"}]}, "desired_state": "stopped"}`,
			status: 422, code: "validation_failed", check: func(t *testing.T, p wire.Problem) {
				b, _ := json.Marshal(p.Details)
				for _, path := range []string{"spec.version", "spec.operators[0]"} {
					if !strings.Contains(string(b), `"path":"`+path) {
						t.Errorf("no problem at %s: %s", path, b)
					}
				}
			}},
		{name: "unknown field", method: "POST", path: "/jobs", body: `{"spec": ` + spec + `, "desired_state": "stopped", "nope": 1}`, status: 400, code: "invalid_json"},
		{name: "bad desired state", method: "POST", path: "/jobs", body: `{"spec": ` + spec + `, "desired_state": "paused"}`, status: 422, code: "validation_failed"},
		{name: "exists", method: "POST", path: "/jobs", body: `{"spec": ` + spec + `, "desired_state": "stopped"}`, status: 409, code: "conflict"},
		{name: "no capable node", method: "POST", path: "/jobs", body: `{"spec": ` + strings.Replace(testJobSpec("j9", 1, 128), `"drop"`, `"stdout"`, 1) + `, "desired_state": "stopped"}`,
			status: 409, code: "incompatible_capability"},
		{name: "bad node id", method: "POST", path: "/jobs", body: `{"spec": ` + spec + `, "desired_state": "stopped", "node_ids": ["a b"]}`, status: 422, code: "validation_failed"},
		{name: "validate needs nodes", method: "POST", path: "/jobs/validate", body: `{"spec": ` + spec + `}`, status: 422, code: "validation_failed"},
		{name: "unknown job", method: "GET", path: "/jobs/nope", status: 404, code: CodeJobNotFound},
		{name: "unknown job status", method: "GET", path: "/jobs/nope/status", status: 404, code: CodeJobNotFound},
		{name: "unknown job detail", method: "GET", path: "/jobs/nope/detail", status: 404, code: CodeJobNotFound},
		{name: "unknown job versions", method: "GET", path: "/jobs/nope/versions", status: 404, code: CodeJobNotFound},
		{name: "unknown job plan", method: "GET", path: "/jobs/nope/plan", status: 404, code: CodeJobNotFound},
		{name: "unknown job checkpoints", method: "GET", path: "/jobs/nope/checkpoints", status: 404, code: CodeJobNotFound},
		{name: "unknown job savepoints", method: "POST", path: "/jobs/nope/savepoints", status: 404, code: CodeJobNotFound},
		{name: "unknown job desired", method: "PUT", path: "/jobs/nope/desired-state", body: `{"state": "running"}`, status: 404, code: CodeJobNotFound},
		{name: "bad job id", method: "GET", path: "/jobs/a%20b", status: 422, code: "validation_failed"},
		{name: "stale if-match", method: "PUT", path: "/jobs/j1/desired-state", body: `{"state": "running"}`, hdr: []string{"If-Match", `"generation-7"`},
			status: 412, code: "generation_conflict", check: func(t *testing.T, p wire.Problem) {
				if res, _ := p.Details["resource"].(map[string]any); res["job_id"] != "j1" || p.Details["current_generation"] != float64(1) {
					t.Errorf("details %v", p.Details)
				}
			}},
		{name: "savepoint with running", method: "PUT", path: "/jobs/j1/desired-state", body: `{"state": "running", "savepoint": true}`, status: 422, code: "validation_failed"},
		{name: "bad state", method: "PUT", path: "/jobs/j1/desired-state", body: `{"state": "paused"}`, status: 422, code: "validation_failed"},
		{name: "checkpoint of a stopped job", method: "POST", path: "/jobs/j1/checkpoints", status: 409, code: "conflict"},
		{name: "unknown action", method: "POST", path: "/jobs/j1/actions/explode", status: 404, code: "not_found"},
		{name: "unknown upgrade", method: "POST", path: "/jobs/j1/upgrades/nope/rollback", status: 404, code: "not_found"},
		{name: "bad upgrade mode", method: "POST", path: "/jobs/j1/upgrades", body: `{"spec": ` + testJobSpec("j1", 2, 128) + `, "mode": "yolo"}`, status: 422, code: "validation_failed"},
		{name: "upgrade to the same version", method: "POST", path: "/jobs/j1/upgrades", body: `{"spec": ` + spec + `, "mode": "stateless"}`, status: 422, code: "validation_failed"},
		{name: "upgrade before convergence", method: "POST", path: "/jobs/j1/upgrades", body: `{"spec": ` + testJobSpec("j1", 2, 128) + `, "mode": "stateless"}`, status: 409, code: CodeJobMustBeStopped},
		{name: "wrong method", method: "DELETE", path: "/jobs/j1", status: 405, code: "method_not_allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := th.op(t, c.method, c.path, c.body, c.status, c.hdr...)
			p := r.problem(t)
			if p.Code != c.code {
				t.Fatalf("code %s, want %s: %s", p.Code, c.code, r.body)
			}
			if c.check != nil {
				c.check(t, p)
			}
		})
	}
	// Idempotency: the same key and body replays; another body conflicts.
	k := []string{"Idempotency-Key", "k1"}
	first := th.op(t, "PUT", "/jobs/j1/desired-state", `{"state": "stopped"}`, http.StatusAccepted, k...)
	again := th.op(t, "PUT", "/jobs/j1/desired-state", `{"state": "stopped"}`, http.StatusAccepted, k...)
	if again.header.Get("Idempotent-Replayed") != "true" || string(again.body) != string(first.body) {
		t.Fatalf("replay: %v %s", again.header, again.body)
	}
	if p := th.op(t, "PUT", "/jobs/j1/desired-state", `{"state": "running"}`, http.StatusConflict, k...).problem(t); p.Code != "idempotency_key_reused" {
		t.Fatalf("reused key: %+v", p)
	}
	// PUT desired-state is audited by its state, accepted or refused, as
	// the actions are; a state that is neither has a name of its own.
	got := th.auditOf(t, "j1")
	for _, want := range []string{"job_stop/accepted/<nil>", "job_start/rejected/generation_conflict", "job_start/rejected/validation_failed",
		"job_desired_state/rejected/validation_failed", "job_checkpoint/rejected/conflict"} {
		if !slices.Contains(got, want) {
			t.Errorf("audit lacks %s: %v", want, got)
		}
	}
}
