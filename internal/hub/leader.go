package hub

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/hub/store"
)

// leaseRenewInterval is how often a Hub on a shared database claims the
// leader lease: the leader renews it, a standby tries to take it over.
const leaseRenewInterval = time.Second

// releaseTimeout bounds the lease release of a clean shutdown.
const releaseTimeout = 2 * time.Second

// Leader roles of GET /system (ha.role).
const (
	roleLeader  = "leader"
	roleStandby = "standby"
)

// leadership is this Hub's part in the leader lease (store.Lease). Exactly
// one Hub of those sharing a database runs the leader's loops
// (reconciliation, dispatch, attempt expiry, node GC, retention, rollout
// driving, convergence events), on a context that fences their writes on
// its epoch (store.WithEpoch). A Hub that owns its database alone (SQLite)
// takes the lease at start and leads until it stops.
type leadership struct {
	id, address string
	// shared: other Hubs may open the database (store.Store.Shared); the
	// lease is renewed and may be lost.
	shared bool
	ttl    time.Duration
	// fenced wakes the lease loop when a leader write was fenced.
	fenced chan struct{}

	mu          sync.Mutex // guards the fields below
	leading     bool
	epoch       int64       // the term this Hub leads, when leading
	lease       store.Lease // the lease as last claimed or refused
	lastRenewal time.Time   // clock reading of the last successful claim

	// loopMu serializes starting and stopping the leader's loops.
	loopMu sync.Mutex
	stop   context.CancelFunc // nil: the loops do not run
	wg     sync.WaitGroup

	// flightsMu keeps a standby's copy of a node's attempts (peers.go)
	// from landing in the fleet once the Hub rebuilt it to lead.
	flightsMu sync.Mutex
}

// HA is the high-availability part of GET /api/v1/system.
type HA struct {
	// Role is leader or standby.
	Role string `json:"role"`
	// Leader is the Hub holding the lease (id and address), as this Hub
	// last saw it; absent when none holds it.
	Leader *HALeader `json:"leader,omitempty"`
	// Epoch is the lease's epoch as this Hub last saw it.
	Epoch int64 `json:"epoch"`
}

// HALeader names the leading Hub.
type HALeader struct {
	ID      string `json:"id"`
	Address string `json:"address"`
}

func newLeadership(o Options, shared bool) *leadership {
	id := o.HubID
	if id == "" {
		id = o.NewID()
	}
	addr := o.Settings.AdvertiseURL
	if addr == "" {
		addr = o.Settings.Address
	}
	return &leadership{id: id, address: addr, shared: shared, ttl: o.Settings.leaseTTL(), fenced: make(chan struct{}, 1)}
}

func (l *leadership) claim(now time.Time) store.LeaseClaim {
	return store.LeaseClaim{HolderID: l.id, Address: l.address, Now: now, TTL: l.ttl}
}

// view returns the HA descriptor of /system.
func (l *leadership) view(now time.Time) HA {
	l.mu.Lock()
	defer l.mu.Unlock()
	ha := HA{Role: roleStandby, Epoch: l.lease.Epoch}
	// A leader whose renewals stall stops acting before its lease may lapse
	// (mayAct) and says so at once, though its lease loop has not yet
	// stepped down: two Hubs never both say they lead.
	leading := l.actsLocked(now)
	if leading {
		ha.Role = roleLeader
	}
	if l.lease.HolderID != "" && (leading || l.lease.Held(now)) {
		ha.Leader = &HALeader{ID: l.lease.HolderID, Address: l.lease.HolderAddress}
	}
	return ha
}

// currentEpoch is the newest leader epoch this Hub knows of: what the
// agent API tells Agents, so that they refuse commands of older terms.
func (l *leadership) currentEpoch() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lease.Epoch
}

func (l *leadership) isLeading() (bool, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leading, l.epoch
}

// mayAct reports whether the leader's loops may act at now: always on a
// database of its own; on a shared one, only while the lease this Hub last
// renewed is safely short of lapsing (reconcile.Leadership's margin), even
// if the lease loop is still waiting for the store to answer a renewal.
func (l *leadership) mayAct(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.actsLocked(now)
}

func (l *leadership) actsLocked(now time.Time) bool {
	return l.leading && (!l.shared || now.Before(l.lastRenewal.Add(l.ttl-leaseRenewInterval)))
}

// takeLease starts the term of a Hub that owns its database alone: each
// start is a new epoch, persisted.
func (h *Hub) takeLease(ctx context.Context) error {
	now := h.opts.Now()
	l, err := h.st.TakeLease(ctx, h.lead.claim(now))
	if err != nil {
		return err
	}
	h.lead.mu.Lock()
	h.lead.leading, h.lead.epoch, h.lead.lease, h.lead.lastRenewal = true, l.Epoch, l, now
	h.lead.mu.Unlock()
	return nil
}

// leaseLoop claims the lease every leaseRenewInterval (and when a leader
// write was fenced) until ctx ends, and starts or stops the leader's loops
// as reconcile.Leadership decides. It then stops them and releases the
// lease, so that a standby can take over at once.
func (h *Hub) leaseLoop(ctx context.Context) {
	tick := time.NewTicker(leaseRenewInterval)
	defer tick.Stop()
	defer h.releaseLease(ctx)
	for {
		h.leaseStep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-h.lead.fenced:
		}
	}
}

// leaseStep is one claim of the lease and what follows from it.
func (h *Hub) leaseStep(ctx context.Context) {
	now := h.opts.Now()
	// A renewal slower than the interval counts as failed: the decision
	// below must not wait for the store beyond it.
	cctx, cancel := context.WithTimeout(ctx, leaseRenewInterval)
	l, err := h.st.AcquireLease(cctx, h.lead.claim(now))
	cancel()
	var held *store.LeaseHeldError
	claimed := err == nil || errors.As(err, &held)
	if held != nil {
		l = held.Lease
	}
	if ctx.Err() != nil {
		return
	}
	// The claim may have taken up to the interval: decide on the time it
	// answered, while the renewal counts from the time it was asked (the
	// lease's expiry was computed from it).
	asked := now
	now = h.opts.Now()
	if claimed && h.storageDown.Swap(false) {
		// A standby runs no reconciler to probe the storage: the lease
		// claim is its probe.
		h.log.Warn("hub: storage accepts writes again")
	}
	if !claimed {
		h.storeFailed(err)
	}
	lead := h.lead
	lead.mu.Lock()
	in := reconcile.LeaderInput{Self: lead.id, Claimed: claimed, Holder: l.HolderID, Epoch: l.Epoch, Leading: lead.leading,
		LeadingEpoch: lead.epoch, LastRenewal: lead.lastRenewal, Now: now, TTL: lead.ttl, Margin: leaseRenewInterval}
	if claimed {
		lead.lease = l
		if l.HolderID == lead.id {
			lead.lastRenewal = asked
		}
	}
	lead.mu.Unlock()
	switch reconcile.Leadership(in) {
	case reconcile.LeadGain:
		if in.Leading {
			h.stopLeading("a new term")
		}
		h.gainLeadership(ctx, l.Epoch)
	case reconcile.LeadStepDown:
		reason := "lost the lease to " + l.HolderID
		if !claimed {
			reason = "could not renew the lease before it lapses"
		}
		h.stopLeading(reason)
	}
}

// gainLeadership rebuilds the fleet view from the store, then runs the
// leader's loops at epoch. A rebuild that fails leaves the Hub standing by
// and releases the lease, which any Hub (this one included, at the next
// claim and a new epoch) may then take.
func (h *Hub) gainLeadership(ctx context.Context, epoch int64) {
	lctx := store.WithEpoch(ctx, epoch)
	h.lead.flightsMu.Lock()
	if err := h.rebuildFleet(lctx, true); err != nil {
		h.lead.flightsMu.Unlock()
		h.storeFailed(err)
		h.log.Error("hub: could not rebuild the fleet view to lead; standing by", "epoch", epoch, "err", err)
		if rerr := h.st.ReleaseLease(context.WithoutCancel(ctx), h.lead.id, epoch); rerr != nil {
			h.log.Warn("hub: lease release", "err", rerr)
		}
		return
	}
	h.lead.mu.Lock()
	h.lead.leading, h.lead.epoch = true, epoch
	h.lead.mu.Unlock()
	h.lead.flightsMu.Unlock()
	h.log.Info("hub: leading", "hub_id", h.lead.id, "epoch", epoch)
	h.startLeading(ctx)
}

// startLeading runs the leader's loops on ctx, fenced on the epoch this
// Hub leads.
func (h *Hub) startLeading(ctx context.Context) {
	leading, epoch := h.lead.isLeading()
	if !leading {
		return
	}
	h.lead.loopMu.Lock()
	defer h.lead.loopMu.Unlock()
	if h.lead.stop != nil {
		return
	}
	lctx, stop := context.WithCancel(store.WithEpoch(ctx, epoch))
	h.lead.stop = stop
	for _, loop := range []func(context.Context){h.reconcileLoop, h.convergeLoop} {
		h.lead.wg.Add(1)
		go func() { defer h.lead.wg.Done(); loop(lctx) }()
	}
	h.nudge()
}

// stopLeading stops the leader's loops and waits for them, then drops
// what only a leader keeps: the attempts in flight and the command
// queues. reason is logged; "" stops quietly (shutdown).
func (h *Hub) stopLeading(reason string) {
	h.stopLeaderLoops()
	h.lead.mu.Lock()
	was, epoch := h.lead.leading, h.lead.epoch
	h.lead.leading = false
	h.lead.mu.Unlock()
	if !was {
		return
	}
	h.fleet.DropFlights()
	// A standby hands out the attempts of the nodes it holds polls of.
	h.peers.add([]store.Change{{Kind: store.ChangeAll}})
	if reason != "" {
		h.log.Warn("hub: stepped down; standing by", "hub_id", h.lead.id, "epoch", epoch, "reason", reason)
	}
}

// stopLeaderLoops stops the leader's loops and waits for them.
func (h *Hub) stopLeaderLoops() {
	h.lead.loopMu.Lock()
	defer h.lead.loopMu.Unlock()
	if h.lead.stop != nil {
		h.lead.stop()
		h.lead.wg.Wait()
		h.lead.stop = nil
	}
}

// releaseLease stops the leader's loops and gives the lease up, on a
// clean shutdown of a Hub on a shared database.
func (h *Hub) releaseLease(ctx context.Context) {
	leading, epoch := h.lead.isLeading()
	h.stopLeading("")
	if !leading {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := h.st.ReleaseLease(rctx, h.lead.id, epoch); err != nil {
		h.log.Warn("hub: could not release the leader lease; it lapses after its ttl", "err", err)
		return
	}
	h.lead.mu.Lock()
	h.lead.lease = store.Lease{Epoch: epoch}
	h.lead.mu.Unlock()
	h.log.Info("hub: released the leader lease", "epoch", epoch)
}

// leaderFenced notes that a write of the leader's loops was fenced: another
// Hub took the lease over. The lease loop looks at once.
func (h *Hub) leaderFenced() {
	wake(h.lead.fenced)
}
