package hub

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/hub/store"
)

// Several Hubs on one PostgreSQL database each serve the agent API, so
// what an Agent tells one Hub must reach the others: the leader needs the
// node's lease, its reports and its command results for reconciliation
// and dispatch; a standby holding the node's long-poll needs the attempts
// the leader started. Each Hub writes the store first, and the write
// transaction notes what changed (store.Watch, delivered at commit); the
// other Hubs read the few rows of the nodes named and tell their fleets.
// A slow poll (peerPollInterval) resynchronizes what the fleet cares about,
// so a lost notification only delays.

// peerPollInterval is the fallback poll behind the change notifications.
const peerPollInterval = 2 * time.Second

// peerWork is the coalesced work the other Hubs' change notes leave for
// peerLoop.
type peerWork struct {
	wake chan struct{}

	mu       sync.Mutex // guards the fields below
	all      bool
	events   bool
	nodes    map[string]bool
	attempts map[string]bool
	outbox   map[string]bool // and job observations: the leader dispatches and converges
}

func newPeerWork() *peerWork {
	return &peerWork{wake: make(chan struct{}, 1), nodes: map[string]bool{}, attempts: map[string]bool{}, outbox: map[string]bool{}}
}

// add takes the changes of one notification.
func (p *peerWork) add(changes []store.Change) {
	p.mu.Lock()
	for _, c := range changes {
		switch c.Kind {
		case store.ChangeAll:
			p.all = true
		case store.ChangeEvents:
			p.events = true
		case store.ChangeNode:
			p.nodes[c.NodeID] = true
		case store.ChangeAttempts:
			p.attempts[c.NodeID] = true
		case store.ChangeOutbox, store.ChangeJobs:
			p.outbox[c.NodeID] = true
		}
	}
	p.mu.Unlock()
	wake(p.wake)
}

// take returns the work noted so far and starts afresh.
func (p *peerWork) take() (all, events bool, nodes, attempts, outbox map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	all, events, nodes, attempts, outbox = p.all, p.events, p.nodes, p.attempts, p.outbox
	p.all, p.events, p.nodes, p.attempts, p.outbox = false, false, map[string]bool{}, map[string]bool{}, map[string]bool{}
	return all, events, nodes, attempts, outbox
}

// watchPeers listens for the other Hubs' change notes until ctx ends.
func (h *Hub) watchPeers(ctx context.Context) { h.st.Watch(ctx, h.peers.add) }

// peerLoop applies the other Hubs' changes to this Hub until ctx ends: at
// each notification, and everything it keeps once per peerPollInterval.
func (h *Hub) peerLoop(ctx context.Context) {
	tick := time.NewTicker(peerPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.peers.wake:
		case <-tick.C:
			h.peers.add([]store.Change{{Kind: store.ChangeAll}})
		}
		if err := h.syncPeers(ctx); err != nil && ctx.Err() == nil {
			h.log.Warn("hub: changes of other Hubs", "err", err)
		}
	}
}

// syncPeers applies the changes noted so far.
func (h *Hub) syncPeers(ctx context.Context) error {
	all, events, nodes, attempts, outbox := h.peers.take()
	if all || events {
		wake(h.pumpc)
	}
	if leading, _ := h.lead.isLeading(); leading && len(outbox) > 0 {
		// Another Hub took an operator write: the leader dispatches it and
		// looks at the node's convergence.
		for id := range outbox {
			h.fleet.Mark(id)
			h.converge(id)
		}
		h.nudge()
	}
	now := h.opts.Now()
	if all {
		return h.resyncPeers(ctx, now)
	}
	var errs []error
	for id := range nodes {
		errs = append(errs, h.syncNode(ctx, id, now))
	}
	for id := range attempts {
		errs = append(errs, h.syncAttempts(ctx, id, now))
	}
	return errors.Join(errs...)
}

// resyncPeers reads every node's row and the attempts of the nodes this
// Hub holds a long-poll or attempts of: what a lost notification may have
// said.
func (h *Hub) resyncPeers(ctx context.Context, now time.Time) error {
	before := map[string]int64{}
	for _, n := range h.fleet.Nodes() {
		before[n.NodeID] = h.fleet.Changes(n.NodeID)
	}
	nodes, err := h.st.Nodes(ctx)
	if err != nil {
		return err
	}
	stored := make(map[string]bool, len(nodes))
	var errs []error
	for _, sn := range nodes {
		stored[sn.NodeID] = true
		errs = append(errs, h.syncNodeRow(ctx, sn, before[sn.NodeID], now))
	}
	for _, n := range h.fleet.Nodes() {
		if !n.RegisteredAt.IsZero() && !stored[n.NodeID] && h.fleet.Changes(n.NodeID) == before[n.NodeID] {
			h.fleet.Forget(n.NodeID) // another Hub forgot it
		}
	}
	leading, _ := h.lead.isLeading()
	if !leading {
		// Only the leader records that a lease lapsed; a standby's view
		// just follows.
		h.fleet.ExpireLeases(now)
	} else {
		ids, err := h.st.OutboxNodes(ctx)
		if err != nil {
			return err
		}
		if len(ids) > 0 {
			h.fleet.Mark(ids...)
			h.nudge()
		}
	}
	want := map[string]bool{}
	for _, id := range h.fleet.Polled() {
		want[id] = true
	}
	_, queues := h.fleet.Queues()
	for _, q := range queues {
		want[q.NodeID] = true
	}
	for id := range want {
		errs = append(errs, h.syncAttempts(ctx, id, now))
	}
	return errors.Join(errs...)
}

// syncNode reads node id's row and gives it to the fleet; a node gone from
// the store was forgotten by another Hub.
func (h *Hub) syncNode(ctx context.Context, id string, now time.Time) error {
	changes := h.fleet.Changes(id)
	sn, err := h.st.GetNode(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		if n, ok := h.fleet.Node(id); ok && !n.RegisteredAt.IsZero() && h.fleet.Changes(id) == changes {
			h.fleet.Forget(id)
		}
		return nil
	}
	if err != nil {
		return err
	}
	return h.syncNodeRow(ctx, sn, changes, now)
}

// syncNodeRow gives node sn's stored row, and its observed streams when
// it reported something this Hub has not taken, to the fleet (changes:
// fleet.Changes before the row was read). The leader
// acts on what changed as if the Agent had called it.
func (h *Hub) syncNodeRow(ctx context.Context, sn store.Node, changes int64, now time.Time) error {
	var obs []store.ObservedStream
	if h.fleet.NeedsReport(sn.NodeID, sn.ReportBootID, sn.ReportSeq) {
		var err error
		if obs, err = h.st.ObservedStreams(ctx, sn.NodeID); err != nil {
			return err
		}
		if obs == nil {
			obs = []store.ObservedStream{}
		}
	}
	got := h.fleet.Sync(sn, obs, changes, now)
	if got.Came {
		h.nodeOnline(sn.NodeID, now)
	}
	if got.Reported || got.Rebooted {
		h.converge(sn.NodeID)
	}
	if got.Activated {
		h.nudge()
	}
	return nil
}

// syncAttempts tells the fleet what became of node id's attempts. The
// leader keeps its own attempts in flight and learns which of them another
// Hub saw acknowledged or finished; a standby takes the node's attempts
// in flight from the store, to hand them to the node's long-polls.
func (h *Hub) syncAttempts(ctx context.Context, id string, now time.Time) error {
	if leading, _ := h.lead.isLeading(); leading {
		moved := false
		for _, fl := range h.fleet.FlightsOf(id) {
			aid := fl.Command.AttemptID
			a, err := h.st.GetAttempt(ctx, aid)
			switch {
			case errors.Is(err, store.ErrNotFound):
				continue
			case err != nil:
				return err
			case a.State == fl.State:
				continue // nothing new
			}
			if res := h.attemptMoved(aid, a.State, now); res != "" {
				moved = true
				h.converge(id, res)
			}
		}
		if moved {
			h.fleet.Mark(id)
			h.nudge()
		}
		return nil
	}
	active, err := h.st.ActiveCommands(ctx, id)
	if err != nil {
		return err
	}
	flights, err := h.flightsOf(ctx, active, h.lead.currentEpoch())
	if err != nil {
		return err
	}
	h.lead.flightsMu.Lock()
	defer h.lead.flightsMu.Unlock()
	if leading, _ := h.lead.isLeading(); leading {
		return nil // it leads since it read: its own attempts rule
	}
	h.fleet.SyncFlights(id, flights)
	return nil
}
