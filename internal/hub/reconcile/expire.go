package reconcile

import (
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// Attempt is one attempt in flight: State is wire.OpDispatched or
// wire.OpAcknowledged. ExpiresAt is its expiry; zero means none.
type Attempt struct {
	AttemptID string
	IntentID  string
	NodeID    string
	State     string
	ExpiresAt time.Time
}

// Expired is an attempt that must become State (wire.OpTimedOut) at Now.
// Retrying is the caller's move: it leaves the intent's outbox row
// unprocessed with one more attempt and LastFinishedAt = now, and
// PlanDispatch applies the backoff.
type Expired struct {
	AttemptID string
	IntentID  string
	NodeID    string
	From      string
	State     string
}

// ExpireAttempts returns, in input order, the in-flight attempts whose
// expiry is at or before now. Acknowledged attempts expire like dispatched
// ones: acknowledgement is transport state, not an outcome. Attempts in any
// other state are ignored.
func ExpireAttempts(active []Attempt, now time.Time) []Expired {
	var out []Expired
	for _, a := range active {
		if a.State != wire.OpDispatched && a.State != wire.OpAcknowledged {
			continue
		}
		if a.ExpiresAt.IsZero() || now.Before(a.ExpiresAt) {
			continue
		}
		out = append(out, Expired{AttemptID: a.AttemptID, IntentID: a.IntentID, NodeID: a.NodeID, From: a.State, State: wire.OpTimedOut})
	}
	return out
}

// Backoff is the wait after the attempt-th attempt of an intent failed:
// initial, then doubling, capped at ceiling. It is 0 for attempt <= 0 or
// initial <= 0, and never overflows. Jitter, if wanted, is the caller's to
// add.
func Backoff(attempt int, initial, ceiling time.Duration) time.Duration {
	if attempt <= 0 || initial <= 0 {
		return 0
	}
	if ceiling < initial {
		ceiling = initial
	}
	d := initial
	for i := 1; i < attempt && d < ceiling; i++ {
		if d > ceiling/2 {
			return ceiling
		}
		d *= 2
	}
	return d
}
