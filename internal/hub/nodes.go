package hub

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/flowplane/flowplane/internal/access"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/fleet"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// CodeNodeNotFound answers a route naming a node the Hub never registered.
const CodeNodeNotFound = "node_not_found"

// NodeView is one node of GET /nodes (its type is the wire's, which
// clients share).
type NodeView = wire.NodeView

// nodeView is the view of a registered node.
func nodeView(n fleet.Node) NodeView {
	v := NodeView{NodeID: n.NodeID, Status: n.Status, Mode: n.Mode, Version: n.Version,
		ProtocolVersion: n.ProtocolVersion, BootID: n.BootID, Capabilities: n.Capabilities,
		DataAddress: n.DataAddress, DataFingerprint: n.DataFingerprint, RegisteredAt: wire.At(n.RegisteredAt),
		LeaseTTLMS: n.LeaseTTL.Milliseconds(), SessionExpiresAt: wire.At(n.SessionExpiresAt),
		LastReportAt: wire.At(n.ReportedAt), ReportSeq: n.ReportSeq, Restarts: n.Restarts, Streams: len(n.Observed),
		QueuedCommands: n.Queued, InFlight: n.Active, Metrics: n.Metrics}
	v.ConfigVersion, v.ConfigSource, v.NodeConfigVersion = runningConfig(n)
	if n.Online {
		v.LeaseExpiresAt = wire.At(n.LeaseUntil)
	}
	if v.Capabilities == nil {
		v.Capabilities = []string{}
	}
	return v
}

// runningConfig is the configuration node n runs, as NodeView shows it:
// the Hub's version when the node's latest configuration report names the
// Hub apply it runs and is about the version it reports running, else the
// node's own id; and the node's own id.
func runningConfig(n fleet.Node) (version, source, nodeVersion string) {
	if n.ConfigVersion == "" {
		return "", "", ""
	}
	if c := n.Configuration; c != nil && c.HubVersion != "" && c.NodeVersion == n.ConfigVersion {
		return c.HubVersion, wire.ConfigSourceHub, n.ConfigVersion
	}
	return n.ConfigVersion, wire.ConfigSourceNode, n.ConfigVersion
}

// nodeViews lists registered nodes and, as unknown, the nodes that only
// have desired state, by id. A view's streams count agrees with the
// node's GET /streams list (a node only desired lists its desired ones).
func (h *Hub) nodeViews(ctx context.Context) ([]NodeView, error) {
	states, err := h.st.ResourceStates(ctx, "")
	if err != nil {
		return nil, err
	}
	// streams counts a node's streams as GET /streams lists them: those
	// it reports and those only desired, once each.
	desired := map[string][]store.ResourceState{}
	for _, rs := range states {
		if rs.Kind == store.KindStream {
			desired[rs.NodeID] = append(desired[rs.NodeID], rs)
		}
	}
	nodes := h.fleet.Nodes()
	out := make([]NodeView, 0, len(nodes))
	for _, n := range nodes {
		if n.RegisteredAt.IsZero() {
			continue
		}
		v := nodeView(n)
		v.Streams = streamSegment{desired: desired[n.NodeID], node: &n}.count()
		out = append(out, v)
	}
	known := map[string]bool{}
	for _, v := range out {
		known[v.NodeID] = true
	}
	for _, rs := range states {
		if !known[rs.NodeID] {
			known[rs.NodeID] = true
			out = append(out, NodeView{NodeID: rs.NodeID, Status: "unknown", Mode: wire.NodeModeActive, Capabilities: []string{},
				Streams: len(desired[rs.NodeID])})
		}
	}
	slices.SortFunc(out, func(a, b NodeView) int { return cmpString(a.NodeID, b.NodeID) })
	return out, nil
}

func (h *Hub) getNodes(w http.ResponseWriter, r *http.Request) error {
	page, size, err := httpapi.ParsePage(r)
	if err != nil {
		return err
	}
	all, err := h.nodeViews(r.Context())
	if err != nil {
		return problemFor(err, anyResource)
	}
	q := r.URL.Query()
	if st := q.Get("status"); st != "" {
		all = slices.DeleteFunc(all, func(v NodeView) bool { return v.Status != st })
	}
	if m := q.Get("mode"); m != "" {
		all = slices.DeleteFunc(all, func(v NodeView) bool { return v.Mode != m })
	}
	if ctx := r.Context(); scoped(ctx) {
		all = slices.DeleteFunc(all, func(v NodeView) bool { return !mayRead(ctx, access.Resource{Node: v.NodeID}) })
	}
	return httpapi.WriteJSON(w, http.StatusOK, httpapi.Paginate(all, page, size))
}

func (h *Hub) getNode(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("node_id")
	all, err := h.nodeViews(r.Context())
	if err != nil {
		return problemFor(err, anyResource)
	}
	for _, v := range all {
		if v.NodeID == id {
			return httpapi.WriteJSON(w, http.StatusOK, v)
		}
	}
	return httpapi.NotFound(CodeNodeNotFound, "no node with that id is registered or has desired state")
}

// nodeMode handles drain, maintenance entry and maintenance exit: the mode
// changes with an audit row and a node_maintenance_changed event; desired
// state and attempts in flight are untouched; new dispatch to the node is
// suppressed until it is active again.
func (h *Hub) nodeMode(mode string) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		ctx := r.Context()
		id := r.PathValue("node_id")
		if _, err := httpapi.DecodeOptionalJSON(r, &struct{}{}, MaxBodyBytes); err != nil {
			return err
		}
		by := actorOf(ctx)
		err := h.st.SetNodeMode(ctx, store.ModeChange{NodeID: id, Mode: mode, Actor: by.id, ActorKind: by.kind,
			CorrelationID: httpapi.CorrelationID(ctx), Now: h.opts.Now()})
		if err != nil {
			return h.storeFailedAbout(err, aNode)
		}
		v := nodeView(h.fleet.SetMode(id, mode))
		h.converge(id)
		h.nudge()
		return httpapi.WriteJSON(w, http.StatusOK, v)
	}
}

// auditAction names the audit action of a request. The route table names
// it once: audited records a rejected request under it, and the intent
// pipeline (actionOf) writes an accepted one under it, so /audit?action=
// finds both outcomes. It is read after the handler ran, which may record
// in a path value what only the body says (a job's desired state, a
// rollout's action).
type auditAction func(r *http.Request) string

func fixedAction(name string) auditAction { return func(*http.Request) string { return name } }

// auditKey is the context key of a request's auditAction.
type auditKey struct{}

// withAction returns r carrying its route's audit action.
func withAction(r *http.Request, name auditAction) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), auditKey{}, name))
}

// actionOf is the audit action of r's route, "" for a route that is not
// audited.
func actionOf(r *http.Request) string {
	if name, ok := r.Context().Value(auditKey{}).(auditAction); ok {
		return name(r)
	}
	return ""
}

// modeAction is the action of a node mode change (store.SetNodeMode's).
func modeAction(mode string) auditAction { return fixedAction(store.ModeAction(mode)) }

// audited records a rejected mutation (4xx but 405) in the audit log with
// the principal and the problem's code; accepted ones are audited by the
// store in their own transaction. The record names the stream of {id},
// the node of {node_id}, or the resource of the intent a cancel names.
func (h *Hub) audited(name auditAction, next httpapi.HandlerFunc) httpapi.HandlerFunc {
	return h.auditedAs("", name, next)
}

// auditedAs is audited for routes whose {id} names a resource of resType
// (jobs, rollouts): a rejected request is recorded against it.
func (h *Hub) auditedAs(resType string, name auditAction, next httpapi.HandlerFunc) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		r = withAction(r, name)
		var err error
		if d := deniedOf(r); d != nil {
			// authorize refused it: record the refusal, run nothing.
			d.audited, err = true, d.err
		} else {
			err = next(w, r)
		}
		e := rejection(err)
		if e == nil {
			return err
		}
		action := name(r)
		ctx := r.Context()
		resType, resID := resType, r.PathValue("id")
		if resType == "" {
			resType, resID = h.auditTarget(r, action)
		}
		by := actorOf(ctx)
		rec := store.AuditRecord{OccurredAt: wire.At(h.opts.Now()), Actor: by.id, ActorKind: by.kind, Action: action,
			ResourceType: resType, ResourceID: truncate(resID, maxIDLen), NodeID: truncate(r.PathValue("node_id"), maxIDLen),
			CorrelationID: httpapi.CorrelationID(ctx), Outcome: store.OutcomeRejected, FailureCode: e.Code}
		if _, aerr := h.st.AppendAudit(context.WithoutCancel(ctx), rec); aerr != nil {
			h.storeFailed(aerr)
		}
		return err
	}
}

// auditTarget is the resource a rejected request of a node or stream
// route is recorded against.
func (h *Hub) auditTarget(r *http.Request, action string) (resType, resID string) {
	resType, resID = "stream", r.PathValue("id")
	switch {
	case r.PathValue("node_id") != "" && resID == "":
		resType, resID = "node", r.PathValue("node_id")
	case action == store.ActionCancel:
		// Audit the cancel against the intent's resource, as accepted ones are.
		resType = "operation"
		if in, ierr := h.st.GetIntent(r.Context(), resID); ierr == nil {
			resType, resID = in.Kind, in.ResourceID
			r.SetPathValue("node_id", in.NodeID)
		}
	}
	return resType, resID
}

// rejection is the client error (4xx but 405) a handler answered, which
// the audit records as rejected; nil for anything else.
func rejection(err error) *httpapi.Error {
	var e *httpapi.Error
	if err == nil || !errors.As(err, &e) || e.Status < 400 || e.Status >= 500 || e.Status == http.StatusMethodNotAllowed {
		return nil
	}
	return e
}

// streamChanges records a stream_state_changed event for every stream whose
// observed state differs from the previous report, as far as the node's
// event budget goes.
func (h *Hub) streamChanges(nodeID string, prev, cur []store.ObservedStream, now time.Time) {
	was := map[string]string{}
	for _, o := range prev {
		was[o.StreamID] = o.State
	}
	var evs []wire.Event
	for _, o := range cur {
		if p, ok := was[o.StreamID]; ok && p == o.State {
			continue
		}
		evs = append(evs, wire.Event{Kind: wire.EventStreamStateChanged, OccurredAt: wire.At(now), NodeID: nodeID, ResourceID: o.StreamID,
			Message: "stream " + o.State, Data: map[string]any{"state": o.State, "generation": o.Generation}})
	}
	if len(evs) == 0 {
		return
	}
	if err := h.st.AppendEvents(context.Background(), h.budgetEvents(nodeID, evs, now)); err != nil {
		h.storeFailed(err)
	}
}
