package reconcile

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// Dispatch actions: what PlanDispatch decides for one outbox row.
const (
	ActionDispatch = "dispatch" // create an attempt now and queue the command
	ActionWait     = "wait"     // leave the row; look again at NextAt or on an event
	ActionFail     = "fail"     // finish the intent as failed with Code
)

// Reasons for ActionWait (Code carries the failure code for ActionFail, and
// CodeCapacity for a wait on a full queue).
const (
	WaitNodeOffline = "node_offline"
	WaitDraining    = wire.NodeModeDraining
	WaitMaintenance = wire.NodeModeMaintenance
	WaitBackoff     = "backoff"
	WaitCapacity    = CodeCapacity
)

// ErrInvalidLimits is returned by Limits.Validate.
var ErrInvalidLimits = errors.New("reconcile: invalid limits")

// Limits bound dispatch. QueueBound is the most attempts a node may have in
// flight at once (0 means unbounded); AttemptTTL is how long one attempt may
// stay in flight; BackoffInitial and BackoffMax shape the wait between
// attempts of one intent.
type Limits struct {
	QueueBound     int
	AttemptTTL     time.Duration
	BackoffInitial time.Duration
	BackoffMax     time.Duration
}

// DefaultLimits are the Hub's dispatch limits unless configured otherwise.
func DefaultLimits() Limits {
	return Limits{QueueBound: 64, AttemptTTL: 60 * time.Second, BackoffInitial: time.Second, BackoffMax: time.Minute}
}

// Validate reports every limit that PlanDispatch cannot work with.
func (l Limits) Validate() error {
	var errs []error
	if l.QueueBound < 0 {
		errs = append(errs, fmt.Errorf("%w: queue bound %d is negative", ErrInvalidLimits, l.QueueBound))
	}
	if l.AttemptTTL <= 0 {
		errs = append(errs, fmt.Errorf("%w: attempt TTL %s is not positive", ErrInvalidLimits, l.AttemptTTL))
	}
	if l.BackoffInitial < 0 || l.BackoffMax < l.BackoffInitial {
		errs = append(errs, fmt.Errorf("%w: backoff %s..%s is not 0 <= initial <= max", ErrInvalidLimits, l.BackoffInitial, l.BackoffMax))
	}
	return errors.Join(errs...)
}

// OutboxRow is one unprocessed outbox row whose intent has no attempt in
// flight. Attempts is how many attempts the intent has had; LastFinishedAt
// is when the newest of them finished (zero if none). ExpiresAt is the
// intent's expiry; zero means it never expires.
type OutboxRow struct {
	IntentID             string
	NodeID               string
	RequiredCapabilities []string
	CreatedAt            time.Time
	ExpiresAt            time.Time
	Attempts             int
	LastFinishedAt       time.Time
}

// DispatchInput is everything PlanDispatch looks at. A node missing from
// Nodes is treated as never seen (StatusUnknown).
type DispatchInput struct {
	Rows   []OutboxRow
	Nodes  map[string]Node
	Limits Limits
	Now    time.Time
}

// Decision is what to do with one row. For ActionDispatch AttemptExpiresAt
// is the new attempt's expiry. For ActionWait Reason says why, and NextAt,
// when not zero, is the earliest time the decision can change by time alone
// (the end of a backoff, or the intent's expiry); other changes come from
// events (node online, mode change, queue drained). For ActionFail Code is
// the stable failure code.
type Decision struct {
	IntentID         string
	NodeID           string
	Action           string
	Reason           string
	Code             string
	AttemptExpiresAt time.Time
	NextAt           time.Time
}

// DispatchPlan holds one decision per input row, in the order of the rows.
type DispatchPlan struct {
	Decisions []Decision
}

// Dispatched returns the decisions that dispatch, in plan order.
func (p DispatchPlan) Dispatched() []Decision {
	var out []Decision
	for _, d := range p.Decisions {
		if d.Action == ActionDispatch {
			out = append(out, d)
		}
	}
	return out
}

// PlanDispatch decides, in one pass, what happens to every outbox row. Rows
// compete for a node's queue oldest first (by CreatedAt, then IntentID), so
// the plan does not depend on the order of in.Rows. A row is never
// dispatched at or after its intent's expiry, nor to a node that is not
// online or is draining or in maintenance, nor beyond the node's queue bound.
// A full queue makes a row wait (Reason and Code capacity), not fail: the
// queue drains as the Agent pulls, and an intent that waits too long fails
// as expired.
func PlanDispatch(in DispatchInput) DispatchPlan {
	order := make([]int, len(in.Rows))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int {
		a, b := in.Rows[i], in.Rows[j]
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.IntentID, b.IntentID)
	})
	queued := make(map[string]int)
	out := make([]Decision, len(in.Rows))
	for _, i := range order {
		r := in.Rows[i]
		n, ok := in.Nodes[r.NodeID]
		if !ok {
			n = Node{Status: StatusUnknown, Mode: wire.NodeModeActive}
		}
		d := decide(r, n, in.Limits, in.Now, queued)
		if d.Action == ActionDispatch {
			queued[r.NodeID]++
		}
		out[i] = d
	}
	return DispatchPlan{Decisions: out}
}

// decide is PlanDispatch for one row; queued counts this plan's dispatches
// per node so far.
func decide(r OutboxRow, n Node, l Limits, now time.Time, queued map[string]int) Decision {
	d := Decision{IntentID: r.IntentID, NodeID: r.NodeID}
	expires := !r.ExpiresAt.IsZero()
	wait := func(reason string, next time.Time) Decision {
		d.Action, d.Reason = ActionWait, reason
		if expires && (next.IsZero() || r.ExpiresAt.Before(next)) {
			next = r.ExpiresAt
		}
		d.NextAt = next
		return d
	}
	fail := func(code string) Decision {
		d.Action, d.Reason, d.Code = ActionFail, code, code
		return d
	}
	switch {
	case expires && !now.Before(r.ExpiresAt) && !n.online():
		return fail(CodeNodeUnavailable)
	case expires && !now.Before(r.ExpiresAt):
		return fail(CodeExpired)
	case !n.online():
		return wait(WaitNodeOffline, time.Time{})
	case n.lacks(r.RequiredCapabilities):
		return fail(CodeIncompatibleCapability)
	case n.suspended():
		return wait(n.Mode, time.Time{})
	}
	if r.Attempts > 0 && !r.LastFinishedAt.IsZero() {
		ready := r.LastFinishedAt.Add(Backoff(r.Attempts, l.BackoffInitial, l.BackoffMax))
		if now.Before(ready) {
			return wait(WaitBackoff, ready)
		}
	}
	if l.QueueBound > 0 && n.Active+queued[r.NodeID] >= l.QueueBound {
		w := wait(WaitCapacity, time.Time{})
		w.Code = CodeCapacity
		return w
	}
	d.Action = ActionDispatch
	d.AttemptExpiresAt = now.Add(l.AttemptTTL)
	if expires && r.ExpiresAt.Before(d.AttemptExpiresAt) {
		d.AttemptExpiresAt = r.ExpiresAt
	}
	return d
}
