package reconcile

import "time"

// Leadership actions: what a Hub does after a lease claim (Leadership).
const (
	// LeadKeep: the Hub leads and keeps leading at its epoch.
	LeadKeep = "keep"
	// LeadGain: the Hub gained the lease at a new epoch: it rebuilds its
	// fleet view from the store, then runs the leader's loops at that epoch
	// (after stepping down from an older term it still ran).
	LeadGain = "gain"
	// LeadStepDown: the Hub led and must stop at once: another Hub holds
	// the lease, or its own may lapse before it could renew it again.
	LeadStepDown = "step_down"
	// LeadStandBy: the Hub does not lead and does not start.
	LeadStandBy = "stand_by"
)

// LeaderInput is what a Hub knows after one claim of the leader lease.
type LeaderInput struct {
	// Self is this Hub's id.
	Self string
	// Claimed: the claim was answered (the lease is written or refused);
	// false when the store failed, and the lease is unknown.
	Claimed bool
	// Holder and Epoch are the lease's holder and epoch as the claim left
	// them (when Claimed).
	Holder string
	Epoch  int64
	// Leading and LeadingEpoch: this Hub runs the leader's loops, at that
	// epoch.
	Leading      bool
	LeadingEpoch int64
	// LastRenewal is the clock reading this Hub's last successful claim
	// was made with: the lease it wrote lapses at LastRenewal + TTL.
	LastRenewal time.Time
	Now         time.Time
	TTL         time.Duration
	// Margin is how long before the lease lapses a Hub that could not renew
	// steps down: at least the renewal interval, so that the next check
	// cannot come too late.
	Margin time.Duration
}

// Leadership decides, by the first row that applies:
//
//	claimed, held by self at LeadingEpoch, leading   keep
//	claimed, held by self                            gain (at Epoch)
//	claimed, held by another, leading                step_down
//	not claimed, leading, now < LastRenewal+TTL-Margin keep
//	not claimed, leading                             step_down
//	otherwise                                        stand_by
//
// A leader that cannot renew thus stops, by its own clock, before the
// lease it wrote lapses and another Hub may take it over: two leaders never
// run at once, whatever the store answers meanwhile.
func Leadership(in LeaderInput) string {
	switch {
	case in.Claimed && in.Holder == in.Self && in.Leading && in.Epoch == in.LeadingEpoch:
		return LeadKeep
	case in.Claimed && in.Holder == in.Self:
		return LeadGain
	case in.Claimed && in.Leading:
		return LeadStepDown
	case !in.Claimed && in.Leading && in.Now.Before(in.LastRenewal.Add(in.TTL-in.Margin)):
		return LeadKeep
	case in.Leading:
		return LeadStepDown
	}
	return LeadStandBy
}
