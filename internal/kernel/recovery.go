package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/state"
)

// prepareRecovery chooses the artifact the attempt restores (nil: start
// empty), checks it against the plan before anything starts, and sets the
// next checkpoint id past every artifact of the job.
func (j *Job) prepareRecovery(ctx context.Context, r *attempt, mode string) (*state.Manifest, error) {
	p := j.plan
	if p.Checkpoint == nil {
		if mode == RecoverArtifact {
			return nil, &permanentError{errors.New("recovery artifact: the job has no checkpoint configuration to restore from")}
		}
		return nil, nil
	}
	arts, err := j.artifacts(ctx)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint store: %w", err)
	}
	r.arts = arts
	if err := arts.Fence(ctx, p.JobID, j.opts.FenceGeneration); err != nil {
		if errors.Is(err, state.ErrFenced) {
			return nil, &permanentError{err}
		}
		return nil, err
	}
	cps, err := arts.List(ctx, p.JobID, state.KindCheckpoint)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	sps, err := arts.List(ctx, p.JobID, state.KindSavepoint)
	if err != nil {
		return nil, fmt.Errorf("list savepoints: %w", err)
	}
	for _, m := range append(slices.Clip(cps), sps...) {
		r.nextID = max(r.nextID, m.ID+1)
	}
	// Ids of incomplete artifacts are not reused either: a process that
	// died while writing a manifest may still have it land.
	high, err := arts.HighestID(ctx, p.JobID)
	if err != nil {
		return nil, err
	}
	r.nextID = max(r.nextID, high+1)
	if p.State != nil && p.State.Durability == "ephemeral" {
		return nil, nil
	}
	var m *state.Manifest
	switch mode {
	case RecoverLatestCheckpoint:
		if len(cps) > 0 {
			m = cps[len(cps)-1]
		}
	case RecoverLatestSavepoint:
		if len(sps) > 0 {
			m = sps[len(sps)-1]
		}
	case RecoverNewest:
		for _, a := range append(slices.Clip(cps), sps...) {
			if m == nil || a.ID > m.ID {
				m = a
			}
		}
	case RecoverArtifact:
		ref := j.opts.Restore
		if r.restoreRef != nil {
			ref = r.restoreRef
		}
		if ref == nil {
			return nil, &permanentError{errors.New("recovery artifact names no artifact to restore")}
		}
		if m, err = arts.Get(ctx, p.JobID, ref.Kind, ref.ID); err != nil {
			if errors.Is(err, state.ErrArtifactNotFound) {
				return nil, &permanentError{fmt.Errorf("%s %d cannot be restored: %w", ref.Kind, ref.ID, err)}
			}
			return nil, err
		}
	}
	if m == nil {
		return nil, nil
	}
	if err := m.Compatible(p); err != nil {
		return nil, &permanentError{fmt.Errorf("%s %d cannot be restored: %w", m.Kind, m.ID, err)}
	}
	// Source positions are per subtask: a source whose parallelism changed
	// resumes from them only if its input redistributes them.
	if err := j.checkRescale(ctx, m); err != nil {
		return nil, &permanentError{fmt.Errorf("%s %d cannot be restored: %w", m.Kind, m.ID, err)}
	}
	return m, nil
}

// checkRescale refuses m when a source with recorded positions runs at
// another parallelism than m's and its input cannot redistribute them
// (it is not component.Rescalable).
func (j *Job) checkRescale(ctx context.Context, m *state.Manifest) error {
	for id, n := range sourceParallelism(m) {
		op := j.plan.Operator(id)
		if op == nil || op.Kind != "source" || n == op.Parallelism {
			continue
		}
		if !j.rescalable(ctx, op) {
			return fmt.Errorf("source %s ran at parallelism %d and now has %d; its input %s cannot redistribute its read positions, set its parallelism back to %d or start without recovery",
				id, n, op.Parallelism, inputType(op), n)
		}
	}
	return nil
}

// sourceParallelism is the parallelism each source with recorded positions
// ran at when m was taken.
func sourceParallelism(m *state.Manifest) map[string]int {
	n := map[string]int{}
	for _, s := range m.Sources {
		n[s.Operator] = max(n[s.Operator], s.Subtask+1)
	}
	return n
}

func inputType(op *job.Operator) string {
	if op.Source == nil {
		return "(unbound)"
	}
	return op.Source.InputType
}

// rescalable reports whether op's input redistributes read positions. The
// source may run on another node (split placement), so an instance is
// built to ask; building connects nothing.
func (j *Job) rescalable(ctx context.Context, op *job.Operator) bool {
	if op.Source == nil {
		return false
	}
	res := component.Resources{StreamID: j.plan.JobID, Logger: j.log, FS: j.opts.FS, Net: j.opts.Net}
	in, err := j.opts.Registry.NewInput(op.Source.InputType, op.Source.Config, res)
	if err != nil {
		return false
	}
	_ = in.Close(ctx)
	_, ok := in.(component.Rescalable)
	return ok
}

// seekPosition is where source task t resumes from m: its own subtask's
// position at the same parallelism, else its share of every old subtask's
// as its input redistributes them.
func seekPosition(t *task, m *state.Manifest) ([]byte, error) {
	id := t.src.pop.ID
	n := sourceParallelism(m)[id]
	if n == 0 {
		return nil, nil
	}
	old := make([][]byte, n)
	for _, s := range m.Sources {
		if s.Operator == id {
			old[s.Subtask] = s.Position
		}
	}
	if n == t.src.pop.Parallelism {
		return old[t.spec.Subtask], nil
	}
	rs, ok := t.input.(component.Rescalable)
	if !ok {
		return nil, fmt.Errorf("source %s ran at parallelism %d and now has %d; its input cannot redistribute its read positions", id, n, t.src.pop.Parallelism)
	}
	pos, err := rs.Rescale(old)
	if err != nil {
		return nil, fmt.Errorf("source %s: redistribute the read positions of %d subtasks over %d: %w", id, n, t.src.pop.Parallelism, err)
	}
	return pos, nil
}

// assignRestore tells every task what to restore from m: the old task
// artifacts overlapping its key groups (any old parallelism), the read
// position of its source subtask and the transactions of its sinks.
func (j *Job) assignRestore(r *attempt, m *state.Manifest) error {
	for _, t := range r.tasks {
		t.restored = true
		if len(t.stateful) > 0 {
			for _, a := range m.Tasks {
				if overlaps(a.KeyGroups, t.spec.KeyGroups) && sharesOperator(a.Operators, t.stateful) {
					t.restore = append(t.restore, a)
				}
			}
		}
		if t.src != nil {
			pos, err := seekPosition(t, m)
			if err != nil {
				return &permanentError{fmt.Errorf("%s %d cannot be restored: %w", m.Kind, m.ID, err)}
			}
			t.seekPos = pos
		}
		for _, o := range t.ops {
			if o.sink == nil {
				continue
			}
			par := o.pop.Parallelism
			for _, s := range m.Sinks {
				if s.Operator != o.pop.ID {
					continue
				}
				if s.Subtask == t.spec.Subtask || t.spec.Subtask == 0 && s.Subtask >= par {
					if t.restoredTxn == nil {
						t.restoredTxn = map[string][][]byte{}
					}
					t.restoredTxn[o.pop.ID] = append(t.restoredTxn[o.pop.ID], s.Txn)
				}
			}
		}
	}
	return nil
}

func overlaps(a, b job.Range) bool { return a.Start <= b.End && b.Start <= a.End }

func sharesOperator(a, b []string) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}
