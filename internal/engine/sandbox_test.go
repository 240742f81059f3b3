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
	e := engine.New(engine.Options{StateDir: root, StopTimeout: 5 * time.Second,
		Remote: engine.Sandbox{FS: sandbox.Confine([]string{root}, rule)}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.Shutdown(ctx)
	})

	hubDir := filepath.Join(root, "hub")
	hub := materialize(t, countJob("hubjob", hubDir, "5ms", 0, 1)).Jobs[0]
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
