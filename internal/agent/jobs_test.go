package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/agent"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/state"
	"github.com/flowplane/flowplane/internal/wire"
)

// hubJobSpec is a keyed running count over endless generated records into
// a file sink, checkpointed into dir/artifacts, as the Hub sends it.
func hubJobSpec(t testing.TB, id, dir string, edit func(map[string]any)) json.RawMessage {
	t.Helper()
	spec := map[string]any{
		"id": id, "version": 1,
		"operators": []any{
			map[string]any{"id": "src", "kind": "source"},
			map[string]any{"id": "counts", "kind": "aggregate", "config": map[string]any{"key": "this.k", "aggregations": []any{map[string]any{"name": "n", "function": "count"}}}},
			map[string]any{"id": "out", "kind": "sink"},
		},
		"edges": []any{map[string]any{"from": "src", "to": "counts"}, map[string]any{"from": "counts", "to": "out"}},
		"sources": []any{map[string]any{"operator_id": "src", "input_type": "generate",
			"config": map[string]any{"context": `{"k": "k{{random:3}}"}`, "seed": 1, "interval": "5ms", "count": 0, "batch_size": 10}}},
		"sinks":      []any{map[string]any{"operator_id": "out", "output_type": "file", "config": map[string]any{"path": dir + "/out/counts.jsonl"}}},
		"state":      map[string]any{"backend": "embedded_kv"},
		"checkpoint": map[string]any{"interval_ms": 100000, "retention": 2, "object_store_uri": "file://" + dir + "/artifacts"},
	}
	if edit != nil {
		edit(spec)
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jobCmd(id, attempt, op, job string, gen int64, p wire.JobCommand) wire.Command {
	return wire.Command{CommandID: id, AttemptID: attempt, Operation: op, NodeID: testNodeID, ResourceID: job, Generation: gen,
		ActionID: "act-" + id, Payload: wire.CommandPayload{JobCommand: p}}
}

// waitJobObs waits for a job-observations body whose job id satisfies
// cond and returns that observation.
func (h *testHub) waitJobObs(t testing.TB, id, what string, cond func(wire.JobObservation) bool) wire.JobObservation {
	t.Helper()
	var got wire.JobObservation
	h.waitFor(t, "job observation of "+id+" "+what, func() bool {
		for i := len(h.jobObs) - 1; i >= 0; i-- {
			for _, o := range h.jobObs[i].Jobs {
				if o.ID == id && cond(o) {
					got = o
					return true
				}
			}
		}
		return false
	})
	return got
}

func succeeded(t *testing.T, r result) {
	t.Helper()
	if r.State != wire.ResultSucceeded {
		t.Fatalf("command %s: %s, failure %+v", r.CommandID, r.State, r.Failure)
	}
}

func artifactResult(t *testing.T, r result) wire.JobArtifact {
	t.Helper()
	succeeded(t, r)
	var a wire.JobArtifact
	if err := json.Unmarshal(r.Result, &a); err != nil {
		t.Fatalf("result %s: %v", r.Result, err)
	}
	return a
}

// TestJobCommands drives one Hub job through start, checkpoint (and its
// redelivery), stop with savepoint, a fence stop of a job the node does
// not know, and an invalid spec.
func TestJobCommands(t *testing.T) {
	hub := newTestHub(t, testNodeToken)
	dir := t.TempDir()
	stateDir := t.TempDir()
	tn := startNode(t, nodeOptions{stateDir: stateDir, hubURLs: []string{hub.URL + "/api/v1"}, jobs: true})
	hub.waitFor(t, "register", func() bool { return len(hub.registers) > 0 })
	hub.mu.Lock()
	caps := hub.registers[0].Capabilities
	hub.mu.Unlock()
	if !slices.Contains(caps, wire.CapabilityJobControl) {
		t.Errorf("capabilities %v lack %s", caps, wire.CapabilityJobControl)
	}

	spec := hubJobSpec(t, "counts", dir, nil)
	hub.enqueue(jobCmd("c-start", "a1", wire.CommandJobStart, "counts", 1, wire.JobCommand{Spec: spec, JobVersion: 1}))
	succeeded(t, hub.waitFinal(t, "c-start", "a1"))
	o := hub.waitJobObs(t, "counts", "running at generation 1", func(o wire.JobObservation) bool {
		return o.State == wire.JobRunning && o.Generation == 1
	})
	if o.Version != 1 || o.ActionID != "act-c-start" || len(o.Tasks) == 0 {
		t.Errorf("observation %+v: want version 1, action act-c-start, tasks", o)
	}

	hub.enqueue(jobCmd("c-ckpt", "a1", wire.CommandJobCheckpoint, "counts", 1, wire.JobCommand{}))
	cp := artifactResult(t, hub.waitFinal(t, "c-ckpt", "a1"))
	want := wire.JobArtifact{JobID: "counts", Kind: wire.ArtifactCheckpoint, JobVersion: 1, FormatVersion: 1, MaxParallelism: 128,
		StatefulOperators: []string{"counts"}, State: wire.ArtifactCompleted, Trigger: wire.TriggerOperator, NodeID: testNodeID}
	got := cp
	got.ID, got.Location, got.Bytes, got.CreatedAt, got.CompletedAt = 0, "", 0, wire.Time{}, wire.Time{}
	if !jsonEqual(got, want) {
		t.Errorf("checkpoint result %+v, want %+v", got, want)
	}
	if cp.ID <= 0 || cp.Bytes <= 0 || cp.CreatedAt.IsZero() || cp.Location != "file://"+dir+"/artifacts/"+engine.ManifestKey("counts", "checkpoint", cp.ID) {
		t.Errorf("checkpoint result id %d, bytes %d, created %v, location %q", cp.ID, cp.Bytes, cp.CreatedAt, cp.Location)
	}
	if _, err := os.Stat(filepath.Join(dir, "artifacts", engine.ManifestKey("counts", "checkpoint", cp.ID))); err != nil {
		t.Errorf("the location names no manifest: %v", err)
	}
	obs := hub.waitJobObs(t, "counts", "carrying the checkpoint", func(o wire.JobObservation) bool {
		return slices.ContainsFunc(o.Artifacts, func(a wire.JobArtifact) bool { return a.ID == cp.ID })
	})
	if obs.LastCheckpoint != cp.ID {
		t.Errorf("last_checkpoint %d, want %d", obs.LastCheckpoint, cp.ID)
	}

	// A redelivery is answered from the outcome cache: the same artifact,
	// and no second checkpoint taken.
	hub.enqueue(jobCmd("c-ckpt", "a2", wire.CommandJobCheckpoint, "counts", 1, wire.JobCommand{}))
	if again := artifactResult(t, hub.waitFinal(t, "c-ckpt", "a2")); again.ID != cp.ID {
		t.Errorf("redelivered checkpoint answered artifact %d, want %d", again.ID, cp.ID)
	}
	if st, _ := tn.eng.Job("counts"); st.LastCheckpoint != cp.ID {
		t.Errorf("the redelivery took checkpoint %d", st.LastCheckpoint)
	}

	hub.enqueue(jobCmd("c-stop", "a1", wire.CommandJobStop, "counts", 2, wire.JobCommand{Savepoint: true}))
	sp := artifactResult(t, hub.waitFinal(t, "c-stop", "a1"))
	if sp.Kind != wire.ArtifactSavepoint || sp.ID <= cp.ID || sp.Trigger != wire.TriggerStop {
		t.Errorf("stop result %+v, want a savepoint after %d, trigger stop", sp, cp.ID)
	}
	hub.waitJobObs(t, "counts", "stopped at generation 2", func(o wire.JobObservation) bool {
		return o.State == wire.JobStopped && o.Generation == 2 && slices.ContainsFunc(o.Artifacts, func(a wire.JobArtifact) bool { return a.ID == sp.ID && a.Trigger == wire.TriggerStop })
	})

	// The fence stop of a job this node never ran succeeds.
	hub.enqueue(jobCmd("c-fence", "a1", wire.CommandJobStop, "elsewhere", 5, wire.JobCommand{Savepoint: true}))
	if r := hub.waitFinal(t, "c-fence", "a1"); r.State != wire.ResultSucceeded || len(r.Result) != 0 {
		t.Errorf("fence stop: %s %+v %s", r.State, r.Failure, r.Result)
	}
	var file struct {
		Version int                        `json:"version"`
		Jobs    map[string]agent.JobDesire `json:"jobs"`
	}
	b, err := os.ReadFile(filepath.Join(stateDir, "agent", "hub-state.json"))
	if err == nil {
		err = json.Unmarshal(b, &file)
	}
	if err != nil {
		t.Fatal(err)
	}
	if d := file.Jobs["elsewhere"]; file.Version != 4 || d.State != "stopped" || d.Generation != 5 || len(d.Spec) != 0 {
		t.Errorf("state file version %d, fence-stopped job's desire %+v; want version 4, stopped at 5", file.Version, d)
	}
	if d := file.Jobs["counts"]; d.State != "stopped" || d.Generation != 2 || d.Version != 1 || len(d.Spec) == 0 {
		t.Errorf("stopped job's desire %+v; want stopped at 2, version 1, its spec kept", d)
	}

	// Commands on a job that is not running or unknown.
	hub.enqueue(jobCmd("c-ckpt2", "a1", wire.CommandJobCheckpoint, "counts", 2, wire.JobCommand{}),
		jobCmd("c-ckpt3", "a1", wire.CommandJobSavepoint, "nope", 2, wire.JobCommand{}))
	for id, code := range map[string]string{"c-ckpt2": "job_not_running", "c-ckpt3": "job_not_found"} {
		r := hub.waitFinal(t, id, "a1")
		if r.State != wire.ResultFailed || r.Failure == nil || r.Failure.Class != "permanent" || r.Failure.Code != code {
			t.Errorf("%s: %s %+v, want permanent %s", id, r.State, r.Failure, code)
		}
	}
}

// TestJobStopSavepointObservedWithOutcome: the savepoint a stop takes is
// observed only once the stop's outcome was posted, in the observation
// that shows the stop's generation, never earlier at the generation
// before. The Hub holds the stop's result while periodic observations
// keep coming; each one built then must hold the savepoint back.
func TestJobStopSavepointObservedWithOutcome(t *testing.T) {
	hub := newTestHub(t, testNodeToken)
	dir := t.TempDir()
	startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{hub.URL + "/api/v1"}, jobs: true,
		tune: func(o *agent.Options) { o.ReportPeriod = 20 * time.Millisecond }})
	hub.enqueue(jobCmd("c-start", "a1", wire.CommandJobStart, "counts", 1, wire.JobCommand{Spec: hubJobSpec(t, "counts", dir, nil), JobVersion: 1}))
	succeeded(t, hub.waitFinal(t, "c-start", "a1"))
	hub.waitJobObs(t, "counts", "running at generation 1", func(o wire.JobObservation) bool {
		return o.State == wire.JobRunning && o.Generation == 1
	})

	held, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unhold := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unhold) // a failed test must not leave the Hub's handler waiting
	hub.update(func() {
		hub.holdResult = func(id string, res wire.CommandResult) {
			if id == "c-stop" && res.State != wire.ResultAcknowledged {
				close(held)
				<-release
			}
		}
	})
	hub.enqueue(jobCmd("c-stop", "a1", wire.CommandJobStop, "counts", 2, wire.JobCommand{Savepoint: true}))
	select {
	case <-held:
	case <-time.After(waitFor):
		t.Fatal("timed out waiting for the stop's result")
	}
	// The second body that arrives from now on was built after the stop's
	// command ended and before its outcome was posted.
	hub.mu.Lock()
	n := len(hub.jobObs)
	hub.mu.Unlock()
	hub.waitFor(t, "two job observations while the stop's result is held", func() bool { return len(hub.jobObs) >= n+2 })
	savepointAt := func() []int64 {
		hub.mu.Lock()
		defer hub.mu.Unlock()
		var gens []int64
		for _, body := range hub.jobObs {
			for _, o := range body.Jobs {
				if o.ID == "counts" && slices.ContainsFunc(o.Artifacts, func(a wire.JobArtifact) bool { return a.Kind == wire.ArtifactSavepoint }) {
					gens = append(gens, o.Generation)
				}
			}
		}
		return gens
	}
	if gens := savepointAt(); len(gens) > 0 {
		t.Errorf("the savepoint was observed at generations %v before the stop's outcome was posted", gens)
	}
	unhold()

	sp := artifactResult(t, hub.waitFinal(t, "c-stop", "a1"))
	hub.waitJobObs(t, "counts", "stopped at generation 2 with the savepoint", func(o wire.JobObservation) bool {
		return o.State == wire.JobStopped && o.Generation == 2 && slices.ContainsFunc(o.Artifacts, func(a wire.JobArtifact) bool { return a.ID == sp.ID })
	})
	if gens := savepointAt(); !slices.Equal(gens, []int64{2}) {
		t.Errorf("the savepoint was observed at generations %v, want once at 2", gens)
	}
}

// TestJobStartInvalidSpec: problems fail the start permanently with their
// paths under spec, never with a resolved secret value.
func TestJobStartInvalidSpec(t *testing.T) {
	const secret = "s3cr3t-output-type-0123456789"
	t.Setenv("FP_AGENT_JOB_SECRET", secret)
	hub := newTestHub(t, testNodeToken)
	dir := t.TempDir()
	tn := startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{hub.URL + "/api/v1"}, jobs: true})
	cases := []struct {
		name  string
		edit  func(map[string]any)
		paths []string
	}{
		{"version", func(s map[string]any) { s["version"] = 0 }, []string{"spec.version"}},
		{"operator kind", func(s map[string]any) {
			s["operators"].([]any)[1].(map[string]any)["kind"] = "teleport"
		}, []string{"spec.operators[1]"}},
		{"secret output type", func(s map[string]any) {
			s["sinks"].([]any)[0].(map[string]any)["output_type"] = "${env:FP_AGENT_JOB_SECRET}"
		}, []string{"spec.sinks[0].output_type"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := "c-" + strings.ReplaceAll(c.name, " ", "-")
			hub.enqueue(jobCmd(id, "a1", wire.CommandJobStart, "bad", 1, wire.JobCommand{Spec: hubJobSpec(t, "bad", dir, c.edit), JobVersion: 1}))
			r := hub.waitFinal(t, id, "a1")
			if r.State != wire.ResultFailed || r.Failure == nil || r.Failure.Class != "permanent" || r.Failure.Code != "invalid_spec" {
				t.Fatalf("%s %+v, want permanent invalid_spec", r.State, r.Failure)
			}
			for _, p := range c.paths {
				if !strings.Contains(r.Failure.Message, p) {
					t.Errorf("message %q does not name %s", r.Failure.Message, p)
				}
			}
			if strings.Contains(r.Failure.Message, secret) {
				t.Errorf("message %q holds the secret value", r.Failure.Message)
			}
			if _, err := tn.eng.Job("bad"); !errors.Is(err, engine.ErrJobNotFound) {
				t.Errorf("an invalid spec left a job on the engine: %v", err)
			}
		})
	}
}

// TestJobValidate: job_validate reports its checks and succeeds even when
// one fails.
func TestJobValidate(t *testing.T) {
	hub := newTestHub(t, testNodeToken)
	dir := t.TempDir()
	startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{hub.URL + "/api/v1"}, jobs: true})
	cases := []struct {
		name   string
		edit   func(map[string]any)
		valid  bool
		failed []string // checks that fail
	}{
		{"valid", nil, true, nil},
		{"unknown input", func(s map[string]any) { s["sources"].([]any)[0].(map[string]any)["input_type"] = "nope" }, false, []string{"components"}},
		{"missing secret", func(s map[string]any) {
			s["sinks"].([]any)[0].(map[string]any)["config"].(map[string]any)["path"] = "${env:FP_AGENT_UNSET_VARIABLE}"
		}, false, []string{"secrets"}},
		{"bad store", func(s map[string]any) { s["checkpoint"].(map[string]any)["object_store_uri"] = "s3://" }, false, []string{"artifact_store"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := "v-" + strings.ReplaceAll(c.name, " ", "-")
			hub.enqueue(jobCmd(id, "a1", wire.CommandJobValidate, "v", 0, wire.JobCommand{Spec: hubJobSpec(t, "v", dir, c.edit)}))
			r := hub.waitFinal(t, id, "a1")
			succeeded(t, r)
			var v wire.JobValidation
			if err := json.Unmarshal(r.Result, &v); err != nil {
				t.Fatal(err)
			}
			var failed []string
			checks := map[string]bool{}
			for _, ch := range v.Checks {
				checks[ch.Check] = true
				if ch.Status == "failed" && !slices.Contains(failed, ch.Check) {
					failed = append(failed, ch.Check)
				}
			}
			if v.NodeID != testNodeID || v.Valid != c.valid || !slices.Equal(failed, c.failed) {
				t.Errorf("validation %+v: want valid %v, failed %v", v, c.valid, c.failed)
			}
			for _, name := range []string{"components", "secrets", "state_backend", "artifact_store", "spec"} {
				if !checks[name] {
					t.Errorf("no %s check in %+v", name, v.Checks)
				}
			}
		})
	}
}

// TestJobBootReapply: after a restart the Agent starts the Hub jobs it
// recorded running, from the newest artifact and at their generation, and
// leaves stopped ones; a job whose store a newer generation fenced fails.
func TestJobBootReapply(t *testing.T) {
	hub := newTestHub(t, testNodeToken)
	stateDir, dir, dirHeld, dirFenced := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	opts := nodeOptions{stateDir: stateDir, hubURLs: []string{hub.URL + "/api/v1"}, jobs: true}
	tn := startNode(t, opts)
	hub.enqueue(
		jobCmd("s-run", "a1", wire.CommandJobStart, "run", 3, wire.JobCommand{Spec: hubJobSpec(t, "run", dir, nil), JobVersion: 1}),
		jobCmd("s-held", "a1", wire.CommandJobStart, "held", 2, wire.JobCommand{Spec: hubJobSpec(t, "held", dirHeld, nil), JobVersion: 1}),
		jobCmd("s-fenced", "a1", wire.CommandJobStart, "fenced", 1, wire.JobCommand{Spec: hubJobSpec(t, "fenced", dirFenced, nil), JobVersion: 1}),
	)
	for _, id := range []string{"s-run", "s-held", "s-fenced"} {
		succeeded(t, hub.waitFinal(t, id, "a1"))
	}
	hub.enqueue(jobCmd("k-run", "a1", wire.CommandJobCheckpoint, "run", 3, wire.JobCommand{}),
		jobCmd("x-held", "a1", wire.CommandJobStop, "held", 4, wire.JobCommand{}))
	cp := artifactResult(t, hub.waitFinal(t, "k-run", "a1"))
	succeeded(t, hub.waitFinal(t, "x-held", "a1"))
	tn.stop()

	// While the node was down the fenced job moved: generation 7 took its store.
	a, err := state.OpenArtifacts(context.Background(), "file://"+dirFenced+"/artifacts")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.WriteFence(context.Background(), "fenced", 7); err != nil {
		t.Fatal(err)
	}
	a.Close()

	tn = startNode(t, opts)
	eventually(t, "job run running again", func() bool {
		st, err := tn.eng.Job("run")
		return err == nil && st.State == engine.JobRunning
	})
	st, _ := tn.eng.Job("run")
	if !st.Hub || st.Generation != 3 || st.RestoredFrom != "checkpoint "+itoa(cp.ID) {
		t.Errorf("re-applied job: hub %v, generation %d, restored from %q; want generation 3 from checkpoint %d", st.Hub, st.Generation, st.RestoredFrom, cp.ID)
	}
	if _, err := tn.eng.Job("held"); !errors.Is(err, engine.ErrJobNotFound) {
		t.Errorf("the job the Hub wants stopped was started again: %v", err)
	}
	eventually(t, "the fenced job stopped, fenced", func() bool {
		st, err := tn.eng.Job("fenced")
		return err == nil && st.State == engine.JobStopped && st.Fenced
	})
	if st, _ := tn.eng.Job("fenced"); !errors.Is(st.Err, engine.ErrFenced) {
		t.Errorf("fenced job's error %v", st.Err)
	}
	hub.waitJobObs(t, "run", "running at generation 3 after the restart", func(o wire.JobObservation) bool {
		return o.State == wire.JobRunning && o.Generation == 3 && o.RestoredFrom != ""
	})
	// Losing the job to a newer placement is no failure of this node.
	hub.waitJobObs(t, "fenced", "stopped with the fence", func(o wire.JobObservation) bool {
		return o.State == wire.JobStopped && strings.Contains(o.LastError, "fenced") && !o.LastErrorAt.IsZero()
	})
	if failed := tn.eng.Failed(); len(failed) > 0 {
		t.Errorf("engine failed jobs %v: a fenced job is not a failure of the node", failed)
	}
	if nr := tn.eng.NotReady(); slices.Contains(nr, "fenced") {
		t.Errorf("the fenced job keeps the node not ready: %v", nr)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
