package reconcile

import (
	"slices"
	"time"
)

// GCNode is what the node garbage collection knows of one registered node.
type GCNode struct {
	NodeID string
	Online bool
	// LastSeen is when the node was last known alive: its lease's end
	// (zero when this Hub process never saw it online).
	LastSeen time.Time
	// HoldsState: the node has desired state (streams, jobs placed on it,
	// a configuration) or commands waiting for it.
	HoldsState bool
}

// NodesToForget returns, by id, the registered nodes the Hub forgets at
// now: unavailable longer than after, holding no state. A node this Hub
// process never saw online counts as unavailable from startedAt, not from
// what the store last recorded, so that a Hub that was down for a day
// does not forget live nodes before they heartbeat again. after <= 0
// forgets nothing.
func NodesToForget(nodes []GCNode, now, startedAt time.Time, after time.Duration) []string {
	if after <= 0 {
		return nil
	}
	var out []string
	for _, n := range nodes {
		if n.Online || n.HoldsState {
			continue
		}
		since := n.LastSeen
		if since.Before(startedAt) {
			since = startedAt
		}
		if now.Sub(since) > after {
			out = append(out, n.NodeID)
		}
	}
	slices.Sort(out)
	return out
}
