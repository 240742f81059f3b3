package hub

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/flowplane/flowplane/internal/hub/fleet"
	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// Reconciler cadence (spec "Limits").
const (
	tickInterval  = time.Second
	sweepInterval = 60 * time.Second
	// dispatchBatch bounds the outbox rows one pass reads.
	dispatchBatch = 4096
)

// nudge asks the reconciler for a pass now (coalesced).
func (h *Hub) nudge() { wake(h.nudgec) }

// reconcileLoop runs a pass every tick and after every nudge until ctx
// ends. It is the only goroutine that dispatches, expires attempts, marks
// leases lapsed and sweeps.
func (h *Hub) reconcileLoop(ctx context.Context) {
	tick := time.NewTicker(tickInterval)
	defer tick.Stop()
	lastSweep := h.opts.Now()
	lastGC := lastSweep
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-h.nudgec:
		}
		now := h.opts.Now()
		if !h.lead.mayAct(now) {
			// The lease may lapse before the lease loop hears back: act no
			// more until it renewed it, or stepped down.
			wake(h.lead.fenced)
			continue
		}
		h.pass(ctx, now)
		if now.Sub(lastSweep) >= sweepInterval {
			lastSweep = now
			h.sweep(ctx, now)
		}
		if after := h.opts.Settings.nodeGCAfter(); after > 0 && now.Sub(lastGC) >= min(sweepInterval, max(after/4, tickInterval)) {
			lastGC = now
			h.collectNodes(ctx, now, after)
		}
	}
}

// collectNodes forgets, as DELETE /nodes/{node_id} would (actor hub), the
// registered nodes unavailable longer than after that hold no state
// (reconcile.NodesToForget).
func (h *Hub) collectNodes(ctx context.Context, now time.Time, after time.Duration) {
	holding, err := h.st.NodesHoldingState(ctx)
	if err != nil {
		h.storeFailed(err)
		return
	}
	var nodes []reconcile.GCNode
	for _, n := range h.fleet.Nodes() {
		if n.RegisteredAt.IsZero() {
			continue
		}
		nodes = append(nodes, reconcile.GCNode{NodeID: n.NodeID, Online: n.Online, LastSeen: n.LeaseUntil,
			HoldsState: holding[n.NodeID] || n.Queued > 0 || n.Active > 0})
	}
	for _, id := range reconcile.NodesToForget(nodes, now, h.startedAt, after) {
		if n, ok := h.fleet.Node(id); !ok || n.Online {
			continue // it came back meanwhile
		}
		err := h.forget(ctx, store.Forget{NodeID: id, Actor: hubActor.id, ActorKind: hubActor.kind, Now: now,
			Reason: "node unavailable longer than " + EnvNodeGCAfter + " (" + shortDuration(after) + ") and holding no desired state"})
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			h.storeFailed(err)
			return
		default:
			h.log.Info("hub: node forgotten by the node GC", "node_id", id, "after", after)
		}
	}
}

// pass is one reconciliation at now.
func (h *Hub) pass(ctx context.Context, now time.Time) {
	start := time.Now()
	defer func() { h.metrics.reconcileSeconds.Observe(time.Since(start).Seconds()) }()
	h.lastPass.Store(now.UnixMilli())
	if h.storageDown.Load() {
		if err := h.st.Probe(ctx, now); err != nil {
			return
		}
		h.storageDown.Store(false)
		h.log.Warn("hub: storage accepts writes again")
	}
	h.expireLeases(ctx, now)
	h.expireAttempts(ctx, now)
	h.driveRollouts(ctx, now)
	h.dispatch(ctx, now)
}

// expireLeases marks nodes whose lease lapsed unavailable.
func (h *Hub) expireLeases(ctx context.Context, now time.Time) {
	if h.st.Shared() {
		// The node may have renewed its lease on another Hub: its stored
		// lease says so.
		for _, id := range h.fleet.Lapsed(now) {
			if err := h.syncNode(ctx, id, now); err != nil {
				h.storeFailed(err)
				return
			}
		}
	}
	gone := h.fleet.ExpireLeases(now)
	if len(gone) == 0 {
		return
	}
	evs := make([]wire.Event, len(gone))
	for i, id := range gone {
		evs[i] = wire.Event{Kind: wire.EventNodeUnavailable, OccurredAt: wire.At(now), NodeID: id, Message: "lease expired"}
	}
	if err := h.st.AppendEvents(ctx, evs); err != nil {
		h.storeFailed(err)
	}
	for _, id := range gone {
		h.converge(id)
	}
}

// nodeOnline records that a node came back (register or heartbeat). Only
// the leader records it, and acts on it: a standby's view follows the
// store, and the leader learns of the lease from it (peers.go).
func (h *Hub) nodeOnline(id string, now time.Time) {
	if leading, _ := h.lead.isLeading(); !leading {
		return
	}
	ev := wire.Event{Kind: wire.EventNodeOnline, OccurredAt: wire.At(now), NodeID: id, Message: "lease renewed"}
	if err := h.st.AppendEvents(context.Background(), []wire.Event{ev}); err != nil {
		h.storeFailed(err)
	}
	h.fleet.Mark(id)
	h.converge(id)
	h.nudge()
}

// expireAttempts turns attempts in flight past their expiry into timed_out;
// the store puts their intents back in the outbox until the intents expire.
func (h *Hub) expireAttempts(ctx context.Context, now time.Time) {
	for _, x := range reconcile.ExpireAttempts(h.fleet.Attempts(), now) {
		err := h.st.FinishAttempt(ctx, store.AttemptFinish{AttemptID: x.AttemptID, State: wire.OpTimedOut,
			Failure: &wire.Failure{Class: "timeout", Code: wire.OpTimedOut, Message: "no result before the attempt expired"}, Now: now})
		if err != nil && !errors.Is(err, store.ErrAttemptFinished) && !errors.Is(err, store.ErrNotFound) {
			h.storeFailed(err)
			return
		}
		res := h.attemptMoved(x.AttemptID, wire.OpTimedOut, now)
		h.fleet.Mark(x.NodeID)
		h.converge(x.NodeID, res)
	}
}

// dispatch turns ready outbox rows into attempts and queued commands, in one
// store transaction, and fails the rows PlanDispatch gives up on.
func (h *Hub) dispatch(ctx context.Context, now time.Time) {
	// Only nodes that can take a command now are read; rows of the others
	// wait in the outbox, and the expiry scan finds those that expire.
	marked := h.fleet.Pending()
	if len(marked.Nodes) == 0 && !h.expiryDue(now) {
		return
	}
	rows, err := h.st.OutboxFor(ctx, marked.Nodes, now, dispatchBatch)
	if err != nil {
		h.storeFailed(err)
		return
	}
	// Nodes with no row left need no look until something is written for them.
	seen := map[string]bool{}
	for _, e := range rows {
		seen[e.NodeID] = true
	}
	if len(rows) < dispatchBatch {
		h.fleet.Settle(marked, seen)
	}
	in := reconcile.DispatchInput{Nodes: map[string]reconcile.Node{}, Limits: h.limits, Now: now}
	for _, e := range rows {
		in.Rows = append(in.Rows, reconcile.OutboxRow{IntentID: e.IntentID, NodeID: e.NodeID, CreatedAt: e.CreatedAt,
			ExpiresAt: e.ExpiresAt, Attempts: e.Attempts, LastFinishedAt: e.LastFinishedAt,
			RequiredCapabilities: commandCapabilities(e.Kind)})
		if _, ok := in.Nodes[e.NodeID]; !ok {
			in.Nodes[e.NodeID] = h.fleet.ReconcileNode(e.NodeID)
		}
	}
	if len(rows) == 0 {
		return
	}
	plan := reconcile.PlanDispatch(in)
	var kinds, ops, jobIDs []string
	for i, d := range plan.Decisions {
		if d.Action == reconcile.ActionDispatch {
			kinds, ops, jobIDs = append(kinds, rows[i].Kind), append(ops, rows[i].Operation), append(jobIDs, rows[i].ResourceID)
		}
	}
	splits, err := h.splitsOf(ctx, kinds, ops, jobIDs)
	if err != nil {
		h.storeFailed(err)
		return
	}
	var starts []store.AttemptStart
	var cmds []fleet.Flight
	for i, d := range plan.Decisions {
		e := rows[i]
		var cmd wire.Command
		var msg string
		if d.Action == reconcile.ActionDispatch {
			cmd = commandOf(e, splitFor(splits, e.ResourceID), newUUIDv7(), d.AttemptExpiresAt)
			cmd.Epoch, _ = store.EpochFrom(ctx)
			// A configuration command gets its text and secrets now; one
			// the Hub cannot complete fails before anything is sent.
			if configKind(e.Kind) {
				if f := h.configCommand(ctx, &cmd); f != nil {
					d.Action, d.Code, msg = reconcile.ActionFail, f.Code, f.Message
				}
			}
		}
		switch d.Action {
		case reconcile.ActionDispatch:
			starts = append(starts, store.AttemptStart{IntentID: e.IntentID, AttemptID: cmd.AttemptID, NodeID: e.NodeID, Now: now, ExpiresAt: d.AttemptExpiresAt})
			cmds = append(cmds, fleet.Flight{Command: cmd, State: wire.OpDispatched, DispatchedAt: now, ExpiresAt: d.AttemptExpiresAt})
		case reconcile.ActionFail:
			if msg == "" {
				msg = failMessage(d.Code)
			}
			err := h.st.FailIntent(ctx, e.IntentID, d.Code, msg, now)
			if err != nil && !errors.Is(err, store.ErrNotPending) {
				h.storeFailed(err)
				return
			}
			if err == nil {
				if in, ierr := h.st.GetIntent(ctx, e.IntentID); ierr == nil {
					h.jobCommandDone(ctx, in, wire.ResultFailed, nil, nil, now)
				}
				h.metrics.command(commandLabel(commandOf(e, nil, "", time.Time{})), failOutcome(d.Code))
				h.converge(e.NodeID, e.ResourceID)
			}
		case reconcile.ActionWait:
			if d.Code == reconcile.CodeCapacity {
				h.capacityWait(e)
			}
		}
	}
	if len(starts) > 0 {
		skipped, err := h.st.StartAttempts(ctx, starts)
		if err != nil {
			h.storeFailed(err)
			return
		}
		var started []fleet.Flight
		for i, fl := range cmds {
			if !slices.Contains(skipped, i) {
				started = append(started, fl)
			}
		}
		h.fleet.Enqueue(started...)
		for _, fl := range started {
			h.metrics.command(commandLabel(fl.Command), outcomeEnqueued)
			h.converge(fl.Command.NodeID, fl.Command.ResourceID)
		}
	}
}

// expiryDue reports whether intents waiting for offline nodes may have
// expired by now: checked once a tick.
func (h *Hub) expiryDue(now time.Time) bool {
	last := h.lastExpiryScan.Load()
	if now.UnixMilli()-last < tickInterval.Milliseconds() {
		return false
	}
	h.lastExpiryScan.Store(now.UnixMilli())
	return true
}

// capacityWait counts an intent waiting for room in its node's queue, once.
func (h *Hub) capacityWait(e store.OutboxEntry) {
	if h.fleet.WaitForCapacity(e.NodeID, e.IntentID) {
		h.metrics.command(commandLabel(commandOf(e, nil, "", time.Time{})), outcomeCapacity)
	}
}

func failMessage(code string) string {
	switch code {
	case reconcile.CodeNodeUnavailable:
		return "the node stayed unavailable until the intent expired"
	case reconcile.CodeExpired:
		return "the intent expired before it could be executed"
	case reconcile.CodeIncompatibleCapability:
		return "the node does not advertise a capability the command needs"
	}
	return code
}

// attemptMoved updates the fleet and the command metrics after an attempt
// reached state (acknowledged, or an outcome). It returns the attempt's
// stream, when the attempt was in flight.
func (h *Hub) attemptMoved(attemptID, state string, now time.Time) string {
	move := h.fleet.Finish
	if state == wire.OpAcknowledged {
		move = h.fleet.Acknowledge
	}
	fl, ok := move(attemptID)
	if !ok {
		return ""
	}
	label := commandLabel(fl.Command)
	h.metrics.command(label, state)
	if state == wire.OpAcknowledged {
		h.metrics.duration.WithLabelValues(label).Observe(now.Sub(fl.DispatchedAt).Seconds())
	}
	return fl.Command.ResourceID
}

// sweep applies the retention limits.
func (h *Hub) sweep(ctx context.Context, now time.Time) {
	n, err := h.st.Sweep(ctx, now)
	if err != nil {
		h.storeFailed(err)
		return
	}
	if n != (store.Swept{}) {
		h.log.Debug("hub: retention sweep", "intents", n.Intents, "outbox", n.Outbox, "attempts", n.Attempts,
			"events", n.Events, "audit", n.Audit, "idempotency", n.Idempotency)
	}
	// Sessions past their expiry leave the cache.
	h.fleet.ExpireSessions(now)
}
