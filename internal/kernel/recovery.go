package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"

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
	// cannot resume from them.
	subtasks := map[string]int{}
	for _, s := range m.Sources {
		subtasks[s.Operator]++
	}
	for id, n := range subtasks {
		op := p.Operator(id)
		if op == nil || op.Kind != "source" {
			continue
		}
		if n != op.Parallelism {
			return nil, &permanentError{fmt.Errorf("%s %d cannot be restored: source %s ran at parallelism %d and now has %d; its read positions cannot be redistributed, set its parallelism back to %d or start without recovery",
				m.Kind, m.ID, id, n, op.Parallelism, n)}
		}
	}
	return m, nil
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
			for _, s := range m.Sources {
				if s.Operator == t.src.pop.ID && s.Subtask == t.spec.Subtask {
					t.seekPos = s.Position
				}
			}
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
