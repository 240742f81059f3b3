package kernel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/operator"
	"github.com/flowplane/flowplane/internal/state"
)

// stateLog records the states a job enters.
type stateLog struct {
	mu sync.Mutex
	s  []State
}

func (l *stateLog) add(s State) { l.mu.Lock(); l.s = append(l.s, s); l.mu.Unlock() }
func (l *stateLog) get() []State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.s)
}

// failingJob is src -> map -partitioned-> count -> transactional sink,
// checkpointing every 10 ms. The source pauses at 1500 records until a
// checkpoint completed; map then fails once.
func failingJob(t *testing.T, recovery string) (*Job, *countJob, *stateLog) {
	c := newCountJob(t)
	c.n = 3000
	hooks := &seqHooks{}
	hooks.pauseAt.Store(1500)
	p := makePlan("fails", 16, []opSpec{
		{id: "src", kind: "source", par: 1, typ: "seq", conf: map[string]any{"n": c.n, "keys": c.keys, "hooks": hooks}},
		{id: "map", kind: "map", par: 1},
		{id: "count", kind: "aggregate", par: 2, stateful: true},
		{id: "out", kind: "sink", par: 2, typ: "txcollect", conf: map[string]any{"store": c.store}},
	}, []edgeSpec{{from: "src", to: "map"}, {from: "map", to: "count", mode: job.Partitioned, key: "k"}, {from: "count", to: "out"}})
	withState(p, c.root, c.arts, 10)
	p.Recovery = recovery
	var failed atomic.Bool
	ops := countOps()
	ops["map"] = func() operator.Operator { return &pass{failed: &failed} }
	opts := testOptions(ops)
	log := &stateLog{}
	opts.OnState = log.add
	j, err := Build("jobs[0]", p, opts)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for j.Observe().LastCheckpoint == 0 && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		hooks.pauseAt.Store(0)
	}()
	return j, c, log
}

// TestTaskFailureRecovers fails an operator once. Whatever the recovery
// mode (latest_savepoint here finds no savepoint), the restart resumes
// from the newest checkpoint, so the output stays exactly once.
func TestTaskFailureRecovers(t *testing.T) {
	for _, mode := range []string{RecoverLatestCheckpoint, RecoverLatestSavepoint} {
		t.Run(mode, func(t *testing.T) {
			j, c, log := failingJob(t, mode)
			wait, _ := runJob(t, j)
			if err := wait(); err != nil {
				t.Fatal(err)
			}
			states := log.get()
			i := slices.Index(states, Recovering)
			if i < 0 || !slices.Contains(states[i:], Running) || states[len(states)-1] != Completed {
				t.Errorf("states %v, want Recovering, then Running, then Completed", states)
			}
			if o := j.Observe(); o.Restarts != 1 {
				t.Errorf("restarts = %d, want 1", o.Restarts)
			}
			c.checkExactlyOnce(t)
		})
	}
}

func TestRecoveryFailEndsFailed(t *testing.T) {
	j, _, log := failingJob(t, RecoverFail)
	wait, _ := runJob(t, j)
	err := wait()
	if err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("Run = %v, want the injected failure", err)
	}
	if states := log.get(); slices.Contains(states, Recovering) || states[len(states)-1] != Failed {
		t.Errorf("states %v", states)
	}
}

// budgetOp fails as an operator over its state budget does.
type budgetOp struct{ baseOp }

func (budgetOp) Process(context.Context, []operator.Record, operator.Collector) error {
	return fmt.Errorf("count: %w", state.ErrBudget)
}

func TestBudgetErrorIsNotRetried(t *testing.T) {
	store := newSinkStore()
	p := makePlan("budget", 16, []opSpec{
		{id: "src", kind: "source", par: 1, typ: "seq", conf: map[string]any{"n": 100, "hooks": &seqHooks{}}},
		{id: "count", kind: "aggregate", par: 1},
		{id: "out", kind: "sink", par: 1, typ: "collect", conf: map[string]any{"store": store}},
	}, []edgeSpec{{from: "src", to: "count"}, {from: "count", to: "out"}})
	log := &stateLog{}
	opts := testOptions(map[string]func() operator.Operator{"count": func() operator.Operator { return budgetOp{} }})
	opts.OnState = log.add
	j, err := Build("jobs[0]", p, opts)
	if err != nil {
		t.Fatal(err)
	}
	wait, _ := runJob(t, j)
	if err := wait(); !errors.Is(err, state.ErrBudget) {
		t.Fatalf("Run = %v, want ErrBudget", err)
	}
	if states := log.get(); slices.Contains(states, Recovering) {
		t.Errorf("states %v: a budget error was retried", states)
	}
}

// TestFinalCheckpointCommitsTail runs a bounded job whose checkpoint
// interval is an hour: only the checkpoint at the end of input can commit
// the transactional sink's output.
func TestFinalCheckpointCommitsTail(t *testing.T) {
	c := newCountJob(t)
	c.n = 1000
	j, err := Build("jobs[0]", c.plan(&seqHooks{}, 2), testOptions(countOps()))
	if err != nil {
		t.Fatal(err)
	}
	wait, _ := runJob(t, j)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	c.checkExactlyOnce(t)
	ms, err := j.Artifacts(context.Background(), state.KindCheckpoint)
	if err != nil || len(ms) != 1 {
		t.Fatalf("checkpoints %v, %v; want the final one", ms, err)
	}
}

// pausedCountJob runs the count job paused after 500 records.
func pausedCountJob(t *testing.T, c *countJob, opts Options) (*Job, *seqHooks, func() error) {
	t.Helper()
	hooks := &seqHooks{}
	hooks.pauseAt.Store(500)
	j, err := Build("jobs[0]", c.plan(hooks, 2), opts)
	if err != nil {
		t.Fatal(err)
	}
	wait, _ := runJob(t, j)
	eventually(t, "500 records at the sink", func() bool { return sinkRecords(j) == 500 })
	return j, hooks, wait
}

func TestRetention(t *testing.T) {
	c := newCountJob(t)
	j, _, _ := pausedCountJob(t, c, testOptions(countOps()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sp, err := j.Savepoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := j.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := j.Artifacts(ctx, state.KindCheckpoint)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	if want := []int64{4, 5, 6}; !slices.Equal(ids, want) { // retention 3; savepoint 1 shares the ids
		t.Errorf("checkpoints %v, want %v", ids, want)
	}
	if sps, err := j.Artifacts(ctx, state.KindSavepoint); err != nil || len(sps) != 1 || sps[0].ID != sp.ID {
		t.Errorf("savepoints %v, %v; want savepoint %d kept", sps, err, sp.ID)
	}
	// Retention removes whole checkpoint directories, not only their files.
	entries, err := os.ReadDir(filepath.Join(c.arts, "counts", "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		dirs = append(dirs, e.Name())
	}
	want := []string{"00000000000000000004", "00000000000000000005", "00000000000000000006"}
	if diff := cmp.Diff(want, dirs); diff != "" {
		t.Errorf("checkpoint directories in the store (-want +got):\n%s", diff)
	}
}

// slowSnapshot blocks its Snapshot of checkpoint 1 until released.
type slowSnapshot struct {
	countOp
	release chan struct{}
}

func (s *slowSnapshot) Snapshot(ctx context.Context, id int64) error {
	if id == 1 && s.release != nil {
		select {
		case <-s.release:
		case <-ctx.Done():
		}
	}
	return s.countOp.Snapshot(ctx, id)
}

// TestAbandonedCheckpoint times a checkpoint out: it is counted, the job
// keeps running, and the next manifest lists the transaction the sink
// prepared for the abandoned one, so it is committed and pinned.
func TestAbandonedCheckpoint(t *testing.T) {
	c := newCountJob(t)
	release := make(chan struct{})
	var first atomic.Bool
	ops := countOps()
	ops["count"] = func() operator.Operator {
		if first.CompareAndSwap(false, true) {
			return &slowSnapshot{release: release}
		}
		return &slowSnapshot{}
	}
	opts := testOptions(ops)
	// Long enough for checkpoint 2 to complete on a loaded machine (the
	// timeout bounds it too); checkpoint 1 waits it out.
	opts.ckptTimeout = 2 * time.Second
	j, hooks, wait := pausedCountJob(t, c, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := j.Checkpoint(ctx); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("checkpoint 1 = %v, want a timeout", err)
	}
	close(release)
	m, err := j.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o := j.Observe(); o.CheckpointFailures != 1 || o.State != Running {
		t.Errorf("observation %+v", o)
	}
	var cps []int64
	for _, s := range m.Sinks {
		cps = append(cps, s.Checkpoint)
	}
	if !slices.Contains(cps, 1) {
		t.Errorf("manifest %d lists sink transactions of checkpoints %v, want 1 among them", m.ID, cps)
	}
	hooks.pauseAt.Store(0)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	c.checkExactlyOnce(t)
}

func TestStopWithSavepoint(t *testing.T) {
	c := newCountJob(t)
	log := &stateLog{}
	opts := testOptions(countOps())
	opts.OnState = log.add
	j, _, wait := pausedCountJob(t, c, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := j.Stop(ctx, StopOptions{Savepoint: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if m == nil || m.Kind != state.KindSavepoint {
		t.Fatalf("Stop returned %+v, want a savepoint", m)
	}
	if states := log.get(); !slices.Equal(states[len(states)-2:], []State{Stopping, Stopped}) {
		t.Errorf("states %v, want Stopping, Stopped at the end", states)
	}
	if got := len(c.store.values(true)); got != 500 {
		t.Errorf("%d records committed by the savepoint, want 500", got)
	}
	// Resume from the savepoint.
	opts = testOptions(countOps())
	opts.Recovery = RecoverLatestSavepoint
	j2, err := Build("jobs[0]", c.plan(&seqHooks{}, 2), opts)
	if err != nil {
		t.Fatal(err)
	}
	wait2, _ := runJob(t, j2)
	if err := wait2(); err != nil {
		t.Fatal(err)
	}
	if o := j2.Observe(); o.RestoredFrom != fmt.Sprintf("savepoint %d", m.ID) {
		t.Errorf("restored from %q", o.RestoredFrom)
	}
	c.checkExactlyOnce(t)
}

func TestNoCheckpointing(t *testing.T) {
	store := newSinkStore()
	p := makePlan("eph", 16, []opSpec{
		{id: "src", kind: "source", par: 1, typ: "seq", conf: map[string]any{"n": 300, "hooks": &seqHooks{}}},
		{id: "out", kind: "sink", par: 1, typ: "txcollect", conf: map[string]any{"store": store}},
	}, []edgeSpec{{from: "src", to: "out"}})
	j, err := Build("jobs[0]", p, testOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Checkpoint(context.Background()); !errors.Is(err, ErrNoCheckpointing) {
		t.Errorf("Checkpoint = %v, want ErrNoCheckpointing", err)
	}
	wait, _ := runJob(t, j)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if got := len(store.values(true)); got != 300 {
		t.Errorf("%d records committed, want 300", got)
	}
}

// TestMaxPendingTransactions abandons a checkpoint so the sink holds two
// prepared transactions at the next one, over a bound of one.
func TestMaxPendingTransactions(t *testing.T) {
	c := newCountJob(t)
	release := make(chan struct{})
	var first atomic.Bool
	ops := countOps()
	ops["count"] = func() operator.Operator {
		if first.CompareAndSwap(false, true) {
			return &slowSnapshot{release: release}
		}
		return &slowSnapshot{}
	}
	opts := testOptions(ops)
	opts.ckptTimeout = 200 * time.Millisecond
	opts.Recovery = RecoverFail
	hooks := &seqHooks{}
	hooks.pauseAt.Store(500)
	p := c.plan(hooks, 2)
	p.State.MaxPendingTransactions = 1
	j, err := Build("jobs[0]", p, opts)
	if err != nil {
		t.Fatal(err)
	}
	wait, _ := runJob(t, j)
	eventually(t, "500 records at the sink", func() bool { return sinkRecords(j) == 500 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := j.Checkpoint(ctx); err == nil {
		t.Fatal("checkpoint 1 did not time out")
	}
	close(release)
	go j.Checkpoint(ctx) //nolint:errcheck // the job fails under it
	err = wait()
	if err == nil || !strings.Contains(err.Error(), "max_pending_transactions (1)") {
		t.Fatalf("Run = %v, want the pending transactions bound", err)
	}
}

// TestRetentionKeepsPinnedCheckpoints: a checkpoint a listed sink
// transaction was prepared at outlives retention.
func TestRetentionKeepsPinnedCheckpoints(t *testing.T) {
	ctx := context.Background()
	arts, err := state.OpenArtifacts(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer arts.Close()
	p := makePlan("pins", 16, nil, nil)
	p.Checkpoint = &config.Checkpoint{Retention: 1}
	var last *state.Manifest
	for id := int64(1); id <= 4; id++ {
		last = &state.Manifest{Kind: state.KindCheckpoint, ID: id, JobID: "pins"}
		if err := arts.Commit(ctx, last); err != nil {
			t.Fatal(err)
		}
	}
	last.Sinks = []state.SinkTxn{{Operator: "out", Checkpoint: 2}, {Operator: "out", Checkpoint: 4}}
	j := &Job{plan: p, log: slog.New(slog.DiscardHandler)}
	c := newCoordinator(&attempt{j: j, p: p, arts: arts})
	c.retain(ctx, last)
	ms, err := arts.List(ctx, "pins", state.KindCheckpoint)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	if want := []int64{2, 4}; !slices.Equal(ids, want) {
		t.Errorf("checkpoints %v after retention 1 with 2 pinned, want %v", ids, want)
	}
}
