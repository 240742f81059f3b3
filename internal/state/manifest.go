package state

import (
	"sort"
	"strconv"

	"github.com/flowplane/flowplane/internal/job"
)

// Compatible returns an *IncompatibleError when m cannot be restored into
// the plan: its job id, format version or max parallelism differ, or it
// holds state of an operator the plan does not have (or has, but not as a
// stateful operator). Stateful operators of the plan that m holds no state
// for are fine: they start empty. Beyond the job id, the rule is
// job.Shape.Restorable, the one the Hub's restore choice applies too.
func (m *Manifest) Compatible(p *job.Plan) error {
	if m.JobID != p.JobID {
		return &IncompatibleError{Field: "job_id", Have: strconv.Quote(m.JobID), Want: strconv.Quote(p.JobID)}
	}
	var held []string
	for _, t := range m.Tasks {
		held = append(held, t.Operators...)
	}
	if in := p.Shape().Restorable(m.FormatVersion, m.MaxParallelism, held); in != nil {
		return &IncompatibleError{Field: in.Field, Have: in.Have, Want: in.Want}
	}
	return nil
}

// Expired chooses the checkpoints retention removes: all but the newest
// keep, except those pinned (an open sink transaction was prepared at
// them). It is pure; the result is oldest first.
func Expired(checkpoints []*Manifest, keep int, pinned map[int64]bool) []*Manifest {
	sorted := append([]*Manifest(nil), checkpoints...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	keep = max(keep, 0)
	if keep >= len(sorted) {
		return nil
	}
	var out []*Manifest
	for _, m := range sorted[:len(sorted)-keep] {
		if !pinned[m.ID] {
			out = append(out, m)
		}
	}
	return out
}
