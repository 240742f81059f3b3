package rollout

import (
	"fmt"
	"slices"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// stepper carries one Step or Act: the rollout being changed (a copy of
// the input) and the effects so far.
type stepper struct {
	r       Rollout
	now     time.Time
	effects []Effect
	changed bool
}

func newStepper(r Rollout, now time.Time) *stepper {
	return &stepper{r: clone(r), now: now}
}

// result returns the new rollout, its UpdatedAt moved to now when
// anything changed.
func (s *stepper) result() (Rollout, []Effect) {
	if s.changed {
		s.r.UpdatedAt = s.now
	}
	return s.r, s.effects
}

func clone(r Rollout) Rollout {
	r.Nodes = slices.Clone(r.Nodes)
	r.Plan.Waves = cloneWaves(r.Plan.Waves)
	return r
}

func cloneWaves(w [][]string) [][]string {
	if w == nil {
		return nil
	}
	out := make([][]string, len(w))
	for i := range w {
		out[i] = slices.Clone(w[i])
	}
	return out
}

// event appends an EffectEvent with the rollout's id and state.
func (s *stepper) event(msg string, data map[string]any) {
	data["rollout_id"] = s.r.ID
	data["state"] = s.r.State
	s.effects = append(s.effects, Effect{Kind: EffectEvent, Message: msg, Data: data})
	s.changed = true
}

// setState moves the rollout to state, with its event; terminal states set
// FinishedAt.
func (s *stepper) setState(state, msg string) {
	s.r.State = state
	switch state {
	case wire.RolloutSucceeded, wire.RolloutFailed, wire.RolloutCancelled, wire.RolloutRolledBack:
		s.r.FinishedAt = s.now
	}
	data := map[string]any{}
	if s.r.CurrentWave > 0 {
		data["wave"] = s.r.CurrentWave
	}
	if state == wire.RolloutFailed && s.r.FailureCode != "" {
		data["failure_code"] = s.r.FailureCode
	}
	s.event(msg, data)
}

// setPhase moves node i to phase, with its event.
func (s *stepper) setPhase(i int, phase string) {
	n := &s.r.Nodes[i]
	n.Phase = phase
	n.UpdatedAt = s.now
	data := map[string]any{"wave": n.Wave, "node_id": n.NodeID, "phase": phase}
	msg := "node " + n.NodeID + " " + phase
	if phase == wire.RolloutNodeFailed {
		data["failure_code"] = n.FailureCode
		msg += ": " + n.FailureCode
	}
	s.event(msg, data)
}

// active says whether o lets a node get its apply: anything but draining
// and maintenance (a node never observed is offline and active).
func active(o Observation) bool {
	return o.Mode != wire.NodeModeDraining && o.Mode != wire.NodeModeMaintenance
}

// apply writes the rollout's apply for node i.
func (s *stepper) apply(i int, o Observation) {
	n := &s.r.Nodes[i]
	n.AppliedAt = s.now
	n.HealthySince = time.Time{}
	n.VersionBefore = o.CurrentVersion
	n.NodeVersionBefore = o.CurrentNodeVersion
	n.Generation = 0
	n.FailureCode, n.FailureMsg = "", ""
	s.effects = append(s.effects, Effect{Kind: EffectApply, NodeID: n.NodeID})
	s.setPhase(i, wire.RolloutNodeApplying)
}

// fail fails node i's gate.
func (s *stepper) fail(i int, code, msg string) {
	n := &s.r.Nodes[i]
	n.FailureCode, n.FailureMsg = code, msg
	s.r.Failures++
	s.setPhase(i, wire.RolloutNodeFailed)
}

// advance is one Step of a running rollout.
func (s *stepper) advance(obs map[string]Observation) {
	s.gate(obs)
	if s.overBudget() {
		return
	}
	s.dispatchWaiting(obs)
	for {
		s.markPassed()
		if !s.startNext(obs) {
			break
		}
	}
	for _, n := range s.r.Nodes {
		if n.Phase != wire.RolloutNodePassed && n.Phase != wire.RolloutNodeFailed {
			return
		}
	}
	s.setState(wire.RolloutSucceeded, "rollout succeeded")
}

// gate evaluates the health gate of every node applying or soaking.
func (s *stepper) gate(obs map[string]Observation) {
	p := s.r.Plan
	for i := range s.r.Nodes {
		n := &s.r.Nodes[i]
		o := obs[n.NodeID]
		switch n.Phase {
		case wire.RolloutNodeApplying:
			judged := n.Generation != 0
			switch {
			case judged && o.ApplyFailed:
				s.failApply(i, o, "")
			case judged && o.InSync && !o.StreamFailed:
				n.HealthySince = s.now
				if p.Soak <= 0 {
					s.setPhase(i, wire.RolloutNodePassed)
				} else {
					s.setPhase(i, wire.RolloutNodeSoaking)
				}
			case p.GateTimeout > 0 && !s.now.Before(n.AppliedAt.Add(p.GateTimeout)):
				s.fail(i, CodeGateTimeout, fmt.Sprintf("not in_sync with no stream failed within %s of its apply", p.GateTimeout))
			}
		case wire.RolloutNodeSoaking:
			switch {
			case o.ApplyFailed:
				s.failApply(i, o, "")
			case o.StreamFailed:
				s.fail(i, CodeStreamFailed, "a stream failed during the soak")
			case !o.InSync:
				s.fail(i, CodeOutOfSync, "the configuration left in_sync during the soak")
			case !s.now.Before(n.HealthySince.Add(p.Soak)):
				s.setPhase(i, wire.RolloutNodePassed)
			}
		}
	}
}

// failApply fails node i because its intent failed for good.
func (s *stepper) failApply(i int, o Observation, prefix string) {
	code, msg := o.FailureCode, o.FailureMsg
	if code == "" {
		code = CodeApplyFailed
	}
	if msg == "" {
		msg = "the apply intent failed"
	}
	if prefix == "" {
		s.fail(i, code, msg)
		return
	}
	n := &s.r.Nodes[i]
	n.FailureCode, n.FailureMsg = code, prefix+msg
	s.setPhase(i, wire.RolloutNodeFailed)
}

// overBudget fails the rollout when Failures exceeds MaxFailures: waiting
// nodes are skipped, the others left as they are.
func (s *stepper) overBudget() bool {
	if s.r.Failures <= s.r.Plan.MaxFailures {
		return false
	}
	s.r.FailureCode = CodeBudgetExceeded
	s.r.FailureMsg = fmt.Sprintf("%d nodes failed their health gate; the failure budget is %d", s.r.Failures, s.r.Plan.MaxFailures)
	s.setState(wire.RolloutFailed, "rollout failed: "+CodeBudgetExceeded)
	for i, n := range s.r.Nodes {
		if n.Phase == wire.RolloutNodeWaiting {
			s.setPhase(i, wire.RolloutNodeSkipped)
		}
	}
	return true
}

// dispatchWaiting applies the waiting nodes of started waves that are
// active now.
func (s *stepper) dispatchWaiting(obs map[string]Observation) {
	for i, n := range s.r.Nodes {
		if n.Phase == wire.RolloutNodeWaiting && n.Wave <= s.r.CurrentWave {
			if o := obs[n.NodeID]; active(o) {
				s.apply(i, o)
			}
		}
	}
}

// markPassed sets WavePassed when the current wave's nodes all passed or
// failed, waiting nodes aside.
func (s *stepper) markPassed() {
	if s.r.CurrentWave == 0 || !s.r.WavePassed.IsZero() {
		return
	}
	for _, n := range s.r.Nodes {
		if n.Wave == s.r.CurrentWave && n.Phase != wire.RolloutNodePassed &&
			n.Phase != wire.RolloutNodeFailed && n.Phase != wire.RolloutNodeWaiting {
			return
		}
	}
	s.r.WavePassed = s.now
	s.event(fmt.Sprintf("wave %d passed", s.r.CurrentWave), map[string]any{"wave": s.r.CurrentWave})
}

// startNext starts the next wave when there is one and its turn came.
func (s *stepper) startNext(obs map[string]Observation) bool {
	next := s.r.CurrentWave + 1
	if next > len(s.r.Plan.Waves) {
		return false
	}
	if s.r.CurrentWave > 0 && (s.r.WavePassed.IsZero() || s.now.Before(s.r.WavePassed.Add(s.r.Plan.Pause))) {
		return false
	}
	s.r.CurrentWave = next
	s.r.WavePassed = time.Time{}
	s.event(fmt.Sprintf("wave %d started", next), map[string]any{"wave": next})
	for i, n := range s.r.Nodes {
		if n.Wave == next && n.Phase == wire.RolloutNodeWaiting {
			if o := obs[n.NodeID]; active(o) {
				s.apply(i, o)
			}
		}
	}
	return true
}

// rollingBack moves the nodes of a rolled_back rollout along.
func (s *stepper) rollingBack(obs map[string]Observation) {
	for i, n := range s.r.Nodes {
		if n.Phase != wire.RolloutNodeRollingBack || n.Generation == 0 {
			continue
		}
		switch o := obs[n.NodeID]; {
		case o.ApplyFailed:
			s.failApply(i, o, "rollback: ")
		case o.InSync:
			s.setPhase(i, wire.RolloutNodeRolledBack)
		}
	}
}
