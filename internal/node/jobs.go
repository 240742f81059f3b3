package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/wire"
)

// Job operation names on a node: the Hub's command names, and a restart.
const (
	OpJobStart      = wire.CommandJobStart
	OpJobStop       = wire.CommandJobStop
	OpJobRestart    = "job_restart"
	OpJobCheckpoint = wire.CommandJobCheckpoint
	OpJobSavepoint  = wire.CommandJobSavepoint
)

// isJobOp reports whether an operation acts on a job.
func isJobOp(name string) bool { return strings.HasPrefix(name, "job_") }

// Errors of job actions the API maps to problems.
var (
	ErrJobNotFound = engine.ErrJobNotFound
	// ErrJobManagedByHub: the Hub placed the job; the Node API shows it
	// but changes it only through the Hub.
	ErrJobManagedByHub = errors.New("the Hub manages the job")
	// ErrJobRunning: a start with a recovery mode of a job that runs.
	ErrJobRunning = errors.New("the job is running")
	// ErrJobNotRunning: a checkpoint, savepoint or stop with a savepoint
	// of a job that does not run.
	ErrJobNotRunning = engine.ErrJobNotRunning
	// ErrNoCheckpointing: a checkpoint or savepoint of a job without a
	// checkpoint configuration.
	ErrNoCheckpointing = engine.ErrNoCheckpointing
)

// Recovery modes a job start or restart takes (the Hub's desired-state
// recovery): the spec's recovery modes, and none to start empty.
var recoveryModes = []string{engine.RecoverLatestCheckpoint, engine.RecoverLatestSavepoint, engine.RecoverFail, engine.RecoverNone}

// jobOpTimeout bounds one job operation: a stop waits for the job's tasks,
// a savepoint for its barrier.
const jobOpTimeout = 5 * time.Minute

// JobView is one job as GET /jobs and GET /jobs/{id} show it: what the
// runtime observes of it on this node. It is the one place the Node API
// reads a job's status (engine.JobStatus), so what the runtime learns to
// report (a restart strategy's failed state and last_error) shows here
// without another change.
type JobView struct {
	ID      string `json:"id"`
	NodeID  string `json:"node_id"`
	Version int    `json:"version"`
	// State is starting, running, recovering, stopping, stopped, failed
	// or completed.
	State string `json:"state"`
	// Fenced is true for a job a newer placement took over (it moved to
	// another node); its state is then stopped.
	Fenced bool `json:"fenced,omitempty"`
	// Authority is node for a job of the node's configuration, hub for one
	// the Hub placed (read-only through the Node API).
	Authority string `json:"authority"`
	// Placement is colocated (every task here) or split; TaskNodes is a
	// split job's task -> node map.
	Placement            string            `json:"placement"`
	TaskNodes            map[string]string `json:"task_nodes,omitempty"`
	Tasks                []wire.JobTask    `json:"tasks"`
	RecordsIn            int64             `json:"records_in"`
	RecordsOut           int64             `json:"records_out"`
	WatermarkLagMS       int64             `json:"watermark_lag_ms"`
	LastCheckpoint       int64             `json:"last_checkpoint,omitempty"`
	CheckpointDurationMS int64             `json:"checkpoint_duration_ms"`
	CheckpointFailures   int64             `json:"checkpoint_failures"`
	StateBytes           int64             `json:"state_bytes"`
	Restarts             int               `json:"restarts"`
	RestoredFrom         string            `json:"restored_from,omitempty"`
	// Checkpointing is true when the job has a checkpoint configuration
	// (it can take checkpoints and savepoints).
	Checkpointing   bool            `json:"checkpointing"`
	LastError       string          `json:"last_error,omitempty"`
	LatestOperation *wire.Operation `json:"latest_operation,omitempty"`
}

// Jobs returns every job's view: the configured ones in configuration
// order, then the Hub's by id.
func (n *Node) Jobs() []JobView {
	sts := n.opts.Engine.Jobs()
	out := make([]JobView, 0, len(sts))
	for _, st := range sts {
		out = append(out, n.jobView(st))
	}
	return out
}

// Job returns one job's view.
func (n *Node) Job(id string) (JobView, error) {
	st, err := n.opts.Engine.Job(id)
	if err != nil {
		return JobView{}, err
	}
	return n.jobView(st), nil
}

func (n *Node) jobView(st engine.JobStatus) JobView {
	v := JobView{
		ID: st.JobID, NodeID: n.opts.NodeID, Version: st.Version, State: string(st.State), Fenced: st.Fenced,
		Authority: AuthorityNode, Placement: wire.PlacementColocated, TaskNodes: st.TaskNodes,
		Tasks: make([]wire.JobTask, 0, len(st.Tasks)), RecordsIn: st.RecordsIn, RecordsOut: st.RecordsOut,
		WatermarkLagMS: st.WatermarkLagMs, LastCheckpoint: st.LastCheckpoint, CheckpointDurationMS: st.CheckpointDurationMs,
		CheckpointFailures: st.CheckpointFailures, StateBytes: st.StateBytes, Restarts: st.Restarts, RestoredFrom: st.RestoredFrom,
		Checkpointing: st.ObjectStoreURI != "", LastError: n.redact(st.Error),
	}
	if st.Hub {
		v.Authority = AuthorityHub
	}
	if len(st.TaskNodes) > 0 {
		v.Placement = wire.PlacementSplit
	}
	for _, t := range st.Tasks {
		v.Tasks = append(v.Tasks, wire.JobTask{ID: t.ID, State: t.State, Watermark: t.Watermark, RecordsIn: t.RecordsIn, RecordsOut: t.RecordsOut})
	}
	if op, ok := n.ops.latestOf(st.JobID, isJobOp); ok {
		op = n.decorate(op, nil)
		v.LatestOperation = &op
	}
	return v
}

// JobPlan explains a job's plan.
func (n *Node) JobPlan(id string) (engine.JobExplanation, error) {
	p, err := n.opts.Engine.JobPlan(id)
	if err != nil {
		return engine.JobExplanation{}, err
	}
	return p.Explain(), nil
}

// JobArtifacts lists a job's completed checkpoints or savepoints (kind
// wire.ArtifactCheckpoint or wire.ArtifactSavepoint), newest first. A job
// without a checkpoint configuration has none.
func (n *Node) JobArtifacts(ctx context.Context, id, kind string) ([]wire.JobArtifact, error) {
	st, err := n.opts.Engine.Job(id)
	if err != nil {
		return nil, err
	}
	ms, err := n.opts.Engine.JobArtifacts(ctx, id, kind)
	if errors.Is(err, engine.ErrNoCheckpointing) {
		return []wire.JobArtifact{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]wire.JobArtifact, 0, len(ms))
	for _, m := range slices.Backward(ms) {
		out = append(out, n.artifact(st.ObjectStoreURI, m))
	}
	return out, nil
}

// artifact is a completed artifact on the wire, as the Hub records it.
func (n *Node) artifact(storeURI string, m *engine.Manifest) wire.JobArtifact {
	return wire.JobArtifact{
		JobID: m.JobID, Kind: m.Kind, ID: m.ID, JobVersion: m.JobVersion, FormatVersion: m.FormatVersion,
		MaxParallelism: m.MaxParallelism, StatefulOperators: engine.StatefulOperators(m),
		Location: n.redact(engine.ArtifactLocation(storeURI, m)), Bytes: m.Bytes, State: wire.ArtifactCompleted,
		NodeID: n.opts.NodeID, CreatedAt: wire.At(m.CreatedAt), CompletedAt: wire.At(m.CreatedAt),
	}
}

// JobArgs are the arguments of a job action: Recovery for a start or
// restart (empty: the job's recovery mode), Savepoint for a stop.
type JobArgs struct {
	Recovery  string
	Savepoint bool
}

// JobAction accepts a job action (OpJobStart, OpJobStop, OpJobRestart,
// OpJobCheckpoint, OpJobSavepoint) as an operation queued behind the job's
// earlier operations, and returns it. A job the Hub placed is
// ErrJobManagedByHub; what cannot run in the job's current state is
// refused up front (ErrJobNotRunning, ErrNoCheckpointing, ErrJobRunning).
// A checkpoint's, savepoint's or stop-with-savepoint's operation result is
// the artifact.
func (n *Node) JobAction(id, action string, args JobArgs, req Request) (wire.Operation, error) {
	st, err := n.opts.Engine.Job(id)
	if err != nil {
		return wire.Operation{}, err
	}
	if st.Hub {
		return wire.Operation{}, fmt.Errorf("%w: %q", ErrJobManagedByHub, id)
	}
	takes := action == OpJobCheckpoint || action == OpJobSavepoint || action == OpJobStop && args.Savepoint
	switch {
	case takes && st.ObjectStoreURI == "":
		return wire.Operation{}, fmt.Errorf("%w: job %q", ErrNoCheckpointing, id)
	case takes && st.State != engine.JobRunning:
		return wire.Operation{}, fmt.Errorf("%w: job %q is %s", ErrJobNotRunning, id, st.State)
	case action == OpJobStart && args.Recovery != "" && active(st.State):
		return wire.Operation{}, fmt.Errorf("%w: job %q is %s", ErrJobRunning, id, st.State)
	}
	opID := n.opts.NewID()
	o := &op{
		rec: wire.Operation{
			OperationID: opID, IntentID: opID, Operation: action, NodeID: n.opts.NodeID, ResourceID: id,
			Convergence: wire.ConvergencePending, CorrelationID: req.CorrelationID, Actor: req.Actor,
		},
		run: func(ctx context.Context) (any, error) {
			ctx, cancel := context.WithTimeout(ctx, jobOpTimeout)
			defer cancel()
			return n.runJobAction(ctx, id, action, args, st.ObjectStoreURI, takes)
		},
	}
	rec := n.ops.submit(o)
	n.event(wire.Event{Kind: wire.EventIntentAccepted, ResourceID: id, OperationID: opID, CorrelationID: req.CorrelationID, Actor: req.Actor,
		Outcome: "accepted", Message: action + " accepted", Data: map[string]any{"operation": action}})
	return rec, nil
}

// active reports whether a job in state s runs or is about to.
func active(s engine.JobState) bool {
	switch s {
	case engine.JobStarting, engine.JobRunning, engine.JobRecovering:
		return true
	}
	return false
}

func (n *Node) runJobAction(ctx context.Context, id, action string, args JobArgs, storeURI string, takes bool) (any, error) {
	eng := n.opts.Engine
	var m *engine.Manifest
	var err error
	switch action {
	case OpJobStart:
		err = eng.StartJob(ctx, id, args.Recovery)
	case OpJobStop:
		m, err = eng.StopJob(ctx, id, args.Savepoint)
	case OpJobRestart:
		if _, err = eng.StopJob(ctx, id, false); err == nil {
			err = eng.StartJob(ctx, id, args.Recovery)
		}
	case OpJobCheckpoint:
		m, err = eng.CheckpointJob(ctx, id)
	case OpJobSavepoint:
		m, err = eng.SavepointJob(ctx, id)
	default:
		return nil, fmt.Errorf("unknown job action %q", action)
	}
	if err != nil {
		return nil, n.jobFailure(err, takes)
	}
	if m == nil {
		return nil, nil
	}
	return n.artifact(storeURI, m), nil
}

// jobFailure classifies a failed job operation, with the Agent's codes for
// the same failures of Hub commands; takes says whether the operation
// takes an artifact.
func (n *Node) jobFailure(err error, takes bool) error {
	code := "engine_error"
	if takes {
		code = "artifact_failed"
	}
	switch {
	case errors.Is(err, engine.ErrJobNotFound):
		code = "job_not_found"
	case errors.Is(err, engine.ErrJobNotRunning), errors.Is(err, engine.ErrJobEnded):
		code = "job_not_running"
	case errors.Is(err, engine.ErrNoCheckpointing):
		code = "no_checkpointing"
	case errors.Is(err, engine.ErrFenced):
		code = "fenced"
	}
	// Engine errors may quote resolved secret values.
	return &opError{Class: "engine", Code: code, Message: n.redact(err.Error())}
}
