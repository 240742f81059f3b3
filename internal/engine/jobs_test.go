package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/kernel"
	"github.com/flowplane/flowplane/internal/state"
)

// countJob is a keyed running count over generated records into an
// exactly-once file sink, checkpointed to dir. interval paces the
// source; count 0 makes it endless.
func countJob(id, dir, interval string, count int, version int) string {
	return fmt.Sprintf(`
streams: []
jobs:
  - id: %[1]s
    version: %[5]d
    operators:
      - {id: src, kind: source}
      - id: counts
        kind: aggregate
        config: {key: this.k, aggregations: [{name: n, function: count}]}
      - {id: out, kind: sink}
    edges:
      - {from: src, to: counts}
      - {from: counts, to: out}
    sources:
      - operator_id: src
        input_type: generate
        config: {context: '{"k": "k{{random:3}}"}', seed: 1, interval: %[3]s, count: %[4]d, batch_size: 10}
    sinks:
      - operator_id: out
        output_type: file
        config: {path: %[2]s/out/counts.jsonl}
    state: {backend: embedded_kv}
    checkpoint: {interval_ms: 100000, retention: 2, object_store_uri: "file://%[2]s/artifacts"}
`, id, dir, interval, count, version)
}

func jobOf(t *testing.T, e *engine.Engine, id string) engine.JobStatus {
	t.Helper()
	st, err := e.Job(id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func partLines(t *testing.T, dir string) int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "out", "counts-*.jsonl"))
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n += strings.Count(string(b), "\n")
	}
	return n
}

// TestFiniteJobCompletes: a job in the configuration runs to completion;
// the engine is then finished and ready, and the sink holds every update.
func TestFiniteJobCompletes(t *testing.T) {
	e := newEngine(t)
	dir := t.TempDir()
	if err := e.Apply(context.Background(), materialize(t, countJob("j", dir, "0s", 500, 1))); err != nil {
		t.Fatal(err)
	}
	// The job shows Completed a moment before its goroutine ends and the
	// engine counts it finished; wait for both.
	waitFor(t, "the job to complete", func() bool { return jobOf(t, e, "j").State == kernel.Completed && e.Finished() })
	if !e.Ready() || len(e.Failed()) > 0 {
		t.Errorf("after completion: ready %v failed %v", e.Ready(), e.Failed())
	}
	if n := partLines(t, dir); n != 500 {
		t.Errorf("the sink committed %d updates, want 500 (one per record)", n)
	}
}

// TestJobOperations: a running job takes checkpoints and savepoints on
// demand, lists them, stops with a final savepoint and starts again from
// it; readiness follows what should run.
func TestJobOperations(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	dir := t.TempDir()
	if err := e.Apply(ctx, materialize(t, countJob("j", dir, "5ms", 0, 1))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job to run", func() bool { return jobOf(t, e, "j").State == kernel.Running })
	if !e.Ready() {
		t.Errorf("a running job left the engine not ready: %v", e.NotReady())
	}
	cp, err := e.CheckpointJob(ctx, "j")
	if err != nil {
		t.Fatal(err)
	}
	sp, err := e.SavepointJob(ctx, "j")
	if err != nil {
		t.Fatal(err)
	}
	if cp.Kind != state.KindCheckpoint || sp.Kind != state.KindSavepoint || sp.ID <= cp.ID || cp.JobID != "j" {
		t.Errorf("checkpoint %+v, savepoint %+v", cp, sp)
	}
	cps, err := e.JobArtifacts(ctx, "j", state.KindCheckpoint)
	if err != nil || len(cps) == 0 || cps[len(cps)-1].ID != cp.ID {
		t.Fatalf("checkpoints listed: %v, %v; want the last to be %d", cps, err, cp.ID)
	}
	final, err := e.StopJob(ctx, "j", true)
	if err != nil {
		t.Fatal(err)
	}
	if final == nil || final.Kind != state.KindSavepoint || final.ID <= sp.ID {
		t.Fatalf("stop with savepoint returned %+v", final)
	}
	if st := jobOf(t, e, "j").State; st != kernel.Stopped {
		t.Errorf("after StopJob the job is %s, want stopped", st)
	}
	if !e.Ready() {
		t.Errorf("a job stopped on request left the engine not ready: %v", e.NotReady())
	}
	if _, err := e.CheckpointJob(ctx, "j"); err == nil {
		t.Error("a checkpoint of a stopped job succeeded")
	}
	if err := e.StartJob(ctx, "j", kernel.RecoverLatestSavepoint); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job to run again", func() bool { return jobOf(t, e, "j").State == kernel.Running })
	if got := jobOf(t, e, "j").RestoredFrom; !strings.Contains(got, "savepoint") {
		t.Errorf("restarted from %q, want the final savepoint", got)
	}
	if _, err := e.StopJob(ctx, "missing", false); !errors.Is(err, engine.ErrJobNotFound) {
		t.Errorf("StopJob of an unknown job: %v", err)
	}
}

// TestApplyReplacesChangedJobs: applying a configuration keeps an unchanged
// job running, restarts a changed one, starts a new one and stops a
// removed one, as for streams.
func TestApplyReplacesChangedJobs(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	a, b := t.TempDir(), t.TempDir()
	two := func(va, vb int, withB bool) string {
		doc := countJob("a", a, "5ms", 0, va)
		if withB {
			doc += strings.TrimPrefix(countJob("b", b, "5ms", 0, vb), "\nstreams: []\njobs:")
		}
		return doc
	}
	if err := e.Apply(ctx, materialize(t, two(1, 1, true))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both jobs to run", func() bool {
		return jobOf(t, e, "a").State == kernel.Running && jobOf(t, e, "b").State == kernel.Running
	})
	ids := func() []string {
		var out []string
		for _, j := range e.Jobs() {
			out = append(out, j.JobID)
		}
		return out
	}
	// b changes (version 2): it restarts; a is untouched.
	if err := e.Apply(ctx, materialize(t, two(1, 2, true))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b to run its new version", func() bool {
		st := jobOf(t, e, "b")
		return st.State == kernel.Running && st.Version == 2
	})
	if st := jobOf(t, e, "a"); st.Version != 1 || st.Restarts != 0 || st.State != kernel.Running {
		t.Errorf("unchanged job a after apply: %+v", st)
	}
	// b removed: it stops and is gone.
	if err := e.Apply(ctx, materialize(t, two(1, 2, false))); err != nil {
		t.Fatal(err)
	}
	if got := ids(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("jobs after removing b: %v", got)
	}
	if _, err := e.Job("b"); !errors.Is(err, engine.ErrJobNotFound) {
		t.Errorf("removed job b: %v", err)
	}
}

// TestBrokenJobFailsWithPath: a job whose plan or components cannot be
// built fails on its own, with the configuration path, and the engine
// reports it failed and not ready.
func TestBrokenJobFailsWithPath(t *testing.T) {
	e := newEngine(t)
	dir := t.TempDir()
	doc := strings.Replace(countJob("j", dir, "5ms", 0, 1), "key: this.k", "key: 'this.k +'", 1)
	err := e.Apply(context.Background(), materialize(t, doc))
	if err == nil || !strings.Contains(err.Error(), "jobs[0].operators[1].config.key") {
		t.Fatalf("Apply of a broken job: %v", err)
	}
	if st := jobOf(t, e, "j"); st.State != kernel.Failed || st.Error == "" {
		t.Errorf("broken job status: %+v", st)
	}
	if e.Ready() || !slices.Contains(e.Failed(), "j") {
		t.Errorf("ready %v, failed %v", e.Ready(), e.Failed())
	}
}

// TestRestartStrategyFailsJob: a job whose aggregation fails on every
// record (a sum over a string) restarts as its restart_strategy allows,
// then is failed: the engine's status (what /status, /health and the
// Agent's job reports read) says failed, with the restarts, the reason and
// the failure, and the engine names it among its failed jobs.
func TestRestartStrategyFailsJob(t *testing.T) {
	e := newEngine(t)
	doc := `
streams: []
jobs:
  - id: sums
    version: 1
    operators:
      - {id: src, kind: source}
      - {id: counts, kind: aggregate, config: {key: this.k, aggregations: [{name: total, function: sum, expression: this.s}]}}
      - {id: out, kind: sink}
    edges: [{from: src, to: counts}, {from: counts, to: out}]
    sources: [{operator_id: src, input_type: generate, config: {context: '{"k": 1, "s": "x"}', interval: 5ms}}]
    sinks: [{operator_id: out, output_type: drop}]
    state: {backend: embedded_kv, durability: ephemeral}
    restart_strategy: {type: fixed_delay, attempts: 2, delay_ms: 0, max_delay_ms: 0}
`
	if err := e.Apply(context.Background(), materialize(t, doc)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job failed", func() bool { return jobOf(t, e, "sums").State == kernel.Failed })
	st := jobOf(t, e, "sums")
	if st.Restarts != 2 || !strings.Contains(st.Error, "restart strategy fixed_delay: all 2 restarts") || st.LastError == "" ||
		!strings.Contains(st.Error, st.LastError) {
		t.Errorf("status: restarts %d, error %q, last error %q", st.Restarts, st.Error, st.LastError)
	}
	if !slices.Contains(e.Failed(), "sums") {
		t.Errorf("failed jobs %v, want sums", e.Failed())
	}
}
