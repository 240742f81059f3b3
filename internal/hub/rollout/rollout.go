package rollout

import (
	"errors"
	"fmt"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// States and phases are the wire.Rollout* and wire.RolloutNode* values.

// Plan is what a rollout was created with.
type Plan struct {
	// Waves lists node ids per wave, in order; every target once.
	Waves       [][]string
	GateTimeout time.Duration
	Soak        time.Duration
	Pause       time.Duration
	MaxFailures int
}

// Node is one target's durable progress.
type Node struct {
	NodeID string
	Wave   int // 1-based index into Plan.Waves
	Phase  string
	// VersionBefore / NodeVersionBefore: what the node ran when its apply
	// was written (Hub version, or "" and the node's own id); a rollback
	// re-applies it.
	VersionBefore     string
	NodeVersionBefore string
	// Generation of the configuration resource the rollout's (or the
	// rollback's) apply wrote; the gate compares observations with it.
	// 0 until the caller set it (SetGeneration): Step and Act clear it
	// when they emit an apply, and do not judge the node while it is 0.
	Generation int64
	// AppliedAt: when the apply (or rollback) was written; the gate
	// timeout runs from it. HealthySince: start of the soak.
	AppliedAt    time.Time
	HealthySince time.Time
	FailureCode  string
	FailureMsg   string
	UpdatedAt    time.Time
	// VersionTarget and OperationID are set by the store when it writes
	// the node's apply (the Hub version it created, the intent id); Step
	// carries them unchanged.
	VersionTarget string
	OperationID   string
}

// Rollout is the durable state Step works on.
type Rollout struct {
	ID          string
	State       string
	Plan        Plan
	CurrentWave int       // 1-based; 0 before the first wave started
	WavePassed  time.Time // when CurrentWave passed (zero while it runs)
	Failures    int
	Nodes       []Node // in wave order
	FailureCode string
	FailureMsg  string
	UpdatedAt   time.Time
	FinishedAt  time.Time
}

// Observation is what the Hub sees of one target now (not durable).
type Observation struct {
	Online bool
	Mode   string // active, draining or maintenance
	// Online is informative: an offline node is dispatched and gated like
	// an online one; only Mode holds a waiting node back.
	//
	// InSync: the configuration converged at Node.Generation (the Hub's
	// convergence function said in_sync, at that generation). A soaking
	// node whose InSync turns false fails its gate (out_of_sync): the Hub
	// decides whether a stale report of an offline node still counts.
	InSync bool
	// StreamFailed: a stream of the node is observed failed.
	StreamFailed bool
	// ApplyFailed: the intent of Node.Generation failed for good (code,
	// message), e.g. validation_failed, secret_unresolved, expired.
	ApplyFailed bool
	FailureCode string
	FailureMsg  string
	// CurrentVersion / CurrentNodeVersion: what the node runs now (for
	// VersionBefore when its apply is written).
	CurrentVersion     string
	CurrentNodeVersion string
}

// Effect kinds.
const (
	// EffectApply: write a configuration apply intent for NodeID. Rollback
	// false: the rollout's configuration; true: Version (a Hub version) or,
	// when Version is empty, NodeVersion (the node's own). The caller sets
	// the resulting generation on the node (SetGeneration) in the same
	// transaction.
	EffectApply = "apply"
	// EffectEvent: a rollout_changed event and audit row (Message, Data).
	EffectEvent = "event"
)

// Effect is one thing the caller must do, atomically with storing the
// returned Rollout.
type Effect struct {
	Kind        string
	NodeID      string
	Rollback    bool
	Version     string
	NodeVersion string
	Message     string
	Data        map[string]any
}

// ErrAction is returned by Act for an action the state does not allow (the
// API answers 409 conflict) or an unknown one.
var ErrAction = errors.New("action not allowed")

// Failure codes Step and Act set (a failed apply intent carries its own).
const (
	CodeBudgetExceeded      = "failure_budget_exceeded" // rollout: Failures > MaxFailures
	CodeGateTimeout         = "gate_timeout"            // node: not in_sync within GateTimeout
	CodeStreamFailed        = "stream_failed"           // node: a stream failed during the soak
	CodeOutOfSync           = "out_of_sync"             // node: left in_sync during the soak
	CodeApplyFailed         = "apply_failed"            // node: its intent failed, no code given
	CodeRollbackUnavailable = "rollback_unavailable"    // node: no previous configuration known
)

// Step advances r at now given obs (by node id; a missing entry is an
// offline, active node with nothing observed). It returns the new rollout
// and the effects to commit with it. Step is deterministic and does not
// modify r or its slices.
func Step(r Rollout, obs map[string]Observation, now time.Time) (Rollout, []Effect) {
	s := newStepper(r, now)
	switch r.State {
	case wire.RolloutPending:
		s.setState(wire.RolloutRunning, "rollout started")
		s.advance(obs)
	case wire.RolloutRunning:
		s.advance(obs)
	case wire.RolloutPaused:
		s.gate(obs)
		if !s.overBudget() {
			s.markPassed()
		}
	case wire.RolloutRolledBack:
		s.rollingBack(obs)
	}
	return s.result()
}

// Act applies an operator action at now. An action the state does not
// allow returns ErrAction (wrapped with a message saying why) and r
// unchanged. obs is not used by any action today.
func Act(r Rollout, action string, obs map[string]Observation, now time.Time) (Rollout, []Effect, error) {
	s := newStepper(r, now)
	var err error
	switch action {
	case wire.RolloutActionPause:
		err = s.pause()
	case wire.RolloutActionResume:
		err = s.resume()
	case wire.RolloutActionCancel:
		err = s.cancel()
	case wire.RolloutActionRollback:
		err = s.rollback()
	default:
		err = fmt.Errorf("%w: unknown action %q (pause, resume, cancel or rollback)", ErrAction, action)
	}
	if err != nil {
		return r, nil, err
	}
	out, effects := s.result()
	return out, effects, nil
}

// SetGeneration records on node id of r the generation its apply wrote
// (the caller learns it from the store). It returns r changed; r itself
// is not modified, and an unknown id changes nothing.
func SetGeneration(r Rollout, nodeID string, gen int64) Rollout {
	r = clone(r)
	for i := range r.Nodes {
		if r.Nodes[i].NodeID == nodeID {
			r.Nodes[i].Generation = gen
		}
	}
	return r
}

// New returns a pending rollout of plan: one waiting node per target, in
// wave order.
func New(id string, plan Plan, now time.Time) Rollout {
	r := Rollout{ID: id, State: wire.RolloutPending, UpdatedAt: now}
	r.Plan = plan
	r.Plan.Waves = cloneWaves(plan.Waves)
	for w, ids := range plan.Waves {
		for _, n := range ids {
			r.Nodes = append(r.Nodes, Node{NodeID: n, Wave: w + 1, Phase: wire.RolloutNodeWaiting, UpdatedAt: now})
		}
	}
	return r
}
