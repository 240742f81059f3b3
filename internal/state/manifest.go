package state

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/flowplane/flowplane/internal/job"
)

// Compatible returns an *IncompatibleError when m cannot be restored into
// the plan: its job id, format version or max parallelism differ, or it
// holds state of an operator the plan does not have (or has, but not as a
// stateful operator). Stateful operators of the plan that m holds no state
// for are fine: they start empty.
func (m *Manifest) Compatible(p *job.Plan) error {
	switch {
	case m.JobID != p.JobID:
		return &IncompatibleError{Field: "job_id", Have: strconv.Quote(m.JobID), Want: strconv.Quote(p.JobID)}
	case m.FormatVersion != p.FormatVersion:
		return &IncompatibleError{Field: "format_version", Have: strconv.Itoa(m.FormatVersion), Want: strconv.Itoa(p.FormatVersion)}
	case m.MaxParallelism != p.MaxParallelism:
		return &IncompatibleError{Field: "max_parallelism", Have: strconv.Itoa(m.MaxParallelism), Want: strconv.Itoa(p.MaxParallelism)}
	}
	for _, t := range m.Tasks {
		for _, id := range t.Operators {
			op := p.Operator(id)
			if op == nil {
				return &IncompatibleError{Field: "operators", Have: fmt.Sprintf("state of operator %q", id), Want: fmt.Sprintf("no operator %q", id)}
			}
			if !op.Stateful {
				return &IncompatibleError{Field: "operators", Have: fmt.Sprintf("state of operator %q", id), Want: fmt.Sprintf("operator %q as a stateless %s", id, op.Kind)}
			}
		}
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
