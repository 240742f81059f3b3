package fleet

import (
	"slices"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// Several Hubs may share one PostgreSQL database, and an Agent may call
// any of them. What another Hub wrote reaches this fleet through the
// store: the Hub reads the node's row (and its attempts) when told of the
// change and hands them here. The rule stays: the store first, then the
// fleet.

// Synced is what Sync found new in a node's stored row.
type Synced struct {
	// Came: the node came online (its stored lease runs past now).
	Came bool
	// Reported: a newer report was taken as the node's observation.
	Reported bool
	// Rebooted: another Hub registered a new process of the node.
	Rebooted bool
	// Activated: the node's mode became active.
	Activated bool
}

// NeedsReport reports whether node id's stored report (boot, seq) is one
// the fleet has not taken: then the caller reads its observed streams for
// Sync.
func (f *Fleet) NeedsReport(id, boot string, seq int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodes[id]
	if n == nil {
		return boot != ""
	}
	return boot != "" && (boot != n.reportBoot || seq > n.reportSeq)
}

// Changes returns the count of node id's mode and advertisement changes
// written by this Hub, to give Sync with a store read begun after it.
func (f *Fleet) Changes(id string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.nodes[id]; n != nil {
		return n.changes
	}
	return 0
}

// Sync takes what another Hub wrote of a node, as the store holds it now
// (sn), at now: a newer registration (its old session stops working
// here too), a later lease, what it advertises and its mode (unless this
// Hub changed them since the read began: changes is Changes before it),
// and, when observed is not nil, a newer report with its observed streams
// (by stream id; the fleet keeps the slice). It never shortens a lease:
// only the leader's expiry ends one.
func (f *Fleet) Sync(sn store.Node, observed []store.ObservedStream, changes int64, now time.Time) Synced {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out Synced
	n := f.nodeLocked(sn.NodeID)
	// What this Hub wrote since the read began is newer than sn: a later
	// note or poll brings the rest.
	current := n.changes == changes
	if current && sn.RegisteredAt.After(n.node.RegisteredAt) {
		if key, ok := f.sessionOf[sn.NodeID]; ok {
			delete(f.sessions, key)
			delete(f.sessionOf, sn.NodeID)
		}
		n.forgotten = false
		n.node.BootID, n.node.Version, n.node.ProtocolVersion = sn.BootID, sn.Version, sn.ProtocolVersion
		n.node.RegisteredAt, n.node.SessionExpiresAt = sn.RegisteredAt, sn.SessionExpiresAt
		if sn.LeaseTTL > 0 {
			n.leaseTTL = sn.LeaseTTL
		}
		out.Rebooted = n.fresh && n.reportBoot != sn.BootID
		if out.Rebooted {
			n.fresh = false
		}
	}
	if current {
		n.node.Capabilities, n.node.DataAddress, n.node.DataFingerprint = sn.Capabilities, sn.DataAddress, sn.DataFingerprint
		if sn.Mode != "" && sn.Mode != n.node.Mode {
			n.node.Mode = sn.Mode
			if sn.Mode == wire.NodeModeActive {
				out.Activated = true
				f.markLocked(sn.NodeID)
			}
		}
	}
	if sn.LeaseExpiresAt.After(n.leaseUntil) {
		n.leaseUntil = sn.LeaseExpiresAt
		if !n.online && now.Before(n.leaseUntil) && !n.node.RegisteredAt.IsZero() {
			n.online, out.Came = true, true
		}
	}
	if observed != nil && sn.ReportBootID != "" && (sn.ReportBootID != n.reportBoot || sn.ReportSeq > n.reportSeq) {
		n.reportBoot, n.reportSeq, n.observed, n.cfgVersion, n.metrics, n.reportedAt = sn.ReportBootID, sn.ReportSeq, observed, sn.ConfigVersion, sn.Metrics, sn.ReportedAt
		n.node.ReportBootID, n.node.ReportSeq, n.node.ReportedAt, n.node.Restarts = sn.ReportBootID, sn.ReportSeq, sn.ReportedAt, sn.Restarts
		n.counters, n.cfg = nil, nil // not durable: the next report to this Hub brings them
		n.fresh, out.Reported = true, true
	}
	return out
}

// FlightsOf returns node id's attempts in flight, by attempt id.
func (f *Fleet) FlightsOf(id string) []Flight {
	f.mu.Lock()
	var out []Flight
	for _, fl := range f.inflight {
		if fl.Command.NodeID == id {
			out = append(out, fl.Flight)
		}
	}
	f.mu.Unlock()
	slices.SortFunc(out, func(a, b Flight) int { return strings.Compare(a.Command.AttemptID, b.Command.AttemptID) })
	return out
}

// Polled returns the nodes with a long-poll waiting now, by id.
func (f *Fleet) Polled() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for id, n := range f.nodes {
		if n.pollers > 0 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// SyncFlights makes node id's attempts in flight those of fls, as the store
// holds them now, on a Hub that does not lead (the leader keeps its own):
// new ones are queued and wake the node's long-polls, acknowledged ones
// leave the queue, and those gone from fls are forgotten. An attempt
// already here keeps when it was last delivered, so it is not handed out
// again before RedeliverAfter.
func (f *Fleet) SyncFlights(id string, fls []Flight) {
	f.mu.Lock()
	defer f.mu.Unlock()
	keep := make(map[string]bool, len(fls))
	for _, fl := range fls {
		keep[fl.Command.AttemptID] = true
	}
	n := f.nodeLocked(id)
	for aid, fl := range f.inflight {
		if fl.Command.NodeID == id && !keep[aid] {
			delete(f.inflight, aid)
			n.active = max(n.active-1, 0)
		}
	}
	n.queue = slices.DeleteFunc(n.queue, func(q *flight) bool {
		return !keep[q.Command.AttemptID] || q.State != wire.OpDispatched
	})
	for _, v := range fls {
		if v.Command.NodeID != id {
			continue
		}
		if fl := f.inflight[v.Command.AttemptID]; fl != nil {
			if v.State == wire.OpAcknowledged && fl.State == wire.OpDispatched {
				fl.State = wire.OpAcknowledged
				n.queue = slices.DeleteFunc(n.queue, func(q *flight) bool { return q == fl })
			}
			continue
		}
		f.enqueueLocked(v)
	}
}

// Lapsed returns the online nodes whose lease lapsed at now, by id:
// ExpireLeases would mark them unavailable.
func (f *Fleet) Lapsed(now time.Time) []string {
	f.mu.Lock()
	var out []string
	for id, n := range f.nodes {
		if n.online && !now.Before(n.leaseUntil) {
			out = append(out, id)
		}
	}
	f.mu.Unlock()
	slices.Sort(out)
	return out
}
