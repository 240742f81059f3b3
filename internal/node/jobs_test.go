package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/secretref"
	"github.com/flowplane/flowplane/internal/wire"
)

// countJob is a job section: a keyed running count over an unbounded
// generate source into drop, checkpointed to a file:// store under dir
// (no checkpoint section when dir is empty).
func countJob(id, dir string) string {
	ckpt := ""
	if dir != "" {
		ckpt = `
    checkpoint: {interval_ms: 60000, object_store_uri: "file://` + dir + `"}`
	}
	state := "{backend: embedded_kv, durability: ephemeral}"
	if dir != "" {
		state = "{backend: embedded_kv, durability: durable}"
	}
	return `
  - id: ` + id + `
    version: 1
    operators:
      - {id: src, kind: source}
      - {id: counts, kind: aggregate, config: {key: this.k, aggregations: [{name: n, function: count}]}}
      - {id: out, kind: sink}
    edges: [{from: src, to: counts, partitioned: true}, {from: counts, to: out}]
    sources: [{operator_id: src, input_type: generate, config: {context: '{"k": "{{random:5}}"}', interval: 2ms}}]
    sinks: [{operator_id: out, output_type: drop}]
    state: ` + state + ckpt + `
`
}

// job fetches one job's view.
func (h *harness) job(t *testing.T, id string) node.JobView {
	t.Helper()
	return decode[node.JobView](t, h.expect(t, 200, "GET", "/jobs/"+id, ""))
}

// waitJob polls a job until cond holds of its view.
func (h *harness) waitJob(t *testing.T, id, what string, cond func(node.JobView) bool) node.JobView {
	t.Helper()
	var v node.JobView
	eventually(t, "job "+id+" "+what, func() (bool, string) {
		v = h.job(t, id)
		return cond(v), fmt.Sprintf("%s %+v", v.State, v)
	})
	return v
}

// jobAction posts a job action and waits for its operation to succeed.
func (h *harness) jobAction(t *testing.T, path, body string) wire.Operation {
	t.Helper()
	op := decode[wire.Operation](t, h.expect(t, 202, "POST", path, body))
	return h.succeed(t, op.OperationID)
}

// artifactOf is an operation's result as an artifact.
func artifactOf(t *testing.T, op wire.Operation) wire.JobArtifact {
	t.Helper()
	b, _ := json.Marshal(op.Result)
	var a wire.JobArtifact
	if err := json.Unmarshal(b, &a); err != nil || a.ID < 1 {
		t.Fatalf("%s result %s is no artifact (%v)", op.Operation, b, err)
	}
	return a
}

// TestJobLifecycle watches, checkpoints, savepoints, stops (with a
// savepoint) and starts a standalone job through the Node API, as
// docs/jobs.md walks it: the start from latest_savepoint restores the
// savepoint the stop took.
func TestJobLifecycle(t *testing.T) {
	store := t.TempDir()
	h := newHarness(t, doc("", genStream("s", "s"))+"jobs:"+countJob("counts", store))

	jobs := decode[wire.Page[node.JobView]](t, h.expect(t, 200, "GET", "/jobs", ""))
	if jobs.Total != 1 || jobs.Items[0].ID != "counts" {
		t.Fatalf("GET /jobs = %+v", jobs)
	}
	v := h.waitJob(t, "counts", "running with records in and out", func(v node.JobView) bool {
		return v.State == "running" && v.RecordsIn > 0 && v.RecordsOut > 0
	})
	if v.Authority != node.AuthorityNode || v.Placement != wire.PlacementColocated || !v.Checkpointing || len(v.Tasks) == 0 || v.NodeID != testNodeID {
		t.Errorf("job view %+v", v)
	}
	for _, task := range v.Tasks {
		if task.State == "" || task.ID == "" {
			t.Errorf("task %+v", task)
		}
	}
	plan := decode[engine.JobExplanation](t, h.expect(t, 200, "GET", "/jobs/counts/plan", ""))
	if plan.JobID != "counts" || len(plan.Chains) == 0 || plan.Checkpoint == nil {
		t.Errorf("plan %+v", plan)
	}

	// A bodiless POST, as curl -X POST sends it.
	cp := artifactOf(t, h.jobAction(t, "/jobs/counts/checkpoints", ""))
	if cp.Kind != wire.ArtifactCheckpoint || cp.JobID != "counts" || !strings.HasPrefix(cp.Location, "file://"+store) {
		t.Errorf("checkpoint %+v", cp)
	}
	if got := h.job(t, "counts").LastCheckpoint; got < cp.ID {
		t.Errorf("last_checkpoint %d, want at least %d", got, cp.ID)
	}
	cps := decode[wire.Page[wire.JobArtifact]](t, h.expect(t, 200, "GET", "/jobs/counts/checkpoints", ""))
	if cps.Total < 1 || cps.Items[0].ID != cp.ID {
		t.Errorf("checkpoints %+v, want %d newest", cps, cp.ID)
	}
	// Idempotency-Key replays the first answer: one savepoint, not two.
	first := decode[wire.Operation](t, h.expect(t, 202, "POST", "/jobs/counts/savepoints", "", "Idempotency-Key", "sp-1"))
	again := decode[wire.Operation](t, h.expect(t, 202, "POST", "/jobs/counts/savepoints", "", "Idempotency-Key", "sp-1"))
	if again.OperationID != first.OperationID {
		t.Errorf("a replayed savepoint request made operation %s, want %s", again.OperationID, first.OperationID)
	}
	sp := artifactOf(t, h.succeed(t, first.OperationID))
	if sp.Kind != wire.ArtifactSavepoint || sp.ID <= cp.ID {
		t.Errorf("savepoint %+v after checkpoint %d", sp, cp.ID)
	}

	// Stop with a savepoint, then start from it.
	final := artifactOf(t, h.jobAction(t, "/jobs/counts/stop", `{"savepoint": true}`))
	if final.Kind != wire.ArtifactSavepoint || final.ID <= sp.ID {
		t.Errorf("stop's savepoint %+v after %d", final, sp.ID)
	}
	if v := h.job(t, "counts"); v.State != "stopped" {
		t.Errorf("after the stop: %s", v.State)
	}
	sps := decode[wire.Page[wire.JobArtifact]](t, h.expect(t, 200, "GET", "/jobs/counts/savepoints", ""))
	if sps.Total != 2 || sps.Items[0].ID != final.ID {
		t.Errorf("savepoints %+v, want %d then %d", sps.Items, final.ID, sp.ID)
	}
	// A stopped job is where its operator wants it: the node stays
	// healthy and ready.
	h.expect(t, 200, "GET", "/health", "")
	h.expect(t, 200, "GET", "/readiness", "")

	h.jobAction(t, "/jobs/counts/start", `{"recovery": "latest_savepoint"}`)
	v = h.waitJob(t, "counts", "running from the stop's savepoint", func(v node.JobView) bool { return v.State == "running" })
	if want := "savepoint " + strconv.FormatInt(final.ID, 10); v.RestoredFrom != want {
		t.Errorf("restored from %q, want %q", v.RestoredFrom, want)
	}
	if v.LatestOperation == nil || v.LatestOperation.Operation != node.OpJobStart || v.LatestOperation.Convergence != wire.ConvergenceInSync {
		t.Errorf("latest operation %+v", v.LatestOperation)
	}

	// A restart from the newest checkpoint stops and starts the job again.
	h.jobAction(t, "/jobs/counts/restart", `{"recovery": "latest_checkpoint"}`)
	h.waitJob(t, "counts", "running after the restart", func(v node.JobView) bool {
		return v.State == "running" && strings.HasPrefix(v.RestoredFrom, "checkpoint ")
	})
	ops := decode[wire.Page[wire.Operation]](t, h.expect(t, 200, "GET", "/operations?resource_id=counts", ""))
	if ops.Total != 5 {
		t.Errorf("operations on the job: %d, want 5 (checkpoint, savepoint, stop, start, restart)", ops.Total)
	}
}

// TestJobRouteErrors: the job routes' problems, each with its code.
func TestJobRouteErrors(t *testing.T) {
	h := newHarness(t, doc(secured, genStream("s", "s"))+"jobs:"+countJob("counts", t.TempDir())+countJob("plain", ""))
	h.token = testToken
	h.waitJob(t, "counts", "running", func(v node.JobView) bool { return v.State == "running" })
	h.waitJob(t, "plain", "running", func(v node.JobView) bool { return v.State == "running" })
	cases := []struct {
		name, method, path, body string
		header                   []string
		status                   int
		code                     string
	}{
		{"unknown job", "GET", "/jobs/nope", "", nil, 404, "job_not_found"},
		{"unknown job plan", "GET", "/jobs/nope/plan", "", nil, 404, "job_not_found"},
		{"unknown job checkpoints", "GET", "/jobs/nope/checkpoints", "", nil, 404, "job_not_found"},
		{"unknown job stop", "POST", "/jobs/nope/stop", "", nil, 404, "job_not_found"},
		{"unknown job savepoint", "POST", "/jobs/nope/savepoints", "", nil, 404, "job_not_found"},
		{"no token", "GET", "/jobs", "", []string{"Authorization", ""}, 401, "unauthorized"},
		{"wrong token", "POST", "/jobs/counts/stop", "", []string{"Authorization", "Bearer wrong"}, 401, "unauthorized"},
		{"not JSON", "POST", "/jobs/counts/stop", `{"savepoint": true}`, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
		{"malformed body", "POST", "/jobs/counts/stop", `{"savepoint": `, nil, 400, "invalid_json"},
		{"wrong type", "POST", "/jobs/counts/stop", `{"savepoint": "yes"}`, nil, 400, "invalid_json"},
		{"unknown field", "POST", "/jobs/counts/start", `{"mode": "savepoint"}`, nil, 400, "invalid_json"},
		{"body on checkpoint", "POST", "/jobs/counts/checkpoints", `{"now": true}`, nil, 400, "invalid_json"},
		{"unknown recovery", "POST", "/jobs/counts/start", `{"recovery": "newest_please"}`, nil, 422, "validation_failed"},
		{"recovery of a running job", "POST", "/jobs/counts/start", `{"recovery": "none"}`, nil, 409, "job_running"},
		{"checkpoint without checkpointing", "POST", "/jobs/plain/checkpoints", "", nil, 409, "no_checkpointing"},
		{"stop with a savepoint without checkpointing", "POST", "/jobs/plain/stop", `{"savepoint": true}`, nil, 409, "no_checkpointing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := h.expect(t, c.status, c.method, c.path, c.body, c.header...)
			problem(t, r, c.code)
		})
	}
	// A stopped job takes no checkpoint or savepoint.
	h.jobAction(t, "/jobs/counts/stop", "")
	for _, path := range []string{"/jobs/counts/checkpoints", "/jobs/counts/savepoints"} {
		problem(t, h.expect(t, 409, "POST", path, ""), "job_not_running")
	}
	problem(t, h.expect(t, 409, "POST", "/jobs/counts/stop", `{"savepoint": true}`), "job_not_running")
	// Without checkpointing there are no artifacts, and no error.
	if p := decode[wire.Page[wire.JobArtifact]](t, h.expect(t, 200, "GET", "/jobs/plain/checkpoints", "")); p.Total != 0 {
		t.Errorf("artifacts of a job without checkpointing: %+v", p)
	}
}

// TestHubJobReadOnly: a job the Hub placed on a managed node shows in the
// Node API with authority hub, and every write to it is refused: the Hub
// fences its placements, and a local start or stop would run around them.
func TestHubJobReadOnly(t *testing.T) {
	h := newHarness(t, doc("", genStream("s", "s"))+"jobs:"+countJob("mine", ""))
	c, err := config.Materialize([]byte("streams: []\njobs:"+countJob("placed", t.TempDir())), config.YAML, component.Default, secretref.Resolver{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.eng.StartHubJob(context.Background(), engine.HubJob{Spec: c.Jobs[0], Generation: 3}); err != nil {
		t.Fatal(err)
	}
	v := h.waitJob(t, "placed", "running", func(v node.JobView) bool { return v.State == "running" })
	if v.Authority != node.AuthorityHub {
		t.Errorf("authority %q, want hub", v.Authority)
	}
	for _, path := range []string{"/jobs/placed/stop", "/jobs/placed/start", "/jobs/placed/restart", "/jobs/placed/checkpoints", "/jobs/placed/savepoints"} {
		problem(t, h.expect(t, 409, "POST", path, ""), "job_managed_by_hub")
	}
	h.expect(t, 200, "GET", "/jobs/placed/plan", "")
	h.expect(t, 200, "GET", "/jobs/placed/checkpoints", "")
	// The node's own jobs stay the node's to change, as its streams are.
	if v := h.job(t, "mine"); v.Authority != node.AuthorityNode {
		t.Errorf("configured job's authority %q", v.Authority)
	}
	h.jobAction(t, "/jobs/mine/stop", "")
	if v := h.job(t, "placed"); v.State != "running" {
		t.Errorf("the Hub's job is %s after a refused stop", v.State)
	}
}

// TestFencedJobIsNoFailure: a job a newer placement took over (here: an
// older generation started after a newer one) reads stopped and fenced,
// with its last_error, and the node stays healthy and ready.
func TestFencedJobIsNoFailure(t *testing.T) {
	h := newHarness(t, doc("", genStream("s", "s")))
	c, err := config.Materialize([]byte("streams: []\njobs:"+countJob("moved", t.TempDir())), config.YAML, component.Default, secretref.Resolver{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := h.eng.StartHubJob(ctx, engine.HubJob{Spec: c.Jobs[0], Generation: 5}); err != nil {
		t.Fatal(err)
	}
	h.waitJob(t, "moved", "running at generation 5", func(v node.JobView) bool { return v.State == "running" })
	if err := h.eng.StartHubJob(ctx, engine.HubJob{Spec: c.Jobs[0], Generation: 4, Recovery: engine.RecoverNewest}); err != nil {
		t.Fatal(err)
	}
	v := h.waitJob(t, "moved", "fenced", func(v node.JobView) bool { return v.Fenced })
	if v.State != "stopped" || !strings.Contains(v.LastError, "fenced") {
		t.Errorf("fenced job reads %s, last_error %q; want stopped with the fence", v.State, v.LastError)
	}
	health := decode[node.Probe](t, h.expect(t, 200, "GET", "/health", ""))
	if health.Status != "healthy" || len(health.Failed) > 0 {
		t.Errorf("health %+v", health)
	}
	h.expect(t, 200, "GET", "/readiness", "")
	if st := decode[node.Status](t, h.expect(t, 200, "GET", "/status", "")); st.Jobs.Failed != 0 || st.Jobs.Stopped != 1 {
		t.Errorf("status jobs %+v", st.Jobs)
	}
}
