package hub

import (
	"strconv"
	"time"

	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// configLocal is the observed state of a node configuration the Hub did not
// give (it never matches a desire).
const configLocal = "local"

// errorWindow is how long an observed last_error keeps a matching stream
// degraded after it happened.
const errorWindow = 5 * time.Minute

// convergenceOf is the one convergence rule (reconcile.Convergence) applied
// to a stored resource and the node as the fleet sees it now.
func (h *Hub) convergenceOf(rs store.ResourceState, now time.Time) reconcile.Result {
	return reconcile.Convergence(h.convergenceInput(rs, now))
}

// convergenceInput is what reconcile.Convergence is told of a stored
// resource and its node now.
func (h *Hub) convergenceInput(rs store.ResourceState, now time.Time) reconcile.ConvergenceInput {
	in := reconcile.ConvergenceInput{
		Desired:              &reconcile.Desired{State: rs.State, Generation: rs.Generation, ConfigVersion: rs.ConfigVersion, ActionID: rs.ActionID},
		RequiredCapabilities: []string{wire.CapabilityStreamControl},
		ErrorWindow:          errorWindow,
		Now:                  now,
	}
	if o := rs.Observed; o != nil {
		in.Observed = &reconcile.Observed{State: o.State, Generation: o.Generation, ConfigVersion: o.ConfigVersion,
			ActionID: o.ActionID, LastError: o.LastError, LastErrorAt: o.LastErrorAt}
	}
	if rs.Kind == store.KindJob {
		// A job's version is compared as its config_version.
		in.Job, in.RequiredCapabilities = true, commandCapabilities(rs.Kind)
		if o := rs.ObservedJob; o != nil {
			in.Observed = &reconcile.Observed{State: o.State, Generation: o.Generation, ConfigVersion: strconv.Itoa(o.Version),
				ActionID: o.ActionID, LastError: o.LastError, LastErrorAt: o.LastErrorAt}
		}
	}
	if rs.Kind == store.KindConfiguration {
		// The Hub version and generation of the last apply the node ran.
		in.Observed, in.RequiredCapabilities = nil, commandCapabilities(rs.Kind)
		if o := rs.ObservedConfig; o != nil {
			in.Observed = &reconcile.Observed{State: wire.ConfigApplied, Generation: o.Generation, ConfigVersion: o.HubVersion}
			if o.HubVersion == "" && o.Generation != rs.Generation && rs.Latest != nil && rs.Latest.State == wire.OpSucceeded && !o.ReportedAt.Before(rs.Latest.FinishedAt) {
				// Reported after the apply succeeded, the node runs a
				// configuration the Hub did not give it (a local apply, an
				// edited --config file): drift, not a report still awaited.
				in.Observed.State, in.Observed.Generation = configLocal, rs.Generation
			}
		}
	}
	if i := rs.Latest; i != nil {
		in.Latest = latestAttempt(*i, now)
	}
	in.Node = h.fleet.ReconcileNode(rs.NodeID)
	return in
}

// latestAttempt is what Convergence needs of a resource's latest intent.
func latestAttempt(i store.Intent, now time.Time) *reconcile.LatestAttempt {
	a := &reconcile.LatestAttempt{State: i.State, RetryPending: i.RetryCount > 0 && !terminalOp(i.State),
		IntentExpired: !i.ExpiresAt.IsZero() && !now.Before(i.ExpiresAt)}
	if i.Failure != nil {
		a.FailureCode = i.Failure.Code
	}
	return a
}

func terminalOp(state string) bool {
	switch state {
	case wire.OpSucceeded, wire.OpFailed, wire.OpCancelled, wire.OpSuperseded:
		return true
	}
	return false
}

// streamView is the three views of a stream resource.
func (h *Hub) streamView(rs store.ResourceState, now time.Time) wire.Stream {
	v := wire.Stream{
		ID: rs.ResourceID, NodeID: rs.NodeID,
		Desired:     wire.StreamDesired{State: rs.State, Generation: rs.Generation, ConfigVersion: rs.ConfigVersion, ActionID: rs.ActionID},
		Convergence: h.convergenceOf(rs, now).Value,
	}
	if o := rs.Observed; o != nil {
		v.Observed = h.observedView(rs.NodeID, *o)
	}
	if rs.Latest != nil {
		op := h.operationOf(*rs.Latest, &rs, now)
		op.Observed = nil // the view holds the observation itself
		v.LatestOperation = &op
	}
	return v
}

// observedView is a stored observation with the counters of the node's
// latest report (kept in memory only).
func (h *Hub) observedView(nodeID string, o store.ObservedStream) wire.StreamObserved {
	return h.fleet.ObservedView(nodeID, o)
}

// operationOf is the operation record of an intent with its derived fields:
// convergence (of the resource while the intent is its latest, else from the
// intent's own state), the latest observation and the retry's next time.
// rs, when not nil, is the intent's resource.
func (h *Hub) operationOf(in store.Intent, rs *store.ResourceState, now time.Time) wire.Operation {
	op := in.Wire()
	switch {
	case rs != nil && rs.Latest != nil && rs.Latest.ID == in.ID:
		op.Convergence = h.convergenceOf(*rs, now).Value
	case in.State == wire.OpSuperseded:
		op.Convergence = wire.ConvergencePending
	case in.State == wire.OpCancelled, in.State == wire.OpFailed:
		op.Convergence = wire.ConvergenceBlocked
	default:
		// A later write owns the resource's convergence; this intent is done.
		op.Convergence = wire.ConvergenceUnknown
	}
	if rs != nil && rs.Observed != nil {
		obs := h.observedView(rs.NodeID, *rs.Observed)
		op.Observed = &obs
	}
	if in.State == wire.OpPending && in.RetryCount > 0 {
		op.Retry.NextAt = wire.At(in.UpdatedAt.Add(reconcile.Backoff(in.RetryCount, h.limits.BackoffInitial, h.limits.BackoffMax)))
	}
	return op
}
