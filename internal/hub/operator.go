package hub

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/flowplane/flowplane/internal/access"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/eventlog"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/openapi"
	"github.com/flowplane/flowplane/internal/wire"
)

// Hub-specific problem codes (API.md).
const (
	CodeRecovering              = "recovering"
	CodeStorageUnavailable      = "storage_unavailable"
	CodeStreamNotFound          = "stream_not_found"
	CodeOperationNotFound       = "operation_not_found"
	CodeOperationNotCancellable = "operation_not_cancellable"
)

// maxIDLen bounds node, stream and config version identifiers.
const maxIDLen = 255

func (h *Hub) routes() []httpapi.Route {
	p := h.prefix
	var (
		opFilters = []httpapi.Param{{Name: "node_id"}, {Name: "resource_id"}, {Name: "operation"}, {Name: "state"}, {Name: "correlation_id"}}
		nodeMode  = func(summary string) httpapi.Doc {
			return httpapi.Doc{Summary: summary, Tag: tagNodes, Request: struct{}{}, RequestOptional: true, Response: NodeView{},
				Problems: []int{http.StatusNotFound}}
		}
	)
	routes := []httpapi.Route{
		{Method: "GET", Pattern: p + "/system", Handler: h.getSystem, Doc: httpapi.Doc{Summary: "The Hub's descriptor", Tag: tagSystem, Response: System{}}},
		{Method: "GET", Pattern: p + "/status", Handler: h.getStatus, Doc: httpapi.Doc{Summary: "Fleet totals and the Hub's status", Tag: tagSystem, Response: Status{}}},
		{Method: "GET", Pattern: p + "/nodes", Handler: h.getNodes, Doc: httpapi.Doc{Summary: "The nodes, by id", Tag: tagNodes, Paged: true,
			Query:    []httpapi.Param{{Name: "status", Enum: []string{"online", "unavailable", "unknown"}}, {Name: "mode", Enum: []string{wire.NodeModeActive, wire.NodeModeDraining, wire.NodeModeMaintenance}}},
			Response: wire.Page[NodeView]{}}},
		{Method: "GET", Pattern: p + "/nodes/{node_id}", Handler: h.getNode, Doc: httpapi.Doc{Summary: "One node", Tag: tagNodes, Response: NodeView{},
			Problems: []int{http.StatusNotFound}}},
		{Method: "GET", Pattern: p + "/streams", Handler: h.getStreams, Doc: httpapi.Doc{Summary: "The streams of the fleet, by node and id", Tag: tagStreams, Paged: true,
			Query:    []httpapi.Param{{Name: "node_id"}, {Name: "convergence"}, {Name: "state", Description: "The observed state; none for a stream no node reported."}},
			Response: wire.Page[wire.Stream]{}}},
		{Method: "GET", Pattern: p + "/nodes/{node_id}/streams/{id}", Handler: h.getStream, Doc: httpapi.Doc{Summary: "One stream: desired, observed, convergence",
			Tag: tagStreams, Response: wire.Stream{}, ETag: true, Problems: []int{http.StatusNotFound}}},
		{Method: "PUT", Pattern: p + "/nodes/{node_id}/streams/{id}/desired-state", Handler: h.audited(fixedAction(OpStreamDesiredState), h.putStreamDesired),
			Doc: streamWriteDoc("Set a stream's desired state", desiredRequest{}, false)},
		{Method: "DELETE", Pattern: p + "/nodes/{node_id}/streams/{id}/desired-state", Handler: h.audited(fixedAction(store.ActionStreamUnmanage), h.deleteStreamDesired),
			Doc: httpapi.Doc{Summary: "Stop managing a stream: its desired state goes, its convergence is unknown again", Tag: tagStreams,
				Status: http.StatusNoContent, IfMatch: true, Problems: []int{http.StatusNotFound}}},
		{Method: "POST", Pattern: p + "/nodes/{node_id}/streams/{id}/actions/restart", Handler: h.audited(fixedAction(OpStreamRestart), h.postStreamAction("restart")),
			Doc: streamWriteDoc("Restart a stream", streamActionRequest{}, true)},
	}
	for _, a := range []string{"start", "stop", "restart"} {
		routes = append(routes, httpapi.Route{Method: "POST", Pattern: p + "/nodes/{node_id}/streams/{id}/" + a,
			Handler: h.audited(fixedAction(streamActions[a].operation), h.postStreamAction(a)),
			Doc:     streamWriteDoc(titled(a)+" a stream", streamActionRequest{}, true)})
	}
	for _, a := range []string{"start", "stop", "restart"} {
		d := streamWriteDoc(titled(a)+" the stream on the one node that hosts it", streamActionRequest{}, true)
		routes = append(routes, httpapi.Route{Method: "POST", Pattern: p + "/streams/{id}/" + a,
			Handler: h.audited(fixedAction(streamActions[a].operation), h.postLegacyAction(a)), Doc: d})
	}
	routes = append(routes, []httpapi.Route{
		{Method: "POST", Pattern: p + "/nodes/{node_id}/drain", Handler: h.audited(modeAction(wire.NodeModeDraining), h.nodeMode(wire.NodeModeDraining)),
			Doc: nodeMode("Drain a node: no new dispatch")},
		{Method: "POST", Pattern: p + "/nodes/{node_id}/maintenance", Handler: h.audited(modeAction(wire.NodeModeMaintenance), h.nodeMode(wire.NodeModeMaintenance)),
			Doc: nodeMode("Put a node in maintenance")},
		{Method: "DELETE", Pattern: p + "/nodes/{node_id}/maintenance", Handler: h.audited(modeAction(wire.NodeModeActive), h.nodeMode(wire.NodeModeActive)),
			Doc: nodeMode("Make a node active again")},
		{Method: "DELETE", Pattern: p + "/nodes/{node_id}", Handler: h.audited(fixedAction(store.ActionNodeForget), h.deleteNode),
			Doc: httpapi.Doc{Summary: "Forget a node: its session ends, its identity binding and registry entry go, its desired state stays",
				Tag: tagNodes, Status: http.StatusNoContent, Problems: []int{http.StatusNotFound, http.StatusConflict},
				Query: []httpapi.Param{{Name: "force", Type: "boolean", Description: "Forget the node even while it is online."}}}},
		{Method: "GET", Pattern: p + "/operations", Handler: h.getOperations, Doc: httpapi.Doc{Summary: "The operations, newest first", Tag: tagOperations,
			Paged: true, Query: opFilters, Response: wire.Page[wire.Operation]{}}},
		{Method: "GET", Pattern: p + "/operations/status", Handler: h.getOperationsStatus, Doc: httpapi.Doc{Summary: "Queue and reconciler diagnostics",
			Tag: tagOperations, Response: OperationsStatus{}}},
		{Method: "GET", Pattern: p + "/operations/{id}", Handler: h.getOperation, Doc: httpapi.Doc{Summary: "One operation", Tag: tagOperations,
			Response: wire.Operation{}, Problems: []int{http.StatusNotFound}}},
		{Method: "DELETE", Pattern: p + "/operations/{id}", Handler: h.audited(fixedAction(store.ActionCancel), h.deleteOperation),
			Doc: httpapi.Doc{Summary: "Cancel an operation not yet acknowledged", Tag: tagOperations, Response: wire.Operation{},
				Problems: []int{http.StatusNotFound}}},
		{Method: "GET", Pattern: p + "/events", Handler: h.getEvents, Doc: httpapi.Doc{Summary: "The retained events, newest first", Tag: tagEvents,
			Paged: true, Query: eventlog.FilterParams, Response: wire.Page[wire.Event]{}}},
		{Method: "GET", Pattern: p + "/events/stream", Handler: h.getEventStream, Doc: httpapi.Doc{Summary: "The events as server-sent events (Last-Event-ID resumes)",
			Tag: tagEvents, Query: append(slices.Clone(eventlog.FilterParams), httpapi.Param{Name: "last_event_id", Type: "integer",
				Description: "Resume after this event id, for clients that cannot send Last-Event-ID."}), ResponseMedia: "text/event-stream"}},
		{Method: "GET", Pattern: p + "/audit", Handler: h.getAudit, Doc: httpapi.Doc{Summary: "The audit log, newest first", Tag: tagAudit, Paged: true,
			Query: []httpapi.Param{{Name: "resource_id"}, {Name: "node_id"}, {Name: "actor"}, {Name: "action"},
				{Name: "outcome", Enum: []string{store.OutcomeAccepted, store.OutcomeRejected}}},
			Response: wire.Page[store.AuditRecord]{}}},
		{Method: "GET", Pattern: p + "/components", Handler: h.getComponents, Doc: httpapi.Doc{Summary: "The components nodes of this release run",
			Tag: tagComponents, Paged: true, Response: wire.Page[component.Info]{}}},
		{Method: "GET", Pattern: p + "/components/{kind}/{name}", Handler: h.getComponent, Doc: httpapi.Doc{Summary: "One component's schema and example",
			Tag: tagComponents, Response: component.Detail{}, Problems: []int{http.StatusNotFound}}},
		{Method: "GET", Pattern: p + "/schema", Handler: h.getSchema, Doc: httpapi.Doc{Summary: "The JSON Schema of a node configuration",
			Tag: tagComponents, Response: map[string]any{}}},
		{Method: "GET", Pattern: p + "/metrics", Handler: h.getMetrics, Doc: httpapi.Doc{Summary: "Prometheus text, or JSON with format=json or Accept: application/json",
			Tag: tagSystem, Query: []httpapi.Param{{Name: "format", Enum: []string{"json", "text", "prometheus"}}, {Name: "node_id", Description: "One node's reported metrics."}},
			ResponseMedia: "text/plain", AltResponse: MetricsJSON{}}},
	}...)
	routes = append(routes, h.jobRoutes(p)...)
	routes = append(routes, h.configRoutes(p)...)
	routes = append(routes, h.rolloutRoutes(p)...)
	routes = append(routes, h.historyRoutes(p)...)
	routes = append(routes, h.tapRoutes(p)...)
	routes = append(routes, httpapi.Route{Method: "GET", Pattern: p + "/auth/whoami", Handler: h.getWhoami,
		Doc: httpapi.Doc{Summary: "Who the request's credential authenticates as: principal, kind, roles, scopes, expiry", Tag: tagSystem, Response: Whoami{}}})
	for i, rt := range routes {
		routes[i].Handler = validPathIDs(rt.Pattern, h.authorize(rt, rt.Handler))
		if pathIDs(rt.Pattern) != nil {
			routes[i].Doc.Problems = append(slices.Clone(rt.Doc.Problems), http.StatusUnprocessableEntity)
		}
	}
	routes = append(routes, h.agentRoutes(p)...)
	// The document describes the table it is served from, itself included.
	h.openapi = sync.OnceValues(func() ([]byte, error) { return openapi.Build(h.openAPIInfo(), routes) })
	doc := httpapi.Route{Method: "GET", Pattern: p + OpenAPIPath, Doc: openapi.Doc(tagSystem)}
	doc.Handler = h.authorize(doc, openapi.Handler(h.openapi))
	routes = append(routes, doc)
	// Probes, the top-level metrics and the console's files stay open
	// whatever the token.
	return append(append(routes,
		httpapi.Route{Method: "GET", Pattern: "/health", Handler: h.getReadiness, Public: true},
		httpapi.Route{Method: "GET", Pattern: "/liveness", Handler: h.getLiveness, Public: true},
		httpapi.Route{Method: "GET", Pattern: "/readiness", Handler: h.getReadiness, Public: true},
		httpapi.Route{Method: "GET", Pattern: "/metrics", Handler: h.getPublicMetrics, Public: true},
	), h.consoleRoutes()...)
}

// streamWriteDoc documents a stream desired-state write (202 with the
// operation); optional says the body may be left out.
func streamWriteDoc(summary string, body any, optional bool) httpapi.Doc {
	return httpapi.Doc{Summary: summary, Tag: tagStreams, Request: body, RequestOptional: optional, Status: http.StatusAccepted,
		Response: wire.DesiredStateResponse{}, ETag: true, Location: true, IfMatch: true, Problems: []int{http.StatusNotFound, http.StatusConflict}}
}

// titled is s with a capital first letter.
func titled(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// idMessage is the validation message of an id that does not match
// wire.IDPattern.
const idMessage = "must be " + wire.IDRule

// validPathIDs checks the node and stream ids of a route's path against
// wire.IDPattern before anything else (audit included) sees them: one that
// does not match (NUL, CR/LF, invalid UTF-8, too long...) is answered 422
// validation_failed naming the parameter.
func validPathIDs(pattern string, next httpapi.HandlerFunc) httpapi.HandlerFunc {
	params := pathIDs(pattern)
	idName := "stream_id"
	if strings.Contains(pattern, "/jobs/{id}") {
		idName = "job_id"
	}
	if len(params) == 0 {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		var probs []httpapi.FieldProblem
		for _, p := range params {
			if !wire.ValidID(r.PathValue(p)) {
				name := p
				if p == "id" {
					name = idName
				}
				probs = append(probs, httpapi.FieldProblem{Path: name, Message: idMessage})
			}
		}
		if len(probs) > 0 {
			return httpapi.Validation(probs)
		}
		return next(w, r)
	}
}

// pathIDs are the path parameters of pattern validPathIDs checks.
func pathIDs(pattern string) []string {
	var params []string
	if strings.Contains(pattern, "{node_id}") {
		params = append(params, "node_id")
	}
	if strings.Contains(pattern, "/streams/{id}") || strings.Contains(pattern, "/jobs/{id}") {
		params = append(params, "id")
	}
	return params
}

func paging(r *http.Request) (store.Paging, error) {
	page, size, err := httpapi.ParsePage(r)
	return store.Paging{Page: page, PageSize: size}, err
}

func (h *Hub) getOperations(w http.ResponseWriter, r *http.Request) error {
	p, err := paging(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := store.IntentFilter{NodeID: q.Get("node_id"), ResourceID: q.Get("resource_id"), Operation: q.Get("operation"), State: q.Get("state"), CorrelationID: q.Get("correlation_id"),
		Visible: readable(r.Context(), func(in store.Intent) access.Resource { return recordResource(in.Kind, in.NodeID, in.ResourceID) })}
	pg, err := h.st.ListIntents(r.Context(), f, p)
	if err != nil {
		return problemFor(err, anyResource)
	}
	return httpapi.WriteJSON(w, http.StatusOK, h.operations(r.Context(), pg))
}

func (h *Hub) getOperation(w http.ResponseWriter, r *http.Request) error {
	in, err := h.st.GetIntent(r.Context(), r.PathValue("id"))
	if err != nil {
		return problemFor(err, anOperation)
	}
	return httpapi.WriteJSON(w, http.StatusOK, h.operation(r.Context(), in))
}

func (h *Hub) deleteOperation(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	id, by := r.PathValue("id"), actorOf(ctx)
	in, err := h.st.CancelIntent(ctx, store.Cancellation{
		IntentID: id, Actor: by.id, ActorKind: by.kind, CorrelationID: httpapi.CorrelationID(ctx), Now: h.opts.Now(),
	})
	if err != nil {
		e := h.storeFailedAbout(err, anOperation)
		var pe *httpapi.Error
		if errors.Is(err, store.ErrNotCancellable) && errors.As(e, &pe) {
			if cur, gerr := h.st.GetIntent(ctx, id); gerr == nil {
				pe.Details = map[string]any{"state": cur.State}
			}
		}
		return e
	}
	h.converge(in.NodeID, in.ResourceID)
	return httpapi.WriteJSON(w, http.StatusOK, h.operation(ctx, in))
}

// getEvents answers from the live log (the retained 2048 events, with the
// filters of the SSE stream), brought up to date with the store first so
// that a client reads its own writes.
func (h *Hub) getEvents(w http.ResponseWriter, r *http.Request) error {
	p, err := paging(r)
	if err != nil {
		return err
	}
	f, err := eventlog.FilterFromQuery(r.URL.Query())
	if err != nil {
		return httpapi.BadRequest(httpapi.CodeInvalidQuery, err.Error())
	}
	if err := h.pump(r.Context()); err != nil {
		return problemFor(err, anyResource)
	}
	f.Visible = eventsVisible(r.Context())
	return httpapi.WriteJSON(w, http.StatusOK, h.events.Query(f, p.Page, p.PageSize))
}

func (h *Hub) getAudit(w http.ResponseWriter, r *http.Request) error {
	p, err := paging(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := store.AuditFilter{ResourceID: q.Get("resource_id"), NodeID: q.Get("node_id"), Actor: q.Get("actor"), Action: q.Get("action"), Outcome: q.Get("outcome"),
		Visible: readable(r.Context(), func(a store.AuditRecord) access.Resource {
			return recordResource(a.ResourceType, a.NodeID, a.ResourceID)
		})}
	if f.Outcome != "" && f.Outcome != store.OutcomeAccepted && f.Outcome != store.OutcomeRejected {
		return httpapi.BadRequest(httpapi.CodeInvalidQuery, "outcome must be accepted or rejected")
	}
	pg, err := h.st.ListAudit(r.Context(), f, p)
	if err != nil {
		return problemFor(err, anyResource)
	}
	return httpapi.WriteJSON(w, http.StatusOK, pg)
}

// System is the Hub system descriptor of GET /api/v1/system.
type System struct {
	Role            string    `json:"role"`
	Version         string    `json:"version,omitempty"`
	ProtocolVersion int       `json:"protocol_version"`
	APIPrefix       string    `json:"api_prefix"`
	Storage         string    `json:"storage"` // durable or volatile
	InsecureLocal   bool      `json:"insecure_local"`
	Auth            bool      `json:"auth"`
	StartedAt       wire.Time `json:"started_at"`
	Restored        Restored  `json:"restored"`
	// HA is this Hub's part in the leader lease.
	HA HA `json:"ha"`
}

// Restored counts what the start-up restore read.
type Restored struct {
	Nodes          int   `json:"nodes"`
	Resources      int   `json:"resources"`
	PendingOutbox  int   `json:"pending_outbox"`
	ActiveAttempts int   `json:"active_attempts"`
	LastEventID    int64 `json:"last_event_id"`
}

func (h *Hub) getSystem(w http.ResponseWriter, r *http.Request) error {
	s := h.opts.Settings
	h.mu.Lock()
	snap := h.restored
	h.mu.Unlock()
	storage := "durable"
	if s.Storage == "" {
		storage = "volatile"
	}
	return httpapi.WriteJSON(w, http.StatusOK, System{
		Role: "hub", Version: h.opts.Version, ProtocolVersion: wire.ProtocolVersion, APIPrefix: h.prefix,
		Storage: storage, InsecureLocal: s.InsecureLocal, Auth: h.auth.configured(), StartedAt: wire.At(h.startedAt),
		Restored: Restored{Nodes: len(snap.Nodes), Resources: len(snap.Resources), PendingOutbox: len(snap.PendingOutbox),
			ActiveAttempts: len(snap.ActiveAttempts), LastEventID: snap.LastEventID},
		HA: h.lead.view(h.opts.Now()),
	})
}

// Probe is the body of /liveness and /readiness.
type Probe struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

func (h *Hub) getLiveness(w http.ResponseWriter, r *http.Request) error {
	return httpapi.WriteJSON(w, http.StatusOK, Probe{Status: "live"})
}

func (h *Hub) getReadiness(w http.ResponseWriter, r *http.Request) error {
	if h.ready.Load() && h.storageDown.Load() {
		return httpapi.WriteJSON(w, http.StatusServiceUnavailable, Probe{Status: "not_ready", Reason: CodeStorageUnavailable})
	}
	if h.ready.Load() {
		return httpapi.WriteJSON(w, http.StatusOK, Probe{Status: "ready"})
	}
	h.mu.Lock()
	failed := h.restoreErr != nil
	h.mu.Unlock()
	p := Probe{Status: "not_ready", Reason: CodeRecovering}
	if failed {
		p.Reason = "restore_failed"
	}
	return httpapi.WriteJSON(w, http.StatusServiceUnavailable, p)
}
