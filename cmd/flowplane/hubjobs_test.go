package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/hub"
	"github.com/flowplane/flowplane/internal/wire"
)

// The jobs test runs a real Hub and two real Agents as child processes, with
// the job's checkpoints in an S3 bucket both reach (gofakes3 on loopback), and
// takes one stateful job through the submit flow of spec rule 5, a
// checkpoint, a stop with savepoint, a refused and an accepted upgrade, the
// SIGKILL of the Agent that runs it and the operator's move to the other
// node, then checks the job's file output: every count of every user
// exactly once, from 1 up without a gap, across both versions and nodes.

// hubJobRecords is how many records the job's source generates: at 1,000
// a second it outlives every step of the test.
const hubJobRecords = 20000

// hubJobSpec is the job at version v: a generated stream of users, a
// running count per user (the state the savepoint and checkpoints carry)
// and an exactly-once file sink. Version 2 adds a map that tags its output.
func hubJobSpec(v int, out, store string) string {
	tag := ""
	edges := `[{"from": "events", "to": "counts", "partitioned": true}, {"from": "counts", "to": "files"}]`
	if v > 1 {
		tag = fmt.Sprintf(`, {"id": "tag", "kind": "map", "config": {"expression": "{\"key\": this.key, \"n\": this.n, \"v\": %d}"}}`, v)
		edges = `[{"from": "events", "to": "counts", "partitioned": true}, {"from": "counts", "to": "tag"}, {"from": "tag", "to": "files"}]`
	}
	return fmt.Sprintf(`{
  "id": "user-counts", "version": %d, "parallelism": 1,
  "operators": [{"id": "events", "kind": "source"},
    {"id": "counts", "kind": "aggregate", "config": {"key": "this.user", "aggregations": [{"name": "n", "function": "count"}]}}%s,
    {"id": "files", "kind": "sink"}],
  "edges": %s,
  "sources": [{"operator_id": "events", "input_type": "generate",
    "config": {"context": "{\"user\": \"u{{random:5}}\"}", "seed": 11, "count": %d, "interval": "10ms", "batch_size": 10}}],
  "sinks": [{"operator_id": "files", "output_type": "file", "config": {"path": %q}}],
  "state": {"backend": "embedded_kv"},
  "checkpoint": {"interval_ms": 300, "retention": 3, "object_store_uri": %q}
}`, v, tag, edges, hubJobRecords, out, store)
}

// newJobNode writes an Agent's configuration: no streams, a short lease so
// that its loss shows soon.
func newJobNode(t *testing.T, dir, id string, hubURL string) *fleetNode {
	t.Helper()
	n := &fleetNode{owner: t, id: id, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), conf: filepath.Join(dir, id+".yaml"), state: filepath.Join(dir, id)}
	conf := fmt.Sprintf("logging: {level: info}\nhealth_check:\n  address: %q\n  hub_urls: [%q]\n  node_id: %s\n  node_token: \"${env:%s}\"\n  agent_lease_ttl_ms: 2000\n%sstreams: []\n",
		n.addr, hubURL, id, hub.EnvNodeToken, tempRootsPolicy())
	if err := os.WriteFile(n.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return n
}

// job reads a job's view.
func (h *fleetHub) job(t *testing.T, id string) wire.Job {
	t.Helper()
	var j wire.Job
	h.call(t, "GET", "/jobs/"+id, "", http.StatusOK, &j)
	return j
}

// waitJob waits until the job's view satisfies cond.
func (h *fleetHub) waitJob(t *testing.T, id, what string, cond func(wire.Job) bool) wire.Job {
	t.Helper()
	var j wire.Job
	deadline := time.Now().Add(60 * time.Second) // a moved job regenerates from its checkpoint at a fixed rate: slow under -race on a loaded machine
	for {
		j = h.job(t, id)
		if cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			h.dumpEvents(t)
			t.Fatalf("job %s: %s: not reached; view %+v", id, what, j)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// inSync waits for the job's convergence_changed in_sync event at gen on
// the SSE stream.
func inSync(t *testing.T, h *fleetHub, sse <-chan wire.Event, id string, gen int64) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-sse:
			if !ok {
				t.Fatal("SSE stream ended")
			}
			if e.Kind == wire.EventConvergenceChanged && e.ResourceID == id && e.Data["convergence"] == wire.ConvergenceInSync &&
				e.Data["generation"] == float64(gen) {
				return
			}
		case <-timeout:
			h.dumpEvents(t)
			t.Fatalf("job %s: no in_sync at generation %d on SSE", id, gen)
		}
	}
}

// waitEvent waits for the first event of kind about id on the SSE stream.
func waitEvent(t *testing.T, h *fleetHub, sse <-chan wire.Event, kind, id string) wire.Event {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-sse:
			if !ok {
				t.Fatal("SSE stream ended")
			}
			if e.Kind == kind && e.ResourceID == id {
				return e
			}
		case <-timeout:
			h.dumpEvents(t)
			t.Fatalf("no %s event for %s on SSE", kind, id)
		}
	}
}

// waitOperation waits until an operation finished and returns it.
func (h *fleetHub) waitOperation(t *testing.T, id string) fleetOperation {
	t.Helper()
	var op fleetOperation
	waitUntil(t, "operation "+id+" to finish", func() bool {
		op = h.operation(t, id)
		return op.State == wire.OpSucceeded || op.State == wire.OpFailed || op.State == wire.OpCancelled
	})
	return op
}

// countLines reads every committed part file under dir: the count records
// of each user in file order (files ordered by name: by checkpoint).
func countLines(t *testing.T, dir string) map[string][]int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	out := map[string][]int{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			var rec struct {
				Key string `json:"key"`
				N   int    `json:"n"`
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatalf("%s: %v: %q", f, err, sc.Text())
			}
			out[rec.Key] = append(out[rec.Key], rec.N)
		}
		fh.Close()
	}
	return out
}

// checkCounts checks that every user's counts are 1..n exactly once, in
// order, and returns the total.
func checkCounts(t *testing.T, counts map[string][]int) int {
	t.Helper()
	total := 0
	for user, ns := range counts {
		sorted := slices.Clone(ns)
		slices.Sort(sorted)
		for i, n := range sorted {
			if n != i+1 {
				t.Fatalf("user %s: counts %v are not 1..%d exactly once (at %d: %d)", user, first(toStrings(sorted), 20), len(sorted), i, n)
			}
		}
		total += len(ns)
	}
	return total
}

func toStrings(ns []int) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = fmt.Sprint(n)
	}
	return out
}

func TestHubJobs(t *testing.T) {
	t.Parallel() // independent: own ports, own directories, own processes
	if testing.Short() {
		t.Skip("starts a Hub and two Agents")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out", "counts.jsonl")
	s3 := slowS3(t, 0) // shared: a checkpoint one node wrote, the other restores
	store := s3.uri
	h := startFleetHub(t, dir)
	a := newJobNode(t, dir, "node-a", h.url())
	b := newJobNode(t, dir, "node-b", h.url())
	a.env, b.env = s3.env, s3.env
	a.start(t)
	b.start(t)
	h.waitStatus(t, "node-a", "online")
	h.waitStatus(t, "node-b", "online")
	sse := h.subscribe(t, "resource_id=user-counts")
	v1 := hubJobSpec(1, out, store)

	// 1. Validate against both nodes; create stopped; plan and detail.
	var val wire.JobValidateResponse
	h.call(t, "POST", "/jobs/validate", `{"spec": `+v1+`, "node_ids": ["node-a", "node-b"]}`, http.StatusOK, &val)
	if !val.Valid || len(val.Nodes) != 2 || len(val.Operations) != 2 {
		t.Fatalf("validate: %+v", val)
	}
	for node, opID := range val.Operations {
		op := h.waitOperation(t, opID)
		var rep wire.JobValidation
		if op.State != wire.OpSucceeded || json.Unmarshal(op.Result, &rep) != nil || !rep.Valid || rep.NodeID != node {
			t.Fatalf("validate on %s: %+v (result %s)", node, op, op.Result)
		}
	}
	if n := len(h.jobsList(t)); n != 0 {
		t.Fatalf("validate created %d jobs", n)
	}
	var created wire.JobDesiredResponse
	h.call(t, "POST", "/jobs", `{"spec": `+v1+`, "desired_state": "stopped", "node_ids": ["node-a"]}`, http.StatusAccepted, &created)
	if created.NodeID != "node-a" || created.Generation != 1 || created.Version != 1 {
		t.Fatalf("create: %+v", created)
	}
	inSync(t, h, sse, "user-counts", 1)
	var plan map[string]any
	h.call(t, "GET", "/jobs/user-counts/plan", "", http.StatusOK, &plan)
	if plan["job_id"] != "user-counts" || plan["max_parallelism"] != float64(128) {
		t.Fatalf("plan: %v", plan)
	}
	var detail wire.JobDetail
	h.call(t, "GET", "/jobs/user-counts/detail", "", http.StatusOK, &detail)
	if detail.TasksTotal == 0 || detail.TasksObserved != 0 {
		t.Fatalf("detail of a stopped job: %+v", detail)
	}
	for _, task := range detail.Assignment {
		if task.Observed || task.State != wire.TaskNotObserved || task.NodeID != "node-a" {
			t.Fatalf("task of a stopped job: %+v", task)
		}
	}

	// 2. Running, in_sync on SSE; a checkpoint, listed.
	var run wire.JobDesiredResponse
	h.call(t, "PUT", "/jobs/user-counts/desired-state", `{"state": "running"}`, http.StatusAccepted, &run)
	inSync(t, h, sse, "user-counts", run.Generation)
	h.call(t, "GET", "/jobs/user-counts/detail", "", http.StatusOK, &detail)
	if detail.TasksObserved != detail.TasksTotal || detail.WatermarkLagMS == nil {
		t.Fatalf("detail of a running job: %+v", detail)
	}
	var ck wire.JobCommandResponse
	h.call(t, "POST", "/jobs/user-counts/checkpoints", "", http.StatusAccepted, &ck)
	done := waitEvent(t, h, sse, wire.EventCheckpointCompleted, "user-counts")
	if done.OperationID != ck.OperationID {
		// A periodic checkpoint may complete first; wait for ours.
		for done.OperationID != ck.OperationID {
			done = waitEvent(t, h, sse, wire.EventCheckpointCompleted, "user-counts")
		}
	}
	var cks wire.Page[wire.JobArtifact]
	h.call(t, "GET", "/jobs/user-counts/checkpoints", "", http.StatusOK, &cks)
	if !slices.ContainsFunc(cks.Items, func(a wire.JobArtifact) bool {
		return a.OperationID == ck.OperationID && a.State == wire.ArtifactCompleted && a.ID > 0 && a.JobVersion == 1
	}) {
		t.Fatalf("checkpoints: %+v", cks.Items)
	}

	// 3. An upgrade is refused while the job runs; stop with a savepoint;
	// the strict savepoint upgrade is accepted; started, counts continue.
	v2 := hubJobSpec(2, out, store)
	status, err := h.try("POST", "/jobs/user-counts/upgrades", `{"spec": `+v2+`, "mode": "savepoint", "strict": true}`, nil)
	if status != http.StatusConflict || !strings.Contains(fmt.Sprint(err), hub.CodeJobMustBeStopped) {
		t.Fatalf("upgrade of a running job: %d %v", status, err)
	}
	var stop wire.JobDesiredResponse
	h.call(t, "PUT", "/jobs/user-counts/desired-state", `{"state": "stopped", "savepoint": true}`, http.StatusAccepted, &stop)
	inSync(t, h, sse, "user-counts", stop.Generation)
	var sps wire.Page[wire.JobArtifact]
	h.call(t, "GET", "/jobs/user-counts/savepoints", "", http.StatusOK, &sps)
	if len(sps.Items) == 0 || sps.Items[0].Trigger != wire.TriggerStop || sps.Items[0].OperationID != stop.OperationID {
		t.Fatalf("savepoints after a stop with savepoint: %+v", sps.Items)
	}
	beforeUpgrade := checkCounts(t, countLines(t, filepath.Dir(out)))
	var up wire.JobDesiredResponse
	h.call(t, "POST", "/jobs/user-counts/upgrades", `{"spec": `+v2+`, "mode": "savepoint", "strict": true}`, http.StatusAccepted, &up)
	if up.Upgrade == nil || up.Upgrade.Restore == nil || up.Upgrade.Restore.ID != sps.Items[0].ID || up.Version != 2 {
		t.Fatalf("upgrade: %+v", up)
	}
	inSync(t, h, sse, "user-counts", up.Generation)
	var start wire.JobDesiredResponse
	h.call(t, "PUT", "/jobs/user-counts/desired-state", `{"state": "running"}`, http.StatusAccepted, &start)
	inSync(t, h, sse, "user-counts", start.Generation)
	j := h.waitJob(t, "user-counts", "restored from the savepoint", func(j wire.Job) bool {
		return j.Observed.Version == 2 && j.Observed.RestoredFrom != ""
	})
	if !strings.Contains(j.Observed.RestoredFrom, fmt.Sprint(sps.Items[0].ID)) {
		t.Fatalf("restored from %q, want savepoint %d", j.Observed.RestoredFrom, sps.Items[0].ID)
	}
	// Wait for version 2 output past a checkpoint: its counts continue.
	waitUntil(t, "version 2 output", func() bool {
		return checkCounts(t, countLines(t, filepath.Dir(out))) > beforeUpgrade+200
	})
	var vs wire.Page[wire.JobVersion]
	h.call(t, "GET", "/jobs/user-counts/versions", "", http.StatusOK, &vs)
	if len(vs.Items) != 2 || vs.Items[0].Version != 2 || !vs.Items[0].Current {
		t.Fatalf("versions: %+v", vs.Items)
	}

	// 4. SIGKILL the Agent that runs it; the job degrades; move it; it
	// resumes from the newest checkpoint on the other node.
	a.kill(t)
	h.waitJob(t, "user-counts", "degraded after its node was lost", func(j wire.Job) bool {
		return j.Convergence == wire.ConvergenceDegraded && j.ConvergenceReason == "node_lost"
	})
	var moved wire.JobDesiredResponse
	h.call(t, "POST", "/jobs/user-counts/actions/move", "", http.StatusAccepted, &moved)
	if moved.NodeID != "node-b" {
		t.Fatalf("move: %+v", moved)
	}
	inSync(t, h, sse, "user-counts", moved.Generation)
	// The old node comes back: the fence keeps it from running the job.
	a.start(t)
	h.waitStatus(t, "node-a", "online")
	moved2 := h.waitJob(t, "user-counts", "completed on node-b", func(j wire.Job) bool {
		return j.NodeID == "node-b" && j.Observed.State == wire.JobCompleted
	})
	t.Logf("moved to node-b: restored from %s", moved2.Observed.RestoredFrom)
	counts := countLines(t, filepath.Dir(out))
	if total := checkCounts(t, counts); total != hubJobRecords {
		t.Fatalf("%d count records, want %d (one per generated record)", total, hubJobRecords)
	}
	var ops wire.Page[wire.Operation]
	h.call(t, "GET", "/operations?node_id=node-a&operation=job_stop&page_size=10", "", http.StatusOK, &ops)
	i := slices.IndexFunc(ops.Items, func(o wire.Operation) bool { return o.Generation == moved.Generation })
	if i < 0 {
		t.Fatalf("no fence stop for node-a at generation %d: %+v", moved.Generation, ops.Items)
	}
	if op := h.waitOperation(t, ops.Items[i].OperationID); op.State != wire.OpSucceeded {
		t.Fatalf("the fence stop did not reach the returning node: %+v", op)
	}
	// Losing the job to node-b is no failure of node-a: it stays healthy,
	// and the job, where it still shows, is not failed.
	waitUntil(t, "node-a healthy after its fence", func() bool {
		var p struct{ Status string }
		st, err := getJSONStatus(a.base()+"/health", &p)
		return err == nil && st == http.StatusOK && p.Status == "healthy"
	})
	var old struct {
		State  string
		Fenced bool
	}
	if st, err := getJSONStatus(a.base()+"/jobs/user-counts", &old); st != http.StatusNotFound && (err != nil || old.State == wire.JobFailed) {
		t.Errorf("the job on node-a after its fence: %d %+v (%v)", st, old, err)
	}
	var audit wire.Page[map[string]any]
	h.call(t, "GET", "/audit?resource_id=user-counts&page_size=100", "", http.StatusOK, &audit)
	var actions []string
	for _, r := range audit.Items {
		actions = append(actions, fmt.Sprint(r["action"], "/", r["outcome"]))
	}
	for _, want := range []string{"job_create/accepted", "job_checkpoint/accepted", "job_upgrade/rejected", "job_upgrade/accepted", "job_move/accepted"} {
		if !slices.Contains(actions, want) {
			t.Fatalf("audit lacks %s: %v", want, actions)
		}
	}
}

// jobsList reads GET /jobs.
func (h *fleetHub) jobsList(t *testing.T) []wire.Job {
	t.Helper()
	var p wire.Page[wire.Job]
	h.call(t, "GET", "/jobs?page_size=100", "", http.StatusOK, &p)
	return p.Items
}
