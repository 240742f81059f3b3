package hub

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/flowplane/flowplane/internal/eventlog"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// The Hub's events are written to the store first, in the transaction of
// the change they describe; the pump then feeds the committed rows, in id
// order, into the in-memory eventlog that SSE subscribers read. So every
// event is durable and every event is live.

// wrote tells the pump that events may have been committed.
func (h *Hub) wrote() { wake(h.pumpc) }

// wake signals a loop's buffered(1) channel without waiting: wakes coalesce.
func wake(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// pumpLoop copies committed events into the live log until ctx ends. It
// also runs once a tick, so an event is never held back by a missed wake.
func (h *Hub) pumpLoop(ctx context.Context) {
	tick := time.NewTicker(tickInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.pumpc:
		case <-tick.C:
		}
		if err := h.pump(ctx); err != nil && ctx.Err() == nil {
			h.log.Warn("hub: event pump", "err", err)
		}
	}
}

// pump moves every committed event after the live log's last id into it.
// Calls are serialized, so events go in in id order, each once.
func (h *Hub) pump(ctx context.Context) error {
	h.pumpMu.Lock()
	defer h.pumpMu.Unlock()
	for {
		evs, err := h.st.EventsAfter(ctx, h.events.LastID(), store.EventFilter{}, store.MaxEvents)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if _, err := h.events.Insert(e); err != nil && !errors.Is(err, eventlog.ErrOutOfOrder) {
				return err
			}
		}
		if len(evs) < store.MaxEvents {
			return nil
		}
	}
}

func (h *Hub) getEventStream(w http.ResponseWriter, r *http.Request) error {
	f, err := eventlog.FilterFromQuery(r.URL.Query())
	if err != nil {
		return httpapi.BadRequest(httpapi.CodeInvalidQuery, err.Error())
	}
	// The stream ends when the Hub stops serving, so shutdown does not wait
	// for subscribers to go away.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-h.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	err = eventlog.ServeSSE(w, r.WithContext(ctx), h.events, f, h.keepAlive)
	switch {
	case errors.Is(err, eventlog.ErrInvalidHeader):
		return httpapi.BadRequest(httpapi.CodeInvalidHeader, err.Error())
	case errors.Is(err, eventlog.ErrInvalidQuery):
		return httpapi.BadRequest(httpapi.CodeInvalidQuery, err.Error())
	}
	return err
}

// converge asks the convergence worker to look at a node's resources again
// ("" = every node), or only at the named streams of the node.
func (h *Hub) converge(nodeID string, streamIDs ...string) {
	h.dirtyMu.Lock()
	if len(streamIDs) == 0 {
		h.dirty[nodeID] = true
	}
	for _, id := range streamIDs {
		h.dirtyRes[[2]string{nodeID, id}] = true
	}
	h.dirtyMu.Unlock()
	wake(h.convc)
}

// convergeLoop recomputes the convergence of the resources of dirty nodes
// and records a convergence_changed event for each one that changed.
func (h *Hub) convergeLoop(ctx context.Context) {
	tick := time.NewTicker(tickInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.convc:
		case <-tick.C:
			// Time alone moves some values (an intent that expired, an error
			// that aged out of its window): look at everything now and then.
			if h.opts.Now().UnixMilli()-h.lastFullConverge.Load() >= 10*tickInterval.Milliseconds() {
				h.converge("")
			}
		}
		h.dirtyMu.Lock()
		dirty, res := h.dirty, h.dirtyRes
		h.dirty, h.dirtyRes = map[string]bool{}, map[[2]string]bool{}
		h.dirtyMu.Unlock()
		if len(dirty) == 0 && len(res) == 0 {
			continue
		}
		if dirty[""] {
			dirty, res = map[string]bool{"": true}, nil
			h.lastFullConverge.Store(h.opts.Now().UnixMilli())
		}
		for k := range res {
			if dirty[k[0]] {
				delete(res, k) // its node is looked at whole
			}
		}
		if err := h.convergeSome(ctx, dirty, res); err != nil && ctx.Err() == nil {
			h.storeFailed(err)
			h.log.Warn("hub: convergence", "err", err)
			// Try again at the next wake.
			h.dirtyMu.Lock()
			for id := range dirty {
				h.dirty[id] = true
			}
			for k := range res {
				h.dirtyRes[k] = true
			}
			h.dirtyMu.Unlock()
		}
	}
}

// convergeSome evaluates the resources of the given nodes and the given
// streams, and records their convergence events in one write.
func (h *Hub) convergeSome(ctx context.Context, nodes map[string]bool, streams map[[2]string]bool) error {
	var states []store.ResourceState
	for id := range nodes {
		got, err := h.st.ResourceStates(ctx, id)
		if err != nil {
			return err
		}
		states = append(states, got...)
	}
	for k := range streams {
		rs, err := h.st.GetResourceState(ctx, k[0], store.KindStream, k[1])
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue // reported, not desired: nothing to converge
		case err != nil:
			return err
		}
		states = append(states, rs)
	}
	return h.recordConvergence(ctx, states)
}

// convergeNodes evaluates every resource of the given nodes ("" = all).
func (h *Hub) convergeNodes(ctx context.Context, nodes map[string]bool) error {
	return h.convergeSome(ctx, nodes, nil)
}

// recordConvergence computes the convergence of each resource and records
// a convergence_changed event where the value or the generation it speaks
// of changed since the last look (a write that goes from in_sync to in_sync
// at a new generation is a change too).
func (h *Hub) recordConvergence(ctx context.Context, states []store.ResourceState) error {
	now := h.opts.Now()
	var evs []wire.Event
	for _, rs := range states {
		res := h.convergenceOf(rs, now)
		key := rs.NodeID + "\x00" + rs.Kind + "\x00" + rs.ResourceID
		cur := convSeen{value: res.Value, generation: rs.Generation}
		h.convMu.Lock()
		prev, known := h.conv[key]
		h.conv[key] = cur
		h.convMu.Unlock()
		if (known && prev == cur) || (!known && !h.convPrimed.Load()) {
			continue
		}
		e := wire.Event{Kind: wire.EventConvergenceChanged, NodeID: rs.NodeID, ResourceID: rs.ResourceID,
			Message: "convergence " + res.Value, Data: map[string]any{"convergence": res.Value, "reason": res.Reason,
				"generation": rs.Generation, "resource_type": rs.Kind}}
		if known {
			e.Data["previous"] = prev.value
		}
		if rs.Latest != nil && rs.Latest.Generation == rs.Generation {
			e.OperationID, e.CorrelationID = rs.Latest.ID, rs.Latest.CorrelationID
		}
		evs = append(evs, e)
	}
	at := wire.At(h.opts.Now())
	for i := range evs {
		evs[i].OccurredAt = at
	}
	if err := h.st.AppendEvents(ctx, evs); err != nil {
		return err
	}
	h.wrote()
	return nil
}

// primeConvergence sets the convergence worker's baseline at restore:
// convergence as it stands now, changes from here on being events. Every
// observation is stale now (no node has reported to this process yet), and
// what the previous process last said of a resource may rest on one: that
// resource's baseline is its convergence with its node reporting, so going
// stale is recorded as a convergence_changed event, and so is coming back
// with the node's first report.
func (h *Hub) primeConvergence(ctx context.Context) error {
	states, err := h.st.ResourceStates(ctx, "")
	if err != nil {
		return err
	}
	now := h.opts.Now()
	var stale []store.ResourceState
	h.convMu.Lock()
	for _, rs := range states {
		in := h.convergenceInput(rs, now)
		res := reconcile.Convergence(in)
		if res.Reason == reconcile.ReasonStale {
			in.Node.Status, in.Node.Fresh = reconcile.StatusOnline, true
			res = reconcile.Convergence(in)
			stale = append(stale, rs)
		}
		h.conv[rs.NodeID+"\x00"+rs.Kind+"\x00"+rs.ResourceID] = convSeen{value: res.Value, generation: rs.Generation}
	}
	h.convMu.Unlock()
	h.convPrimed.Store(true)
	return h.recordConvergence(ctx, stale)
}

// convSeen is what the convergence worker last saw of a resource.
type convSeen struct {
	value      string
	generation int64
}
