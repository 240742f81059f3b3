package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/kernel"
	"github.com/flowplane/flowplane/internal/sandbox"
	"github.com/flowplane/flowplane/internal/state"
	"github.com/flowplane/flowplane/internal/stream"
)

// TestHubJobSandbox: a Hub job runs in the engine's remote sandbox: its
// state store, checkpoints, artifact store and part files beneath the
// allowed root work through it (a savepoint taken, the job restored from
// it), while a Hub job whose sink directory is a link out of the root
// fails, naming the path and the rule, and writes nothing there. The same
// job configured locally runs.
func TestHubJobSandbox(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root, outside := t.TempDir(), t.TempDir()
	const rule = "remote_policy.file_roots"
	// The node's own state directory is not among the roots: task
	// directories beneath it are the node's, not the Hub's choice.
	e := engine.New(engine.Options{StateDir: t.TempDir(), StopTimeout: 5 * time.Second,
		Remote: engine.Sandbox{FS: sandbox.Confine([]string{root}, rule)}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.Shutdown(ctx)
	})

	hubDir := filepath.Join(root, "hub")
	hub := materialize(t, countJob("hubjob", hubDir, "5ms", 0, 1)).Jobs[0]
	hub.State.Root = filepath.Join(root, "state") // the task stores through the sandbox
	if err := e.StartHubJob(ctx, engine.HubJob{Spec: hub, Generation: 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the hub job running", func() bool { return jobOf(t, e, "hubjob").State == kernel.Running })
	sp, err := e.StopJob(ctx, "hubjob", true)
	if err != nil || sp == nil || sp.Kind != state.KindSavepoint {
		t.Fatalf("StopJob with savepoint = %+v, %v", sp, err)
	}
	err = e.StartHubJob(ctx, engine.HubJob{Spec: hub, Generation: 2, Recovery: kernel.RecoverArtifact,
		Restore: &kernel.ArtifactRef{Kind: state.KindSavepoint, ID: sp.ID}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the hub job restored", func() bool { return jobOf(t, e, "hubjob").State == kernel.Running })
	if _, err := e.StopJob(ctx, "hubjob", true); err != nil {
		t.Fatal(err)
	}
	if partLines(t, hubDir) == 0 {
		t.Error("the hub job committed no part file beneath the root")
	}
	if _, err := os.Stat(filepath.Join(root, "state", "hubjob")); err != nil {
		t.Errorf("the hub job's state.root: %v", err)
	}
	own := materialize(t, countJob("ownstate", filepath.Join(root, "own"), "5ms", 0, 1)).Jobs[0]
	if err := e.StartHubJob(ctx, engine.HubJob{Spec: own, Generation: 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a hub job in the node's own state directory running", func() bool { return jobOf(t, e, "ownstate").State == kernel.Running })
	if _, err := e.CheckpointJob(ctx, "ownstate"); err != nil {
		t.Errorf("checkpoint of a hub job in the node's own state directory: %v", err)
	}

	linked := filepath.Join(root, "linked")
	if err := os.Symlink(outside, linked); err != nil {
		t.Fatal(err)
	}
	escape := materialize(t, countJob("escape", linked, "5ms", 0, 1)).Jobs[0]
	if err := e.StartHubJob(ctx, engine.HubJob{Spec: escape, Generation: 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the escaping hub job failing", func() bool { return jobOf(t, e, "escape").State == kernel.Failed })
	if msg := jobOf(t, e, "escape").Error; !strings.Contains(msg, linked) || !strings.Contains(msg, rule) {
		t.Errorf("job error %q does not name the path and the rule", msg)
	}
	if es, _ := os.ReadDir(outside); len(es) != 0 {
		t.Fatalf("the hub job made %v outside the root", es)
	}

	if err := e.Apply(ctx, materialize(t, countJob("local", linked, "5ms", 0, 1))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the local job running", func() bool { return jobOf(t, e, "local").State == kernel.Running })
}

// TestHubWALSandbox: a Hub configuration's durability.path WAL is made
// and kept in a directory opened through the remote sandbox: beneath the
// root it works (its files where the path names them), through a link
// out of the root the stream fails naming the path and the rule. Applied
// as local work, the same configuration runs.
func TestHubWALSandbox(t *testing.T) {
	ctx := context.Background()
	root, outside := t.TempDir(), t.TempDir()
	const rule = "remote_policy.file_roots"
	e := engine.New(engine.Options{StateDir: t.TempDir(), StopTimeout: 5 * time.Second,
		Remote: engine.Sandbox{FS: sandbox.Confine([]string{root}, rule)}})
	t.Cleanup(func() { e.Shutdown(context.Background()) })
	if err := os.Symlink(outside, filepath.Join(root, "linked")); err != nil {
		t.Fatal(err)
	}
	durable := func(id, path string) string {
		return `
  - id: ` + id + `
    input: {type: memory, messages: ['x', 'y']}
    pipeline: {processors: []}
    output: {type: drop}
    durability: {path: ` + path + `}
`
	}
	inside, linked := filepath.Join(root, "wal", "in"), filepath.Join(root, "linked", "wal")
	doc := "streams:" + durable("in", inside) + durable("out", linked)
	err := e.ApplyWith(ctx, materialize(t, doc), engine.ApplyOptions{Remote: true})
	if err == nil || !strings.Contains(err.Error(), "streams[1].durability") || !strings.Contains(err.Error(), rule) {
		t.Fatalf("apply = %v, want the linked WAL refused", err)
	}
	waitFor(t, "the stream beneath the root to complete", func() bool { s, _ := statusOf(e, "in"); return s.State == stream.StateCompleted })
	if es, err := os.ReadDir(inside); err != nil || len(es) == 0 {
		t.Errorf("WAL beneath the root: %v, %v", es, err)
	}
	if es, _ := os.ReadDir(outside); len(es) != 0 {
		t.Fatalf("the Hub's WAL made %v outside the root", es)
	}
	if err := e.ApplyWith(ctx, materialize(t, doc), engine.ApplyOptions{}); err != nil {
		t.Fatalf("the same configuration as local work: %v", err)
	}
	if es, _ := os.ReadDir(outside); len(es) == 0 {
		t.Error("local work did not make its WAL through the link")
	}
}
