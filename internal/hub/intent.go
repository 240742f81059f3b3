package hub

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// intentWrite is one operator write through the intent pipeline (accept),
// as a route fills it in: streams, jobs, node configurations and one-shot
// commands differ only in these fields.
type intentWrite struct {
	// about names the resource, for the problem of a refused write.
	about subject
	// conditional routes honour If-Match; a generation conflict names
	// conflict in its details.
	conditional bool
	conflict    map[string]any
	// commit runs the one store transaction (intent, outbox row, audit
	// row, event) with what the pipeline stamps on every write.
	commit func(ctx context.Context, m intentMeta) (committed, error)
}

// intentMeta is what the pipeline gives every write: the store never
// makes ids or reads the clock, and the audit action is the route's, so
// that an accepted and a rejected request of a route carry the same one.
type intentMeta struct {
	id                    string
	ifMatch               *int64 // nil: no If-Match, or *
	action, correlationID string
	by                    actor
	now, expiresAt        time.Time
}

// committed is a committed write as the pipeline answers it.
type committed struct {
	operationID string
	// nodes are marked for dispatch; the answer's node status is of the
	// first.
	nodes []string
	etag  string // "": the answer carries no ETag
	// converge, when set, schedules the written resources' convergence.
	converge func()
	body     func(nodeStatus string) any
}

// accept is the intent pipeline: If-Match, ids and time, the store write,
// the conflict and refusal mapping, the fleet mark, the reconciler's
// nudge, then 202 with the operation's Location (and the new
// generation's ETag). Nothing else happens on the request path.
func (h *Hub) accept(w http.ResponseWriter, r *http.Request, iw intentWrite) error {
	ctx := r.Context()
	var m intentMeta
	if iw.conditional {
		gen, matchAny, present, err := httpapi.ParseIfMatch(r.Header.Get("If-Match"))
		if err != nil {
			return err
		}
		if present && !matchAny {
			m.ifMatch = &gen
		}
	}
	m.id, m.now = h.opts.NewID(), h.opts.Now()
	m.expiresAt = m.now.Add(h.opts.Settings.IntentTTL)
	m.action, m.by, m.correlationID = actionOf(r), actorOf(ctx), httpapi.CorrelationID(ctx)
	c, err := iw.commit(ctx, m)
	var gc *store.GenerationConflictError
	switch {
	case errors.As(err, &gc):
		return httpapi.GenerationConflict(gc.Expected, gc.Current, iw.conflict)
	case err != nil:
		return h.storeFailedAbout(err, iw.about)
	}
	status := h.accepted(c.nodes...)
	if c.converge != nil {
		c.converge()
	}
	w.Header().Set("Location", h.prefix+"/operations/"+c.operationID)
	if c.etag != "" {
		w.Header().Set("ETag", c.etag)
	}
	return httpapi.WriteJSON(w, http.StatusAccepted, c.body(status))
}

// accepted counts a committed write, marks its nodes for dispatch and
// nudges the reconciler; it returns the status of the first node.
func (h *Hub) accepted(nodeIDs ...string) string {
	h.metrics.accepted.Inc()
	status := h.markWritten(nodeIDs...)
	h.nudge()
	return status
}

// markWritten marks nodes for dispatch after a committed write and
// returns the status of the first.
func (h *Hub) markWritten(nodeIDs ...string) string {
	h.fleet.Mark(nodeIDs...)
	if len(nodeIDs) == 0 {
		return reconcile.StatusUnknown
	}
	return h.fleet.Status(nodeIDs[0])
}

// nodeWarnings warns that an intent waits for a node no one registered.
func nodeWarnings(status string) []wire.Warning {
	if status != reconcile.StatusUnknown {
		return nil
	}
	return []wire.Warning{{Code: wire.WarningNodeUnknown,
		Message: "no node with this id has registered with the Hub; the intent waits for it until it expires"}}
}
