package engine_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/kernel"
	"github.com/flowplane/flowplane/internal/state"
)

func jobIDs(sts []engine.JobStatus) []string {
	var ids []string
	for _, s := range sts {
		ids = append(ids, s.JobID)
	}
	return ids
}

// TestHubJobs: a Hub job runs beside the configured ones, applies leave it
// alone, a configured id is refused to the Hub and a Hub id to the
// configuration, and the job operations work on it.
func TestHubJobs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := newEngine(t)
	confDir, hubDir := t.TempDir(), t.TempDir()
	if err := e.Apply(ctx, materialize(t, countJob("conf", confDir, "5ms", 0, 1))); err != nil {
		t.Fatal(err)
	}
	hub := materialize(t, countJob("hubjob", hubDir, "5ms", 0, 1)).Jobs[0]
	if err := e.StartHubJob(ctx, engine.HubJob{Spec: hub, Generation: 3}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both jobs running", func() bool {
		return jobOf(t, e, "conf").State == kernel.Running && jobOf(t, e, "hubjob").State == kernel.Running
	})
	if got := jobIDs(e.Jobs()); !slices.Equal(got, []string{"conf", "hubjob"}) {
		t.Errorf("Jobs = %v", got)
	}
	if got := jobIDs(e.HubJobs()); !slices.Equal(got, []string{"hubjob"}) {
		t.Errorf("HubJobs = %v", got)
	}
	if st := jobOf(t, e, "hubjob"); !st.Hub || st.Generation != 3 || st.Path != "spec" {
		t.Errorf("hub job status %+v", st)
	}
	if st := jobOf(t, e, "conf"); st.Hub || st.Generation != 0 {
		t.Errorf("configured job status %+v", st)
	}

	// The Hub cannot take a configured id.
	confSpec := materialize(t, countJob("conf", confDir, "5ms", 0, 1)).Jobs[0]
	if err := e.StartHubJob(ctx, engine.HubJob{Spec: confSpec, Generation: 1}); !errors.Is(err, engine.ErrJobConfigured) {
		t.Errorf("StartHubJob of a configured id = %v, want ErrJobConfigured", err)
	}
	if err := e.RemoveHubJob(ctx, "conf"); !errors.Is(err, engine.ErrJobConfigured) {
		t.Errorf("RemoveHubJob of a configured id = %v, want ErrJobConfigured", err)
	}

	// An apply without jobs stops the configured job and leaves the Hub's.
	if err := e.Apply(ctx, materialize(t, "streams: []\n")); err != nil {
		t.Fatal(err)
	}
	if got := jobIDs(e.Jobs()); !slices.Equal(got, []string{"hubjob"}) {
		t.Errorf("after an apply without jobs: Jobs = %v", got)
	}
	if st := jobOf(t, e, "hubjob"); st.State != kernel.Running {
		t.Errorf("hub job %s after the apply, want running", st.State)
	}
	// A configuration naming the Hub's job id does not take it over.
	err := e.Apply(ctx, materialize(t, countJob("hubjob", confDir, "5ms", 0, 1)))
	if err == nil {
		t.Error("an apply configuring the Hub job's id succeeded")
	}
	if got := jobIDs(e.Jobs()); !slices.Equal(got, []string{"hubjob"}) {
		t.Errorf("after configuring the Hub's id: Jobs = %v", got)
	}
	if st := jobOf(t, e, "hubjob"); st.State != kernel.Running || !st.Hub || st.ObjectStoreURI != "file://"+hubDir+"/artifacts" {
		t.Errorf("hub job after the conflicting apply: %+v", st)
	}

	// Checkpoint, savepoint, artifacts, stop.
	cp, err := e.CheckpointJob(ctx, "hubjob")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.SavepointJob(ctx, "hubjob"); err != nil {
		t.Fatal(err)
	}
	arts, err := e.JobArtifacts(ctx, "hubjob", state.KindCheckpoint)
	if err != nil || len(arts) != 1 || arts[0].ID != cp.ID {
		t.Errorf("JobArtifacts = %v, %v; want checkpoint %d", arts, err, cp.ID)
	}
	sp, err := e.StopJob(ctx, "hubjob", true)
	if err != nil || sp == nil || sp.Kind != state.KindSavepoint {
		t.Fatalf("StopJob with savepoint = %+v, %v", sp, err)
	}
	if st := jobOf(t, e, "hubjob"); st.State != kernel.Stopped {
		t.Errorf("hub job %s after the stop", st.State)
	}
	if _, err := e.CheckpointJob(ctx, "hubjob"); !errors.Is(err, engine.ErrJobNotRunning) {
		t.Errorf("CheckpointJob of a stopped job = %v, want ErrJobNotRunning", err)
	}

	// Started again from exactly that savepoint, at a newer generation.
	err = e.StartHubJob(ctx, engine.HubJob{Spec: hub, Generation: 4, Recovery: kernel.RecoverArtifact,
		Restore: &kernel.ArtifactRef{Kind: state.KindSavepoint, ID: sp.ID}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the hub job running again", func() bool { return jobOf(t, e, "hubjob").State == kernel.Running })
	if st := jobOf(t, e, "hubjob"); st.RestoredFrom != "savepoint "+strconv.FormatInt(sp.ID, 10) || st.Generation != 4 {
		t.Errorf("restarted hub job: restored from %q, generation %d", st.RestoredFrom, st.Generation)
	}
	// Restarting it while it runs replaces the running instance; an older
	// generation is then refused by the fence.
	err = e.StartHubJob(ctx, engine.HubJob{Spec: hub, Generation: 2, Recovery: kernel.RecoverNewest})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the older generation fenced", func() bool { return jobOf(t, e, "hubjob").Fenced })
	if st := jobOf(t, e, "hubjob"); !strings.Contains(st.Error, "fenced") || st.State != kernel.Stopped {
		t.Errorf("older generation: %s, error %q; want stopped, fenced", st.State, st.Error)
	}
	// Losing the job to a newer placement is no failure of this node.
	if failed := e.Failed(); len(failed) > 0 {
		t.Errorf("Failed() = %v after a fence", failed)
	}
	if nr := e.NotReady(); len(nr) > 0 {
		t.Errorf("NotReady() = %v after a fence", nr)
	}
	if err := e.RemoveHubJob(ctx, "hubjob"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Job("hubjob"); !errors.Is(err, engine.ErrJobNotFound) {
		t.Errorf("Job after RemoveHubJob = %v", err)
	}
}
