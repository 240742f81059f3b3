package reconcile

import (
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// Reasons returned with a convergence value. They are machine strings, stable
// like codes; the failure codes (CodeExpired, ...) and the node modes are
// used as reasons too.
const (
	ReasonNoDesired      = "no_desired"
	ReasonNoObservation  = "no_observation"
	ReasonMatch          = "match"
	ReasonErroring       = "erroring"
	ReasonObservedFailed = "observed_failed"
	ReasonDrift          = "drift"
	ReasonNotDispatched  = "not_dispatched"
	ReasonNodeOffline    = "node_offline"
	ReasonSuperseded     = "superseded"
	ReasonDispatched     = "dispatched"
	ReasonAcknowledged   = "acknowledged"
	ReasonAwaitingReport = "awaiting_report"
	ReasonRetrying       = "retrying"
	ReasonFailed         = "failed"
	ReasonTimedOut       = "timed_out"
	ReasonCancelled      = "cancelled"
	ReasonUnknownAttempt = "unknown_attempt_state"
	ReasonStale          = "stale"

	// Jobs only (ConvergenceInput.Job).
	ReasonRecovering = "recovering" // the job restarts from its recovery state
	ReasonNodeLost   = "node_lost"  // a job desired running is on a node whose lease lapsed
	ReasonCompleted  = "completed"  // a bounded job desired running finished
)

// ObservedFailed is the observed stream and job state that always degrades.
const ObservedFailed = "failed"

// Desired is the operator's target for one resource. ActionID is set for a
// restart action, which converges only on a report of the same action_id.
type Desired struct {
	State         string
	Generation    int64
	ConfigVersion string
	ActionID      string
}

// Observed is the latest accepted report for the resource. LastErrorAt may be
// zero when the node does not say when the error happened.
type Observed struct {
	State         string
	Generation    int64
	ConfigVersion string
	ActionID      string
	LastError     string
	LastErrorAt   time.Time
}

// LatestAttempt is the newest attempt of the resource's latest intent (the
// intent that carries Desired.Generation). State is one of the wire.Op*
// operation states; an intent accepted but not dispatched yet is State
// wire.OpPending. RetryPending says the intent is being retried: an earlier
// attempt failed or timed out and another one is scheduled or in flight.
// IntentExpired says the intent's own expiry has passed, so no new attempt
// will be made.
type LatestAttempt struct {
	State         string
	FailureCode   string
	RetryPending  bool
	IntentExpired bool
}

// ConvergenceInput is everything Convergence looks at. Desired, Observed and
// Latest are nil when absent. RequiredCapabilities are the capabilities the
// pending work needs on the node (for example network_shuffle for a split
// placement). ErrorWindow bounds how long an observed LastError counts as
// "erroring" after LastErrorAt; zero means for as long as it is reported.
// Job says the resource is a job, not a stream: the job rows of the
// decision table apply only then.
type ConvergenceInput struct {
	Job                  bool
	Desired              *Desired
	Observed             *Observed
	Node                 Node
	Latest               *LatestAttempt
	RequiredCapabilities []string
	ErrorWindow          time.Duration
	Now                  time.Time
}

// Result is a convergence value (one of the wire.Convergence* constants) and
// a short machine reason for it.
type Result struct {
	Value  string
	Reason string
}

// permanent reports whether a failure code is one no retry can fix.
func permanent(code string) bool {
	switch code {
	case CodeIncompatibleCapability, CodeExpired, CodeNodeUnavailable:
		return true
	}
	return false
}

// Convergence compares desired and observed state, in the light of the node
// and the latest attempt, and says how far apart they are. The decision table
// is in the package documentation. Acknowledgement never makes a resource
// in_sync: only an observation that matches does.
func Convergence(in ConvergenceInput) Result {
	d, o, a := in.Desired, in.Observed, in.Latest
	if d == nil {
		return Result{wire.ConvergenceUnknown, ReasonNoDesired}
	}
	if in.Job && d.State == wire.JobRunning && in.Node.Status == StatusUnavailable {
		// The job is not running anywhere the Hub can see; a stopped job
		// on a lost node is not harmed, so only running is degraded.
		return Result{wire.ConvergenceDegraded, ReasonNodeLost}
	}
	if o != nil {
		reason, ok := ReasonMatch, matches(*d, *o)
		if !ok && in.Job && completed(*d, *o) {
			reason, ok = ReasonCompleted, true
		}
		if ok {
			if !in.Node.observing() {
				return Result{wire.ConvergenceUnknown, ReasonStale}
			}
			if erroring(*o, in.ErrorWindow, in.Now) {
				return Result{wire.ConvergenceDegraded, ReasonErroring}
			}
			return Result{wire.ConvergenceInSync, reason}
		}
	}
	if a == nil {
		if o == nil {
			return Result{wire.ConvergenceUnknown, ReasonNoObservation}
		}
		return drift(*o, in)
	}
	blocked := func(reason string) Result { return Result{wire.ConvergenceBlocked, reason} }
	switch a.State {
	case wire.OpPending:
		switch {
		case in.Node.online() && in.Node.lacks(in.RequiredCapabilities):
			return blocked(CodeIncompatibleCapability)
		case in.Node.suspended():
			return blocked(in.Node.Mode)
		case a.IntentExpired:
			return blocked(CodeExpired)
		case a.RetryPending:
			return Result{wire.ConvergenceDegraded, ReasonRetrying}
		case !in.Node.online():
			return Result{wire.ConvergencePending, ReasonNodeOffline}
		}
		return Result{wire.ConvergencePending, ReasonNotDispatched}
	case wire.OpDispatched, wire.OpAcknowledged:
		if a.RetryPending {
			return Result{wire.ConvergenceDegraded, ReasonRetrying}
		}
		if a.State == wire.OpAcknowledged {
			return Result{wire.ConvergenceApplying, ReasonAcknowledged}
		}
		return Result{wire.ConvergenceApplying, ReasonDispatched}
	case wire.OpSucceeded:
		if o != nil && o.Generation >= d.Generation {
			return drift(*o, in)
		}
		return Result{wire.ConvergenceApplying, ReasonAwaitingReport}
	case wire.OpFailed, wire.OpTimedOut:
		switch {
		case permanent(a.FailureCode):
			return blocked(a.FailureCode)
		case a.IntentExpired:
			return blocked(CodeExpired)
		case a.RetryPending && in.Node.suspended():
			return blocked(in.Node.Mode)
		case a.RetryPending:
			return Result{wire.ConvergenceDegraded, ReasonRetrying}
		case a.FailureCode != "":
			return blocked(a.FailureCode)
		case a.State == wire.OpTimedOut:
			return blocked(ReasonTimedOut)
		}
		return blocked(ReasonFailed)
	case wire.OpCancelled:
		return blocked(ReasonCancelled)
	case wire.OpSuperseded:
		return Result{wire.ConvergencePending, ReasonSuperseded}
	}
	return Result{wire.ConvergenceUnknown, ReasonUnknownAttempt}
}

// matches reports whether the observation is the desired state: same state,
// generation and config_version (an empty desired config_version accepts
// whatever version the node runs), and for a restart the same action_id.
func matches(d Desired, o Observed) bool {
	return d.State == o.State && d.Generation == o.Generation &&
		(d.ConfigVersion == "" || d.ConfigVersion == o.ConfigVersion) &&
		(d.ActionID == "" || d.ActionID == o.ActionID)
}

// completed reports whether a job desired running is a bounded job that
// finished in the desired generation, config_version and action: the
// observation matches but for its state, completed.
func completed(d Desired, o Observed) bool {
	if d.State != wire.JobRunning || o.State != wire.JobCompleted {
		return false
	}
	d.State = wire.JobCompleted
	return matches(d, o)
}

// erroring reports whether the observation carries a current error.
func erroring(o Observed, window time.Duration, now time.Time) bool {
	if o.LastError == "" {
		return false
	}
	if window <= 0 || o.LastErrorAt.IsZero() {
		return true
	}
	return now.Sub(o.LastErrorAt) <= window
}

// drift is the degraded result for a mismatching observation with no work
// under way: a failed, recovering (jobs) or erroring observation says so,
// anything else is drift. A stale observation says nothing: unknown.
func drift(o Observed, in ConvergenceInput) Result {
	switch {
	case !in.Node.observing():
		return Result{wire.ConvergenceUnknown, ReasonStale}
	case o.State == ObservedFailed:
		return Result{wire.ConvergenceDegraded, ReasonObservedFailed}
	case in.Job && o.State == wire.JobRecovering:
		return Result{wire.ConvergenceDegraded, ReasonRecovering}
	case erroring(o, in.ErrorWindow, in.Now):
		return Result{wire.ConvergenceDegraded, ReasonErroring}
	}
	return Result{wire.ConvergenceDegraded, ReasonDrift}
}
