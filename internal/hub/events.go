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
// the change they describe. The store hands the events of each committed
// transaction to committed, which appends them, in id order, to the
// in-memory eventlog that SSE subscribers read; the pump reads committed
// rows back from the store to fill any gap (after restore, or when the
// sink had to skip). So every event is durable and every event is live.

// committed is the store's event sink: the events of one committed
// transaction, in id order. It runs on the store's writer goroutine.
func (h *Hub) committed(evs []wire.Event) {
	h.pumpMu.Lock()
	defer h.pumpMu.Unlock()
	if h.events == nil {
		return // restore's pump reads them
	}
	last := h.events.LastID()
	for _, e := range evs {
		if e.ID <= last {
			continue // the pump was first
		}
		if e.ID != last+1 {
			// Something committed before is not in the log yet: the pump
			// reads the rows back in order.
			wake(h.pumpc)
			return
		}
		if _, err := h.events.Insert(e); err != nil {
			wake(h.pumpc)
			return
		}
		last = e.ID
	}
}

// wake signals a loop's buffered(1) channel without waiting: wakes coalesce.
func wake(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// pumpLoop copies committed events into the live log until ctx ends, when
// the event sink asks and once a tick, so an event is never held back.
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
// It reads without holding pumpMu, so the store's writer, whose event sink
// takes pumpMu, never waits for a read; events go in in id order, each
// once, because only those after the log's last id are inserted.
func (h *Hub) pump(ctx context.Context) error {
	for {
		h.pumpMu.Lock()
		after := h.events.LastID()
		h.pumpMu.Unlock()
		evs, err := h.st.EventsAfter(ctx, after, store.EventFilter{}, store.MaxEvents)
		if err != nil {
			return err
		}
		h.pumpMu.Lock()
		for _, e := range evs {
			if e.ID <= h.events.LastID() {
				continue // the sink was first
			}
			if _, err := h.events.Insert(e); err != nil && !errors.Is(err, eventlog.ErrOutOfOrder) {
				h.pumpMu.Unlock()
				return err
			}
		}
		h.pumpMu.Unlock()
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
	f.Visible = eventsVisible(ctx)
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
// ("" = every node), or only at the named streams and jobs of the node, as
// the store has them.
func (h *Hub) converge(nodeID string, streamIDs ...string) { h.conv.add(nodeID, streamIDs...) }

// written is a stream's desired state and latest intent as a committed
// write left them, with the number of its transaction: the convergence
// worker evaluates it without reading the store back.
type written struct {
	rs   store.ResourceState // Observed is filled from memory when evaluated
	asOf int64
}

// convergeWritten asks the convergence worker to look at a stream a desired
// write changed, with the state the write carries. A pending request to
// read the stream back wins: it sees this write and whatever followed.
func (h *Hub) convergeWritten(w *written) { h.conv.addWritten(w) }

// convergeLoop recomputes the convergence of the resources of dirty nodes
// and records a convergence_changed event for each one that changed.
func (h *Hub) convergeLoop(ctx context.Context) {
	tick := time.NewTicker(tickInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.conv.wake:
		case <-tick.C:
			// Time alone moves some values (an intent that expired, an error
			// that aged out of its window): look at everything now and then.
			if h.opts.Now().UnixMilli()-h.conv.lastFull.Load() >= 10*tickInterval.Milliseconds() {
				h.converge("")
			}
		}
		dirty, res := h.conv.take()
		if len(dirty) == 0 && len(res) == 0 {
			continue
		}
		if dirty[""] {
			dirty, res = map[string]bool{"": true}, nil
			h.conv.lastFull.Store(h.opts.Now().UnixMilli())
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
			h.conv.retry(dirty, res)
		}
	}
}

// convergeSome evaluates the resources of the given nodes and the given
// streams, and records their convergence events in one write.
func (h *Hub) convergeSome(ctx context.Context, nodes map[string]bool, streams map[[2]string]*written) error {
	// Reads start after this transaction: what they see is at least as new.
	asOf := h.st.Committed()
	var states []sourced
	for id := range nodes {
		got, err := h.st.ResourceStates(ctx, id)
		if err != nil {
			return err
		}
		for _, rs := range got {
			states = append(states, sourced{rs: rs, asOf: asOf})
		}
	}
	for k, w := range streams {
		if w != nil {
			rs := w.rs
			rs.Observed = h.fleet.Observed(k[0], k[1])
			states = append(states, sourced{rs: rs, asOf: w.asOf})
			continue
		}
		// The id may name a stream or a job of the node (or both).
		for _, kind := range []string{store.KindStream, store.KindJob, store.KindConfiguration} {
			rs, err := h.st.GetResourceState(ctx, k[0], kind, k[1])
			switch {
			case errors.Is(err, store.ErrNotFound):
				continue // reported, not desired: nothing to converge
			case err != nil:
				return err
			}
			states = append(states, sourced{rs: rs, asOf: asOf})
		}
	}
	return h.recordConvergence(ctx, states)
}

// sourced is a resource state with the store transaction it is at least as
// new as.
type sourced struct {
	rs   store.ResourceState
	asOf int64
}

// convergeNodes evaluates every resource of the given nodes ("" = all).
func (h *Hub) convergeNodes(ctx context.Context, nodes map[string]bool) error {
	return h.convergeSome(ctx, nodes, nil)
}

// recordConvergence computes the convergence of each resource and records
// a convergence_changed event where the value or the generation it speaks
// of changed since the last look (a write that goes from in_sync to in_sync
// at a new generation is a change too). A state older than the one last
// looked at is passed over.
func (h *Hub) recordConvergence(ctx context.Context, states []sourced) error {
	now := h.opts.Now()
	var evs []wire.Event
	for _, s := range states {
		rs := s.rs
		res := h.convergenceOf(rs, now)
		key := rs.NodeID + "\x00" + rs.Kind + "\x00" + rs.ResourceID
		cur := convSeen{value: res.Value, generation: rs.Generation, asOf: s.asOf}
		prev, known, stale := h.conv.look(key, cur)
		if stale || (known && prev.value == cur.value && prev.generation == cur.generation) || (!known && !h.conv.primed.Load()) {
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
	if len(evs) == 0 {
		return nil
	}
	at := wire.At(h.opts.Now())
	for i := range evs {
		evs[i].OccurredAt = at
	}
	if err := h.st.AppendEvents(ctx, evs); err != nil {
		return err
	}
	return nil
}

// primeConvergence sets the convergence worker's baseline at restore:
// convergence as it stands now, changes from here on being events. Every
// observation is stale now (no node has reported to this process yet), and
// what the previous process last said of a resource may rest on one: that
// resource's baseline is its convergence with its node reporting, so going
// stale is recorded as a convergence_changed event, and so is coming back
// with the node's first report. Only a leader records (record): a standby
// keeps the baseline alone, and the leader records the events.
func (h *Hub) primeConvergence(ctx context.Context, record bool) error {
	asOf := h.st.Committed() // the read below is at least as new
	states, err := h.st.ResourceStates(ctx, "")
	if err != nil {
		return err
	}
	now := h.opts.Now()
	var stale []sourced
	for _, rs := range states {
		in := h.convergenceInput(rs, now)
		res := reconcile.Convergence(in)
		if res.Reason == reconcile.ReasonStale {
			in.Node.Status, in.Node.Fresh = reconcile.StatusOnline, true
			res = reconcile.Convergence(in)
			stale = append(stale, sourced{rs: rs, asOf: asOf})
		}
		h.conv.baseline(rs.NodeID+"\x00"+rs.Kind+"\x00"+rs.ResourceID, convSeen{value: res.Value, generation: rs.Generation, asOf: asOf})
	}
	h.conv.primed.Store(true)
	if !record {
		return nil
	}
	return h.recordConvergence(ctx, stale)
}

// convSeen is what the convergence worker last saw of a resource.
type convSeen struct {
	value      string
	generation int64
	asOf       int64 // the store transaction the state looked at is at least as new as
}
