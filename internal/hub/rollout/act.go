package rollout

import (
	"fmt"
	"slices"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

func (s *stepper) pause() error {
	switch s.r.State {
	case wire.RolloutPending, wire.RolloutRunning:
		s.setState(wire.RolloutPaused, "rollout paused")
		return nil
	}
	return fmt.Errorf("%w: a %s rollout cannot be paused (only pending or running)", ErrAction, s.r.State)
}

func (s *stepper) resume() error {
	if s.r.State != wire.RolloutPaused {
		return fmt.Errorf("%w: a %s rollout cannot be resumed (only paused)", ErrAction, s.r.State)
	}
	s.setState(wire.RolloutRunning, "rollout resumed")
	return nil
}

func (s *stepper) cancel() error {
	switch s.r.State {
	case wire.RolloutPending, wire.RolloutRunning, wire.RolloutPaused:
	default:
		return fmt.Errorf("%w: a %s rollout cannot be cancelled (only pending, running or paused)", ErrAction, s.r.State)
	}
	s.setState(wire.RolloutCancelled, "rollout cancelled")
	for i, n := range s.r.Nodes {
		if n.Phase == wire.RolloutNodeWaiting {
			s.setPhase(i, wire.RolloutNodeSkipped)
		}
	}
	return nil
}

// touched says whether the rollout wrote its apply for a node in phase p.
func touched(p string) bool {
	switch p {
	case wire.RolloutNodeApplying, wire.RolloutNodeSoaking, wire.RolloutNodePassed, wire.RolloutNodeFailed:
		return true
	}
	return false
}

func (s *stepper) rollback() error {
	if s.r.State == wire.RolloutRolledBack {
		return fmt.Errorf("%w: the rollout is already rolled back", ErrAction)
	}
	if !slices.ContainsFunc(s.r.Nodes, func(n Node) bool { return touched(n.Phase) }) {
		return fmt.Errorf("%w: the %s rollout changed no node, nothing to roll back (cancel it instead)", ErrAction, s.r.State)
	}
	s.setState(wire.RolloutRolledBack, "rollout rolled back")
	for i := range s.r.Nodes {
		n := &s.r.Nodes[i]
		switch {
		case touched(n.Phase) && n.VersionBefore == "" && n.NodeVersionBefore == "":
			n.FailureCode = CodeRollbackUnavailable
			n.FailureMsg = "the Hub knew of no configuration on the node before the rollout's apply"
			s.setPhase(i, wire.RolloutNodeFailed)
		case touched(n.Phase):
			n.AppliedAt = s.now
			n.HealthySince = time.Time{}
			n.Generation = 0
			s.effects = append(s.effects, Effect{Kind: EffectApply, NodeID: n.NodeID, Rollback: true,
				Version: n.VersionBefore, NodeVersion: n.NodeVersionBefore})
			s.setPhase(i, wire.RolloutNodeRollingBack)
		case n.Phase == wire.RolloutNodeWaiting:
			s.setPhase(i, wire.RolloutNodeSkipped)
		}
	}
	return nil
}
