package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/kernel"
	"github.com/flowplane/flowplane/internal/sandbox"
	"github.com/flowplane/flowplane/internal/state"
	"github.com/flowplane/flowplane/internal/tap"
)

// ErrJobNotFound is returned for an unknown job id.
var ErrJobNotFound = errors.New("job not found")

// ErrJobConfigured is returned by StartHubJob for a job id the node's
// configuration uses.
var ErrJobConfigured = errors.New("the job id is used by the node's configuration")

// ErrJobNotRunning is returned by CheckpointJob and SavepointJob (and by
// StopJob with a savepoint) for a job that is not running.
var ErrJobNotRunning = errors.New("the job is not running")

// jobInstance is one job, configured or placed by the Hub, and, while it
// runs, its runtime.
type jobInstance struct {
	member
	conf config.Job

	// A Hub job is placed by the Hub (StartHubJob), not configured: applies
	// leave it alone. Its generation fences its artifact store; recovery
	// and restore are those of its last start.
	hub        bool
	generation int64
	recovery   string
	restore    *kernel.ArtifactRef
	// split is the placement of a job whose tasks run on several nodes;
	// nil when the whole job runs here. Each start joins its mesh anew.
	split *split

	plan *job.Plan
	// taps outlive the runs: a tap stays attached across restarts.
	taps tap.Set
	rt   *kernel.Job
}

func (ji *jobInstance) config() config.Job { return ji.conf }

// JobStateRoot is where job state lives when a job's state.root is empty
// (empty without a state directory).
func (e *Engine) JobStateRoot() string { return e.stateRoot() }

// stateRoot is where job state lives when a job's state.root is empty.
func (e *Engine) stateRoot() string {
	if e.opts.StateDir == "" {
		return ""
	}
	return filepath.Join(e.opts.StateDir, "jobs")
}

// jobKind is how Apply handles configured jobs, as it does streams:
// unchanged jobs keep running, changed ones stop and start again
// (restoring from their recovery mode), removed ones stop. A Hub job is
// not configured: applies leave it alone, and a configured job of its id
// is refused.
func (e *Engine) jobKind() kind[config.Job, *jobInstance] {
	return kind[config.Job, *jobInstance]{
		name: "jobs", byID: e.jobs, order: &e.jobOrder,
		id: func(j config.Job) string { return j.ID },
		create: func(j config.Job, path string) *jobInstance {
			return &jobInstance{conf: j, member: member{path: path}}
		},
		stop:  func(ctx context.Context, ji *jobInstance) { _, _ = e.stopJob(ctx, ji, false) },
		start: func(ji *jobInstance) error { return e.startJob(ji, "") },
		forget: func(id string) {
			if e.jobMetrics != nil {
				e.jobMetrics.Forget(id)
			}
		},
		refuse: func(id, path string) error {
			if ji, kept := e.jobs[id]; kept && ji.hub {
				// The Hub placed a job of that id first: it keeps running,
				// and the configured one does not.
				return fmt.Errorf("%s: job %q is not started: the Hub runs a job of that id on this node", path, id)
			}
			return nil
		},
	}
}

func (e *Engine) job(id string) *jobInstance {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.jobs[id]
}

// startJob plans, builds and launches one job; recovery overrides the
// job's recovery mode when not empty. The caller holds e.opMu.
func (e *Engine) startJob(ji *jobInstance, recovery string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	log := e.log.With("job", ji.conf.ID)
	fail := func(err error) error {
		ji.err, ji.done, ji.rt, ji.stopped = err, closedChan(), nil, false
		return err
	}
	plan, ps := job.Build(ji.path, ji.conf)
	if len(ps) > 0 {
		return fail(&config.Error{Problems: ps})
	}
	id := ji.conf.ID
	spec := ji.conf
	opts := kernel.Options{
		Spec:      &spec,
		Registry:  e.opts.Registry,
		Logger:    log,
		Metrics:   e.jobMetrics,
		StateRoot: e.stateRoot(),
		Recovery:  recovery,
		Taps:      &ji.taps,
		Tracer:    e.opts.Tracer,
	}
	if ji.hub {
		opts.FenceGeneration, opts.Restore = ji.generation, ji.restore
	}
	if ji.hub || ji.remote {
		opts.FS, opts.Net = e.opts.Remote.FS, e.opts.Remote.Net
	}
	// A split job's mesh lives as long as this run: it is closed when Run
	// returns (the job ended, was stopped, removed or restarted).
	closeMesh := func() {}
	if ji.split != nil {
		sp, err := e.joinSplit(id, plan, ji.split)
		if err != nil {
			return fail(err)
		}
		opts.Split = sp
		closeMesh = func() {
			if err := sp.Mesh.Close(); err != nil {
				log.Warn("close the job's data-plane mesh", "err", err)
			}
		}
	}
	hook := e.opts.OnJobState
	opts.OnState = func(st kernel.State) {
		if hook != nil {
			hook(id, st)
		}
		e.notifyJobs()
	}
	rt, err := kernel.Build(ji.path, plan, opts)
	if err != nil {
		closeMesh()
		return fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ji.plan, ji.rt, ji.cancel, ji.done, ji.err, ji.stopped = plan, rt, cancel, make(chan struct{}), nil, false
	done := ji.done
	go func() {
		err := rt.Run(ctx)
		if cerr := rt.Close(); cerr != nil {
			log.Warn("close the job's artifact store", "err", cerr)
		}
		closeMesh()
		if err != nil && !errors.Is(err, context.Canceled) {
			log.Error("job ended with an error", "err", err)
		} else {
			log.Info("job ended", "state", rt.Observe().State)
		}
		e.mu.Lock()
		ji.err = err
		e.mu.Unlock()
		close(done)
		e.notify()
		e.notifyJobs()
	}()
	return nil
}

// stopJob stops one job, first taking a savepoint when asked, and waits for
// it (bounded by ctx). The caller holds e.opMu.
func (e *Engine) stopJob(ctx context.Context, ji *jobInstance, savepoint bool) (*state.Manifest, error) {
	e.mu.Lock()
	rt, cancel, done := ji.rt, ji.cancel, ji.done
	ji.cancel = nil
	if cancel != nil {
		ji.stopped = true
	}
	e.mu.Unlock()
	if cancel == nil {
		if savepoint {
			return nil, fmt.Errorf("%w: job %q: no savepoint taken", ErrJobNotRunning, ji.conf.ID)
		}
		return nil, nil
	}
	m, err := rt.Stop(ctx, kernel.StopOptions{Savepoint: savepoint})
	cancel()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return m, err
}

// StartJob starts a configured job that is not running. recovery, when not
// empty, overrides the job's recovery mode for this start
// (latest_checkpoint, latest_savepoint, fail, or none to start empty).
func (e *Engine) StartJob(ctx context.Context, id, recovery string) error {
	e.opMu.Lock()
	defer e.opMu.Unlock()
	ji := e.job(id)
	if ji == nil {
		return fmt.Errorf("%w: %q", ErrJobNotFound, id)
	}
	if !e.ended(&ji.member) {
		return nil // running
	}
	err := e.startJob(ji, recovery)
	e.notify()
	return err
}

// HubJob is a job the Hub placed on this node.
type HubJob struct {
	// Spec is the materialized job (secret references resolved).
	Spec config.Job
	// Path prefixes the paths of build problems; empty means "spec".
	Path string
	// Generation fences the job's artifact store (kernel
	// Options.FenceGeneration); 0 is no fence.
	Generation int64
	// Recovery overrides the spec's recovery mode when set: a kernel
	// Recover* mode, artifact with Restore.
	Recovery string
	Restore  *kernel.ArtifactRef
	// Split placement: TaskNodes maps every task of the plan to its node,
	// DataAddresses every node involved to its data address and
	// DataFingerprints to its data-plane certificate fingerprint (which
	// the links pin), DataSecret authenticates the job's links. Empty
	// TaskNodes: the job runs whole here.
	TaskNodes        map[string]string
	DataAddresses    map[string]string
	DataFingerprints map[string]string
	DataSecret       []byte
}

// StartHubJob (re)defines a Hub job from h.Spec and starts it; a running
// instance of that id is stopped first (without a savepoint). A job id the
// node's configuration uses is refused with ErrJobConfigured. Problems
// building the job are returned (a *config.Error or *kernel.BuildError);
// the job is then held, failed, until the next StartHubJob or RemoveHubJob.
//
// A job with TaskNodes runs only the tasks placed on this node (NodeID):
// it needs the node's data plane (an error wrapping ErrNoDataPlane
// otherwise), a placement of exactly the plan's tasks with at least one of
// them here, a data address for every other node and a data secret (an
// error wrapping ErrSplitPlacement otherwise; the job is held, failed, as
// for a build problem). Each start joins the job's mesh on the data plane;
// the mesh is closed when that run ends.
// Failures of the run itself (a fence, an artifact that cannot be
// restored) show in Job's observation.
func (e *Engine) StartHubJob(ctx context.Context, h HubJob) error {
	e.opMu.Lock()
	defer e.opMu.Unlock()
	id := h.Spec.ID
	old := e.job(id)
	if old != nil && !old.hub {
		return fmt.Errorf("%w: %q", ErrJobConfigured, id)
	}
	if old != nil {
		if _, err := e.stopJob(ctx, old, false); err != nil {
			return fmt.Errorf("stop the running instance of job %q: %w", id, err)
		}
		select {
		case <-old.done:
		default:
			return fmt.Errorf("stop the running instance of job %q: %w", id, ctx.Err())
		}
	}
	path := h.Path
	if path == "" {
		path = "spec"
	}
	ji := &jobInstance{conf: h.Spec, member: member{path: path}, hub: true, generation: h.Generation, recovery: h.Recovery, restore: h.Restore, split: splitOf(h)}
	e.mu.Lock()
	e.jobs[id] = ji
	if old == nil {
		i, _ := slices.BinarySearch(e.hubOrder, id)
		e.hubOrder = slices.Insert(e.hubOrder, i, id)
	}
	e.mu.Unlock()
	err := e.startJob(ji, h.Recovery)
	e.notify()
	e.notifyJobs()
	return err
}

// RemoveHubJob stops a Hub job (without a savepoint) and forgets it; an
// unknown id is not an error. A configured job is refused.
func (e *Engine) RemoveHubJob(ctx context.Context, id string) error {
	e.opMu.Lock()
	defer e.opMu.Unlock()
	ji := e.job(id)
	if ji == nil {
		return nil
	}
	if !ji.hub {
		return fmt.Errorf("%w: %q", ErrJobConfigured, id)
	}
	if _, err := e.stopJob(ctx, ji, false); err != nil {
		return err
	}
	e.mu.Lock()
	delete(e.jobs, id)
	e.hubOrder = slices.DeleteFunc(e.hubOrder, func(x string) bool { return x == id })
	e.mu.Unlock()
	if e.jobMetrics != nil {
		e.jobMetrics.Forget(id)
	}
	e.notify()
	e.notifyJobs()
	return nil
}

// JobChanges returns a channel signalled (coalesced) whenever a job enters
// a state, ends, or a Hub job is started or removed; and the function that
// stops the signals. Each caller has its own channel: a change made before
// the call is not signalled.
func (e *Engine) JobChanges() (<-chan struct{}, func()) { return e.jobChanges.watch() }

func (e *Engine) notifyJobs() { e.jobChanges.notify() }

// StopJob stops one job, optionally with a final savepoint whose manifest
// it returns; the job stays configured and can be started again.
func (e *Engine) StopJob(ctx context.Context, id string, savepoint bool) (*state.Manifest, error) {
	e.opMu.Lock()
	defer e.opMu.Unlock()
	ji := e.job(id)
	if ji == nil {
		return nil, fmt.Errorf("%w: %q", ErrJobNotFound, id)
	}
	m, err := e.stopJob(ctx, ji, savepoint)
	e.notify()
	return m, err
}

// running returns the runtime of a running job.
func (e *Engine) running(id string) (*kernel.Job, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ji := e.jobs[id]
	if ji == nil {
		return nil, fmt.Errorf("%w: %q", ErrJobNotFound, id)
	}
	if ji.rt == nil || ji.cancel == nil {
		return nil, fmt.Errorf("%w: %q", ErrJobNotRunning, id)
	}
	return ji.rt, nil
}

// CheckpointJob triggers a checkpoint of a running job and waits for it.
func (e *Engine) CheckpointJob(ctx context.Context, id string) (*state.Manifest, error) {
	rt, err := e.running(id)
	if err != nil {
		return nil, err
	}
	return rt.Checkpoint(ctx)
}

// SavepointJob triggers a savepoint of a running job and waits for it.
func (e *Engine) SavepointJob(ctx context.Context, id string) (*state.Manifest, error) {
	rt, err := e.running(id)
	if err != nil {
		return nil, err
	}
	return rt.Savepoint(ctx)
}

// JobArtifacts lists a job's complete checkpoints or savepoints (kind
// state.KindCheckpoint or state.KindSavepoint), oldest first. The job need
// not be running: its artifact store is opened from its configuration.
func (e *Engine) JobArtifacts(ctx context.Context, id, kind string) ([]*state.Manifest, error) {
	e.mu.Lock()
	ji := e.jobs[id]
	e.mu.Unlock()
	if ji == nil {
		return nil, fmt.Errorf("%w: %q", ErrJobNotFound, id)
	}
	if ji.conf.Checkpoint == nil {
		return nil, kernel.ErrNoCheckpointing
	}
	var fsys sandbox.FS
	if ji.hub || ji.remote {
		fsys = e.opts.Remote.FS
	}
	a, err := state.OpenArtifactsIn(ctx, ji.conf.Checkpoint.ObjectStoreURI, fsys, sandbox.FS{})
	if err != nil {
		return nil, err
	}
	defer a.Close()
	return a.List(ctx, id, kind)
}

// JobStatus is one job's observed view.
type JobStatus struct {
	kernel.Observation
	Path string `json:"-"`
	// Hub is true for a job the Hub placed (StartHubJob); Generation is
	// its fence generation.
	Hub        bool  `json:"-"`
	Generation int64 `json:"-"`
	// Err is the build error or Run's result once the job ended (nil while
	// it runs), for errors.Is (state.ErrFenced).
	Err error `json:"-"`
	// Fenced is true for a job whose run ended because a newer placement
	// took its artifact store (Err wraps ErrFenced): the job moved to
	// another node. It reads stopped, not failed: losing a job to a newer
	// placement is not a failure of this node (Flink's suspended).
	Fenced bool `json:"-"`
	// ObjectStoreURI is the job's checkpoint store (empty without
	// checkpointing); it may hold credentials in its query.
	ObjectStoreURI string `json:"-"`
	// TaskNodes is a split job's placement, task -> node (a copy); nil for
	// a job that runs whole here.
	TaskNodes map[string]string `json:"-"`
	// RecordsIn counts the records the job's sources read on this node,
	// RecordsOut those its sinks' tasks wrote (in the current run).
	RecordsIn  int64 `json:"-"`
	RecordsOut int64 `json:"-"`
}

// Jobs returns every job's status: the configured ones in configuration
// order, then the Hub's by id.
func (e *Engine) Jobs() []JobStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]JobStatus, 0, len(e.jobOrder)+len(e.hubOrder))
	for _, id := range e.allJobsLocked() {
		out = append(out, e.jobStatusLocked(e.jobs[id]))
	}
	return out
}

// HubJobs returns the status of every Hub job, by id.
func (e *Engine) HubJobs() []JobStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]JobStatus, 0, len(e.hubOrder))
	for _, id := range e.hubOrder {
		out = append(out, e.jobStatusLocked(e.jobs[id]))
	}
	return out
}

// allJobsLocked is every job id: configured, then the Hub's.
func (e *Engine) allJobsLocked() []string {
	return append(slices.Clip(e.jobOrder), e.hubOrder...)
}

// Job returns one job's status.
func (e *Engine) Job(id string) (JobStatus, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ji := e.jobs[id]
	if ji == nil {
		return JobStatus{}, fmt.Errorf("%w: %q", ErrJobNotFound, id)
	}
	return e.jobStatusLocked(ji), nil
}

// JobPlan returns the plan of a configured job, building it when the job
// has not run.
func (e *Engine) JobPlan(id string) (*job.Plan, error) {
	e.mu.Lock()
	ji := e.jobs[id]
	e.mu.Unlock()
	if ji == nil {
		return nil, fmt.Errorf("%w: %q", ErrJobNotFound, id)
	}
	if ji.plan != nil {
		return ji.plan, nil
	}
	p, ps := job.Build(ji.path, ji.conf)
	if len(ps) > 0 {
		return nil, &config.Error{Problems: ps}
	}
	return p, nil
}

func (e *Engine) jobStatusLocked(ji *jobInstance) JobStatus {
	st := JobStatus{Path: ji.path, Hub: ji.hub, Generation: ji.generation}
	if ji.conf.Checkpoint != nil {
		st.ObjectStoreURI = ji.conf.Checkpoint.ObjectStoreURI
	}
	if ji.split != nil {
		st.TaskNodes = maps.Clone(ji.split.taskNodes)
	}
	if ji.rt != nil {
		st.Observation = ji.rt.Observe()
		st.RecordsIn, st.RecordsOut = recordTotals(ji.plan, st.Tasks)
	} else {
		st.JobID, st.Version, st.State = ji.conf.ID, ji.conf.Version, kernel.Failed
		if ji.err == nil && ji.stopped {
			st.State = kernel.Stopped
		}
	}
	st.Err = ji.err
	if ji.err != nil && st.Error == "" && !errors.Is(ji.err, context.Canceled) {
		st.Error = ji.err.Error()
	}
	if ji.rt != nil && ji.cancel == nil && st.State != kernel.Completed && st.State != kernel.Failed {
		st.State = kernel.Stopped
	}
	if errors.Is(ji.err, ErrFenced) {
		st.State, st.Fenced = kernel.Stopped, true
	}
	return st
}

// recordTotals sums the records the source tasks read and the records the
// tasks holding a sink wrote.
func recordTotals(p *job.Plan, tasks []kernel.TaskStatus) (in, out int64) {
	if p == nil {
		return 0, 0
	}
	source, sink := map[string]bool{}, map[string]bool{}
	for _, c := range p.Chains {
		for i, id := range c.Operators {
			switch op := p.Operator(id); {
			case op == nil:
			case i == 0 && op.Kind == "source":
				source[c.ID] = true
			case op.Kind == "sink":
				sink[c.ID] = true
			}
		}
	}
	for _, t := range tasks {
		chain, _, _ := strings.Cut(t.ID, "#")
		if source[chain] {
			in += t.RecordsIn
		}
		if sink[chain] {
			out += t.RecordsOut
		}
	}
	return in, out
}

// jobsNotReadyLocked returns the ids of jobs that should run and do not:
// starting, recovering or failed. A job stopped on request, completed or
// fenced (it runs elsewhere now) does not count.
func (e *Engine) jobsNotReadyLocked() []string {
	var ids []string
	for _, id := range e.allJobsLocked() {
		ji := e.jobs[id]
		if ji.stopped || errors.Is(ji.err, ErrFenced) {
			continue
		}
		if st := e.jobStatusLocked(ji).State; st != kernel.Running && st != kernel.Completed {
			ids = append(ids, id)
		}
	}
	return ids
}

// jobsFailedLocked returns the ids of jobs that failed.
func (e *Engine) jobsFailedLocked() []string {
	var ids []string
	for _, id := range e.allJobsLocked() {
		if e.jobStatusLocked(e.jobs[id]).State == kernel.Failed {
			ids = append(ids, id)
		}
	}
	return ids
}

// jobsFinishedLocked reports whether every job ended by itself.
func (e *Engine) jobsFinishedLocked() bool {
	for _, id := range e.allJobsLocked() {
		if !e.jobs[id].endedByItself() {
			return false
		}
	}
	return true
}
