package ctl

import (
	"slices"
	"strings"

	"github.com/flowplane/flowplane/internal/wire"
)

// Kinds of what a write waits for.
const (
	waitStream        = "stream"
	waitJob           = "job"
	waitConfiguration = "configuration"
	waitOperation     = "operation"
	waitRollout       = "rollout"
)

// Target is what one write waits for: a resource converging at (at least)
// the generation the write produced, an operation finishing, or a
// rollout reaching a state.
type Target struct {
	Kind        string
	NodeID      string // streams and configurations
	ResourceID  string // the stream, job or rollout id
	OperationID string // the write's operation ("" for a rollout)
	Generation  int64  // the generation the write produced (0: any)
	// Success is the rollout state that ends the wait well (succeeded for
	// a create, paused for a pause, ...).
	Success string
}

// label is how progress lines name the target.
func (t Target) label() string {
	switch t.Kind {
	case waitStream:
		return t.NodeID + "/" + t.ResourceID
	case waitConfiguration:
		return t.NodeID + " configuration"
	case waitOperation:
		return "operation " + t.OperationID
	case waitRollout:
		return "rollout " + t.ResourceID
	}
	return t.Kind + " " + t.ResourceID
}

// Observation is what is known of a target, from its views and its events.
type Observation struct {
	Convergence string
	Reason      string
	Generation  int64  // the generation the convergence speaks of
	OpState     string // the write's operation
	Failure     string // why the operation, resource or rollout failed
	Rollout     string // a rollout's state
	Wave        string // a running rollout's wave ("1/2"), from its view
}

// Verdict is where a wait stands.
type Verdict int

const (
	// Waiting: nothing decided yet.
	Waiting Verdict = iota
	// Succeeded: converged, finished or reached its state.
	Succeeded
	// Failed: the operation, the resource or the rollout failed.
	Failed
)

// rolloutTerminal are the states a rollout never leaves.
var rolloutTerminal = []string{wire.RolloutSucceeded, wire.RolloutFailed, wire.RolloutCancelled, wire.RolloutRolledBack}

// failedReasons are the convergence reasons of a resource that will not
// converge by itself.
var failedReasons = []string{"failed", "observed_failed", "cancelled", "expired", "incompatible_capability"}

// Decide says whether the wait for t is over given o, and why when it
// failed. It is the whole policy of --wait.
func Decide(t Target, o Observation) (Verdict, string) {
	switch t.Kind {
	case waitRollout:
		switch {
		case o.Rollout == t.Success:
			return Succeeded, ""
		case slices.Contains(rolloutTerminal, o.Rollout):
			return Failed, joinNonEmpty("rollout "+o.Rollout, o.Failure)
		}
		return Waiting, ""
	case waitOperation:
		switch o.OpState {
		case wire.OpSucceeded:
			return Succeeded, ""
		case wire.OpFailed, wire.OpCancelled, wire.OpSuperseded:
			return Failed, joinNonEmpty("operation "+o.OpState, o.Failure)
		}
		return Waiting, ""
	}
	if o.OpState == wire.OpFailed || o.OpState == wire.OpCancelled {
		return Failed, joinNonEmpty("operation "+o.OpState, o.Failure)
	}
	if o.Generation < t.Generation {
		return Waiting, "" // the convergence speaks of an older desire
	}
	switch o.Convergence {
	case wire.ConvergenceInSync:
		return Succeeded, ""
	case wire.ConvergenceDegraded, wire.ConvergenceBlocked:
		if slices.Contains(failedReasons, o.Reason) {
			return Failed, joinNonEmpty(o.Convergence+" ("+o.Reason+")", o.Failure)
		}
	}
	return Waiting, ""
}

// Apply folds one event into o when it concerns t, and says whether it
// did. A resync concerns every target: what was folded may be behind.
func (o *Observation) Apply(t Target, ev wire.Event) bool {
	opMatch := t.OperationID != "" && ev.OperationID == t.OperationID
	switch ev.Kind {
	case kindResync:
		return true
	case wire.EventConvergenceChanged:
		if !t.concerns(ev) {
			return false
		}
		o.Convergence = str(ev.Data["convergence"])
		o.Reason = str(ev.Data["reason"])
		o.Generation = num(ev.Data["generation"])
		return true
	case wire.EventCommandFailed:
		if !opMatch {
			return false
		}
		o.OpState = wire.OpFailed
		o.Failure = joinNonEmpty(str(ev.Data["failure_code"]), ev.Message)
		return true
	case wire.EventCommandSucceeded:
		if !opMatch {
			return false
		}
		o.OpState = wire.OpSucceeded
		return true
	case wire.EventOperationCancelled:
		if !opMatch {
			return false
		}
		o.OpState = wire.OpCancelled
		return true
	case wire.EventRolloutChanged:
		if t.Kind != waitRollout || ev.ResourceID != t.ResourceID {
			return false
		}
		if ev.Data["node_id"] != nil {
			return true // a node's phase: the rollout's own state is elsewhere
		}
		if s := str(ev.Data["state"]); s != "" {
			o.Rollout = s
		}
		if c := str(ev.Data["failure_code"]); c != "" {
			o.Failure = joinNonEmpty(c, ev.Message)
		}
		return true
	}
	return false
}

// concerns says whether a convergence event is about t's resource.
func (t Target) concerns(ev wire.Event) bool {
	typ := str(ev.Data["resource_type"])
	switch t.Kind {
	case waitStream:
		return ev.NodeID == t.NodeID && ev.ResourceID == t.ResourceID && (typ == "" || typ == waitStream)
	case waitJob:
		return ev.ResourceID == t.ResourceID && (typ == "" || typ == waitJob)
	case waitConfiguration:
		return ev.NodeID == t.NodeID && ev.ResourceID == wire.ConfigResource
	}
	return false
}

// progress keeps the chain of states a wait went through, for its line.
type progress struct {
	states []string
}

// note records s when it is new to the chain. The views and the events
// may disagree for a moment (convergence events trail the views), so a
// state seen before is not shown again.
func (p *progress) note(s string) bool {
	if s == "" || slices.Contains(p.states, s) {
		return false
	}
	p.states = append(p.states, s)
	return true
}

func (p *progress) String() string { return strings.Join(p.states, " → ") }

// state is the word a progress line shows for o.
func (t Target) state(o Observation) string {
	switch t.Kind {
	case waitRollout:
		if o.Rollout == wire.RolloutRunning && o.Wave != "" {
			return o.Rollout + " wave " + o.Wave
		}
		return o.Rollout
	case waitOperation:
		return o.OpState
	}
	if o.Generation < t.Generation {
		return wire.ConvergencePending
	}
	return o.Convergence
}

func str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

func num(v any) int64 {
	switch n := v.(type) {
	case float64:
		return int64(n)
	case int64:
		return n
	case int:
		return int64(n)
	}
	return 0
}

func joinNonEmpty(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, ": ")
}
