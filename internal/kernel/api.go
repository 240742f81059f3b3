package kernel

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/state"
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
	// Recovery overrides the plan's recovery mode for this run when set
	// (latest_checkpoint, latest_savepoint, fail, or none to start empty).
	Recovery string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnState, when set, is called with every state the job enters; it must
	// not block.
	OnState func(State)
}

// Job is one job's runtime. Its methods are safe for concurrent use.
type Job struct{}

// Build constructs every component and operator of the plan without
// starting anything: the deep check --validate runs. Problems carry
// configuration paths under prefix (for example "jobs[0]").
func Build(prefix string, p *job.Plan, opts Options) (*Job, error) { panic("not implemented") }

// Run runs the job until its sources end (Completed), ctx ends or Stop is
// called (Stopped), or it fails beyond recovery (Failed, with the error).
// A task failure restarts the job from its recovery artifact with capped
// backoff while in state Recovering.
func (j *Job) Run(ctx context.Context) error { panic("not implemented") }

// StopOptions say how to stop.
type StopOptions struct {
	// Savepoint takes a final savepoint before stopping.
	Savepoint bool
}

// Stop stops the job and waits for Run to return or ctx to end. With
// Savepoint it returns the savepoint's manifest.
func (j *Job) Stop(ctx context.Context, o StopOptions) (*state.Manifest, error) {
	panic("not implemented")
}

// Checkpoint triggers a checkpoint now and waits until it completes or
// fails; it returns its manifest.
func (j *Job) Checkpoint(ctx context.Context) (*state.Manifest, error) { panic("not implemented") }

// Savepoint triggers a savepoint now and waits for it.
func (j *Job) Savepoint(ctx context.Context) (*state.Manifest, error) { panic("not implemented") }

// Artifacts lists the job's complete checkpoints or savepoints (kind),
// oldest first.
func (j *Job) Artifacts(ctx context.Context, kind string) ([]*state.Manifest, error) {
	panic("not implemented")
}

// ErrNoCheckpointing is returned by Checkpoint and Savepoint for a job
// without a checkpoint object_store_uri.
var ErrNoCheckpointing = errors.New("the job has no checkpoint configuration")

// Observation is a point-in-time view of a running job.
type Observation struct {
	JobID   string       `json:"job_id"`
	Version int          `json:"version"`
	State   State        `json:"state"`
	Error   string       `json:"error,omitempty"`
	Tasks   []TaskStatus `json:"tasks"`
	// WatermarkLagMs is processing time minus the lowest task watermark.
	WatermarkLagMs       int64  `json:"watermark_lag_ms"`
	LastCheckpoint       int64  `json:"last_checkpoint,omitempty"`
	CheckpointDurationMs int64  `json:"checkpoint_duration_ms"`
	CheckpointFailures   int64  `json:"checkpoint_failures"`
	StateBytes           int64  `json:"state_bytes"`
	Restarts             int    `json:"restarts"`
	RestoredFrom         string `json:"restored_from,omitempty"` // "checkpoint 12", "savepoint 3"
}

// TaskStatus is one task's observed state.
type TaskStatus struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	Watermark  int64  `json:"watermark"`
	RecordsIn  int64  `json:"records_in"`
	RecordsOut int64  `json:"records_out"`
}

// Observe returns the job's current observation.
func (j *Job) Observe() Observation { panic("not implemented") }

// Plan returns the plan the job runs.
func (j *Job) Plan() *job.Plan { panic("not implemented") }

// Metrics are the svc_job_* collectors shared by every job of a node.
type Metrics struct{}
