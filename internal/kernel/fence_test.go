package kernel

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/state"
)

// TestFenceStopsOlderGeneration runs generation 1 of a job, then
// generation 2 on the same artifact store (another node's state root):
// generation 1 fails at its next checkpoint without committing
// anything more, and cannot start again, while generation 2 checkpoints.
func TestFenceStopsOlderGeneration(t *testing.T) {
	c1 := newCountJob(t)
	c1.n = 0 // unbounded
	hooks1 := &seqHooks{}
	hooks1.pauseAt.Store(1000)
	opts := testOptions(countOps())
	opts.FenceGeneration = 1
	j1, err := Build("jobs[0]", c1.plan(hooks1, 2), opts)
	if err != nil {
		t.Fatal(err)
	}
	wait1, _ := runJob(t, j1)
	eventually(t, "1000 records at generation 1's sink", func() bool { return sinkRecords(j1) == 1000 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := j1.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "1000 committed records", func() bool { return len(c1.store.values(true)) == 1000 })

	// Another node: its own state root, the same sink system (which
	// holds generation 1's prepared transactions).
	c2 := *c1
	c2.root = t.TempDir()
	hooks2 := &seqHooks{}
	hooks2.pauseAt.Store(1500)
	opts2 := testOptions(countOps())
	opts2.FenceGeneration, opts2.Recovery = 2, RecoverNewest
	j2, err := Build("jobs[0]", c2.plan(hooks2, 2), opts2)
	if err != nil {
		t.Fatal(err)
	}
	wait2, cancel2 := runJob(t, j2)
	eventually(t, "generation 2 running", func() bool { return j2.Observe().State == Running })

	hooks1.pauseAt.Store(2000)
	eventually(t, "2000 records at generation 1's sink", func() bool { return sinkRecords(j1) == 2000 })
	if _, err := j1.Checkpoint(ctx); !errors.Is(err, state.ErrFenced) {
		t.Fatalf("generation 1's checkpoint after the takeover: %v, want fenced", err)
	}
	if err := wait1(); !errors.Is(err, state.ErrFenced) {
		t.Fatalf("generation 1's Run = %v, want fenced", err)
	}
	if o := j1.Observe(); o.State != Failed {
		t.Errorf("generation 1 is %s, want failed", o.State)
	}
	// Generation 2 has not checkpointed: every commit so far is
	// generation 1's first checkpoint.
	if got := len(c1.store.values(true)); got != 1000 {
		t.Errorf("%d records committed, want 1000 (nothing after the takeover)", got)
	}

	// Generation 1 cannot come back.
	again, err := Build("jobs[0]", c1.plan(&seqHooks{}, 2), opts)
	if err != nil {
		t.Fatal(err)
	}
	waitAgain, _ := runJob(t, again)
	if err := waitAgain(); !errors.Is(err, state.ErrFenced) {
		t.Fatalf("generation 1 started again: Run = %v, want fenced", err)
	}
	if got := len(c1.store.values(true)); got != 1000 {
		t.Errorf("generation 1 committed %d records on its second start, want 1000", got)
	}

	// Generation 2 goes on.
	m, err := j2.Checkpoint(ctx)
	if err != nil {
		t.Fatalf("generation 2's checkpoint: %v", err)
	}
	if j2.Observe().RestoredFrom == "" {
		t.Error("generation 2 restored nothing")
	}
	cancel2()
	if err := wait2(); err != nil {
		t.Fatal(err)
	}
	if m.ID <= 1 {
		t.Errorf("generation 2's checkpoint id %d, want past generation 1's", m.ID)
	}
}

// TestRestoreNamedArtifact restores exactly one artifact; a missing or
// incompatible one fails the job permanently and never falls back.
func TestRestoreNamedArtifact(t *testing.T) {
	cases := []struct {
		name    string
		ref     func(m *state.Manifest) *ArtifactRef
		maxPar  int // 0: the plan's
		wantErr bool
	}{
		{name: "the checkpoint", ref: func(m *state.Manifest) *ArtifactRef { return &ArtifactRef{Kind: state.KindCheckpoint, ID: m.ID} }},
		{name: "not found", ref: func(m *state.Manifest) *ArtifactRef { return &ArtifactRef{Kind: state.KindCheckpoint, ID: m.ID + 100} }, wantErr: true},
		{name: "wrong kind", ref: func(m *state.Manifest) *ArtifactRef { return &ArtifactRef{Kind: state.KindSavepoint, ID: m.ID} }, wantErr: true},
		{name: "no artifact named", ref: func(*state.Manifest) *ArtifactRef { return nil }, wantErr: true},
		{name: "incompatible", ref: func(m *state.Manifest) *ArtifactRef { return &ArtifactRef{Kind: state.KindCheckpoint, ID: m.ID} }, maxPar: 32, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCountJob(t)
			m := c.firstRun(t)
			opts := testOptions(countOps())
			opts.Recovery, opts.Restore = RecoverArtifact, tc.ref(m)
			log := &stateLog{}
			opts.OnState = log.add
			p := c.plan(&seqHooks{}, 2)
			if tc.maxPar != 0 {
				p.MaxParallelism = tc.maxPar
				for i := range p.Tasks {
					p.Tasks[i].KeyGroups = job.RangeOf(p.Tasks[i].Subtask, 2, tc.maxPar)
				}
			}
			j, err := Build("jobs[0]", p, opts)
			if err != nil {
				t.Fatal(err)
			}
			wait, _ := runJob(t, j)
			err = wait()
			if !tc.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				if got := j.Observe().RestoredFrom; got != "checkpoint "+strconv.FormatInt(m.ID, 10) {
					t.Errorf("restored from %q", got)
				}
				c.checkExactlyOnce(t)
				return
			}
			if err == nil || !permanent(err) {
				t.Fatalf("Run = %v, want a permanent failure", err)
			}
			o := j.Observe()
			if o.State != Failed || o.RestoredFrom != "" || o.Restarts != 0 {
				t.Errorf("state %s, restored from %q, %d restarts; want failed, nothing, 0", o.State, o.RestoredFrom, o.Restarts)
			}
			if got := len(c.store.values(true)); got != 2000 {
				t.Errorf("%d records committed, want the first run's 2000", got)
			}
		})
	}
}
