package kernel

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/dataplane"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/operator"
	"github.com/flowplane/flowplane/internal/sandbox"
	"github.com/flowplane/flowplane/internal/state"
	"github.com/flowplane/flowplane/internal/tap"
)

// State is a job's observed state (API.md): starting, running, stopping,
// stopped, failed, recovering; and completed when every source ended and
// the output is complete.
type State string

// The states of a job.
const (
	Starting   State = "starting"
	Running    State = "running"
	Stopping   State = "stopping"
	Stopped    State = "stopped"
	Failed     State = "failed"
	Recovering State = "recovering"
	Completed  State = "completed"
)

// Options configure a job runtime.
type Options struct {
	Registry *component.Registry
	Logger   *slog.Logger
	Metrics  *Metrics // optional
	// StateRoot is the directory task stores live under when the job's
	// state.root is empty (SVC_STATE_ROOT, else the node's state dir).
	StateRoot string
	// FS and Net are what the job's components, task stores and file://
	// artifact store reach files and the network through (the node's
	// remote policy for a Hub job); zero values restrict nothing.
	FS  sandbox.FS
	Net sandbox.Net
	// Recovery overrides the plan's recovery mode for this run when set
	// (latest_checkpoint, latest_savepoint, fail, none to start empty,
	// newest for the newest artifact of either kind, or artifact to
	// restore exactly Restore).
	Recovery string
	// Restore is the artifact Recovery artifact restores. When it is
	// missing or cannot be restored into the plan, the job fails
	// permanently: it never falls back to another artifact or to empty
	// state.
	Restore *ArtifactRef
	// FenceGeneration fences the job's artifact store (0: no fence). With
	// checkpointing, each attempt refuses to start, and each checkpoint or
	// savepoint refuses to commit, once the store's fence holds a greater
	// generation (a newer placement of the job took over): the job fails
	// permanently with an error wrapping state.ErrFenced. Otherwise the
	// job writes its own generation there.
	FenceGeneration int64
	// Now is the job's clock, the only one it reads: processing time,
	// idle timeouts, watermark lag, checkpoint durations and manifest
	// times, and the numbers of commits without checkpoints. nil means
	// time.Now. Timers that only pace or bound waits (the task timer, the
	// checkpoint interval and timeout, retry backoff) run on real time.
	Now func() time.Time
	// OnState, when set, is called with every state the job enters; it must
	// not block.
	OnState func(State)
	// Split, when set, runs only this node's share of a job placed on
	// several nodes; the others are reached over Split.Mesh.
	Split *Split
	// Tracer, when set, traces the job's batches per chain (trace.go);
	// nil is tracing off.
	Tracer trace.Tracer
	// Spec is the job's configuration the plan was built from. It is only
	// used to name build problems by their index in sources[], sinks[] and
	// operators[]; without it they are named by plan order.
	Spec *config.Job
	// Taps, when set, is offered the records each operator of this node's
	// tasks emits (a sink: the records it is given), at the point named by
	// the operator's id; the caller keeps it across restarts. Without a
	// tap attached it costs one atomic load per operator call.
	Taps *tap.Set

	// Test hooks: nil means operator.New, operator.NewKey and a sleep on a
	// timer.
	newOperator newOperatorFunc
	newKey      func(expression string) (keyer, error)
	sleep       func(ctx context.Context, d time.Duration) error
	tick        time.Duration // flush and watermark timer; 0 means 50 ms
	ckptTimeout time.Duration // 0: 10 intervals, at least 1 min, at most 10 min
}

// Split is one node's share of a split job: the node of the plan's first
// task coordinates (job.Plan.Coordinator) and every other node follows it.
type Split struct {
	// Self is this node's id.
	Self string
	// TaskNodes maps every task of the plan to the node running it.
	TaskNodes map[string]string
	// Mesh is the job's data plane on this node.
	Mesh *dataplane.Mesh
}

// ArtifactRef names one checkpoint or savepoint of the job.
type ArtifactRef struct {
	Kind string // state.KindCheckpoint or state.KindSavepoint
	ID   int64
}

// Job is one job's runtime. Its methods are safe for concurrent use.
type Job struct {
	prefix string
	plan   *job.Plan
	opts   Options
	paths  paths
	log    *slog.Logger

	triggers chan *trigger // on-demand checkpoints, served by the running attempt's coordinator
	split    *splitRun     // nil unless Options.Split
	stopOnce sync.Once
	stopc    chan struct{} // closed by Stop
	done     chan struct{} // closed when Run returns

	artsOnce sync.Once
	arts     *state.Artifacts
	artsErr  error

	mu        sync.Mutex // guards the fields below
	first     *instances // built by Build, used by the first attempt
	ran       bool
	st        State
	err       error
	lastErr   error // the last failure of an attempt, kept once the job recovers
	restarts  int
	restored  string
	tasks     []*task // the current attempt's
	lastCkpt  int64
	committed bool // an artifact of this Job completed: restarts restore the newest
	ckptDurMs int64
	ckptFails int64
	stBytes   int64
}

// Build constructs every component and operator of the plan without
// starting anything: the deep check --validate runs. Problems carry
// configuration paths under prefix (for example "jobs[0]"); the error is a
// *BuildError.
func Build(prefix string, p *job.Plan, opts Options) (*Job, error) {
	if opts.Registry == nil {
		opts.Registry = component.Default
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.newOperator == nil {
		fsys := opts.FS
		opts.newOperator = func(op *job.Operator) (operator.Operator, error) { return operator.NewIn(op, fsys) }
	}
	if opts.newKey == nil {
		opts.newKey = defaultNewKey
	}
	if opts.sleep == nil {
		opts.sleep = sleepCtx
	}
	if opts.tick == 0 {
		opts.tick = 50 * time.Millisecond
	}
	j := &Job{
		prefix:   prefix,
		plan:     p,
		opts:     opts,
		paths:    newPaths(prefix, p, opts.Spec),
		log:      opts.Logger.With("job", p.JobID),
		triggers: make(chan *trigger),
		stopc:    make(chan struct{}),
		done:     make(chan struct{}),
		st:       Starting,
	}
	if opts.Split != nil {
		sp, err := newSplitRun(j, opts.Split)
		if err != nil {
			return nil, &BuildError{Problems: []config.Problem{{Path: prefix, Message: err.Error()}}}
		}
		j.split = sp
	}
	inst, err := j.construct()
	if err != nil {
		return nil, err
	}
	j.first = inst
	return j, nil
}

// StopOptions say how to stop.
type StopOptions struct {
	// Savepoint takes a final savepoint before stopping.
	Savepoint bool
}

// Stop stops the job and waits for Run to return or ctx to end. With
// Savepoint it returns the savepoint's manifest; when the savepoint fails
// the job keeps running and the error is returned.
func (j *Job) Stop(ctx context.Context, o StopOptions) (*state.Manifest, error) {
	var m *state.Manifest
	if sp := j.split; sp != nil && !sp.coordinator() && o.Savepoint {
		// The coordinator takes the savepoint, then ends the job here.
		select {
		case <-sp.endedCh:
		case <-j.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else if o.Savepoint {
		var err error
		if m, err = j.Savepoint(ctx); err != nil {
			return nil, err
		}
	}
	j.mu.Lock()
	ran := j.ran
	j.mu.Unlock()
	j.stopOnce.Do(func() { close(j.stopc) })
	if !ran {
		return m, nil
	}
	select {
	case <-j.done:
		return m, nil
	case <-ctx.Done():
		return m, ctx.Err()
	}
}

// Checkpoint triggers a checkpoint now and waits until it completes or
// fails; it returns its manifest.
func (j *Job) Checkpoint(ctx context.Context) (*state.Manifest, error) {
	return j.trigger(ctx, false)
}

// Savepoint triggers a savepoint now and waits for it.
func (j *Job) Savepoint(ctx context.Context) (*state.Manifest, error) {
	return j.trigger(ctx, true)
}

// ErrNotRunning is returned by Checkpoint and Savepoint when the job has
// ended or its sources are done.
var ErrNotRunning = errors.New("the job is not running")

func (j *Job) trigger(ctx context.Context, savepoint bool) (*state.Manifest, error) {
	if j.plan.Checkpoint == nil {
		return nil, ErrNoCheckpointing
	}
	if j.split != nil && !j.split.coordinator() {
		return nil, ErrNotCoordinator
	}
	t := &trigger{savepoint: savepoint, reply: make(chan triggerResult, 1)}
	select {
	case j.triggers <- t:
	case <-j.done:
		return nil, ErrNotRunning
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-t.reply:
		return r.m, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Artifacts lists the job's complete checkpoints or savepoints (kind),
// oldest first.
func (j *Job) Artifacts(ctx context.Context, kind string) ([]*state.Manifest, error) {
	a, err := j.artifacts(ctx)
	if err != nil {
		return nil, err
	}
	return a.List(ctx, j.plan.JobID, kind)
}

// Close releases the job's artifact store. Call it once Run returned;
// the Job is not used after.
func (j *Job) Close() error {
	j.artsOnce.Do(func() { j.artsErr = errClosed }) // a later artifacts() opens nothing
	if j.arts != nil {
		return j.arts.Close()
	}
	return nil
}

var errClosed = errors.New("the job is closed")

// artifacts opens the job's artifact store once.
func (j *Job) artifacts(ctx context.Context) (*state.Artifacts, error) {
	if j.plan.Checkpoint == nil {
		return nil, ErrNoCheckpointing
	}
	j.artsOnce.Do(func() {
		j.arts, j.artsErr = state.OpenArtifactsIn(ctx, j.plan.Checkpoint.ObjectStoreURI, j.opts.FS, j.stateFS())
	})
	return j.arts, j.artsErr
}

// ErrNoCheckpointing is returned by Checkpoint and Savepoint for a job
// without a checkpoint object_store_uri.
var ErrNoCheckpointing = errors.New("the job has no checkpoint configuration")

// Plan returns the plan the job runs.
func (j *Job) Plan() *job.Plan { return j.plan }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
