package node

import (
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/wire"
)

// Desired-state values of a stream.
const (
	DesiredRunning = "running"
	DesiredStopped = "stopped"
)

// Authorities of a stream's desired view: who made the write it shows.
const (
	// AuthorityNode: a Node API write, or the configuration (standalone
	// nodes, and Node API changes on a Hub-managed node).
	AuthorityNode = "node"
	// AuthorityHub: a Hub command the Agent carried out; the generation is
	// the Hub's.
	AuthorityHub = "hub"
)

// desired is what the operator asked of one stream. Generation counts
// every accepted write (it is the ETag), or is the Hub's generation when
// Authority is AuthorityHub; Target is the generation of the newest write
// not cancelled, which is what the engine must carry out.
type desired struct {
	State         string
	Generation    int64
	Target        int64
	ConfigVersion string
	ActionID      string // the last restart's action id
	Authority     string
}

// applied is what the engine last carried out for one stream.
type applied struct {
	Generation    int64
	ConfigVersion string
	ActionID      string
}

// convergence compares desired with observed as one pure function
// (API.md): unknown without a desire; applying while an operation is queued
// or the runtime is between states; degraded when the stream failed;
// in_sync when the observed state, generation, configuration version and
// (for a restart) action id all match.
func convergence(d *desired, observed engine.StreamState, a applied, pending bool) string {
	switch {
	case d == nil:
		return wire.ConvergenceUnknown
	case pending:
		return wire.ConvergenceApplying
	case observed == engine.StreamFailed:
		return wire.ConvergenceDegraded
	}
	if a.Generation != d.Target || a.ConfigVersion != d.ConfigVersion || d.ActionID != "" && a.ActionID != d.ActionID {
		return wire.ConvergenceApplying
	}
	switch d.State {
	case DesiredRunning:
		if observed == engine.StreamRunning || observed == engine.StreamCompleted {
			return wire.ConvergenceInSync
		}
	case DesiredStopped:
		if observed == engine.StreamStopped {
			return wire.ConvergenceInSync
		}
	}
	return wire.ConvergenceApplying
}
