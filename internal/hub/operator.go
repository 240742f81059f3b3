package hub

import (
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/store"
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

// OpStreamDesiredState is the operation name of a stream desired-state write.
const OpStreamDesiredState = "stream_desired_state"

// maxIDLen bounds node, stream and config version identifiers.
const maxIDLen = 255

func (h *Hub) routes() []httpapi.Route {
	p := APIPrefix
	return []httpapi.Route{
		{Method: "GET", Pattern: p + "/system", Handler: h.getSystem},
		{Method: "GET", Pattern: p + "/nodes/{node_id}/streams/{id}", Handler: h.getStream},
		{Method: "PUT", Pattern: p + "/nodes/{node_id}/streams/{id}/desired-state", Handler: h.putStreamDesired},
		{Method: "GET", Pattern: p + "/operations", Handler: h.getOperations},
		{Method: "GET", Pattern: p + "/operations/{id}", Handler: h.getOperation},
		{Method: "DELETE", Pattern: p + "/operations/{id}", Handler: h.deleteOperation},
		{Method: "GET", Pattern: p + "/events", Handler: h.getEvents},
		{Method: "GET", Pattern: p + "/audit", Handler: h.getAudit},
		// Probes and metrics stay open whatever the token.
		{Method: "GET", Pattern: "/liveness", Handler: h.getLiveness, Public: true},
		{Method: "GET", Pattern: "/readiness", Handler: h.getReadiness, Public: true},
		{Method: "GET", Pattern: "/metrics", Handler: httpapi.FromHandler(promhttp.HandlerFor(h.registry, promhttp.HandlerOpts{})), Public: true},
	}
}

// storeProblem maps the store's errors every handler shares.
func storeProblem(err error) error {
	switch {
	case errors.Is(err, store.ErrStorage), errors.Is(err, store.ErrClosed):
		return httpapi.Unavailable(CodeStorageUnavailable, "the Hub's storage is unavailable").WithCause(err)
	case errors.Is(err, store.ErrInvalid):
		return httpapi.BadRequest(httpapi.CodeInvalidQuery, "a query parameter is out of range").WithCause(err)
	}
	return err
}

type desiredRequest struct {
	State         string `json:"state"`
	ConfigVersion string `json:"config_version"`
}

func (h *Hub) putStreamDesired(w http.ResponseWriter, r *http.Request) error {
	nodeID, streamID := r.PathValue("node_id"), r.PathValue("id")
	var body desiredRequest
	if err := httpapi.DecodeJSON(r, &body, MaxBodyBytes); err != nil {
		return err
	}
	var probs []httpapi.FieldProblem
	if body.State != "running" && body.State != "stopped" {
		probs = append(probs, httpapi.FieldProblem{Path: "state", Message: "must be running or stopped"})
	}
	if len(body.ConfigVersion) > maxIDLen {
		probs = append(probs, httpapi.FieldProblem{Path: "config_version", Message: "at most 255 characters"})
	}
	if len(nodeID) > maxIDLen || len(streamID) > maxIDLen {
		probs = append(probs, httpapi.FieldProblem{Message: "node_id and stream id are at most 255 characters"})
	}
	if len(probs) > 0 {
		return httpapi.Validation(probs)
	}
	gen, matchAny, present, err := httpapi.ParseIfMatch(r.Header.Get("If-Match"))
	if err != nil {
		return err
	}
	var ifMatch *int64
	if present && !matchAny {
		ifMatch = &gen
	}
	id := h.opts.NewID()
	res, err := h.st.WriteDesired(r.Context(), store.DesiredWrite{
		IntentID: id, Operation: OpStreamDesiredState, NodeID: nodeID, Kind: store.KindStream,
		ResourceID: streamID, State: body.State, ConfigVersion: body.ConfigVersion, IfMatch: ifMatch,
		CorrelationID: httpapi.CorrelationID(r.Context()), Actor: httpapi.Principal(r.Context()),
		Now: h.opts.Now(),
	})
	var gc *store.GenerationConflictError
	switch {
	case errors.As(err, &gc):
		return httpapi.GenerationConflict(gc.Expected, gc.Current, map[string]any{"node_id": nodeID, "stream_id": streamID})
	case err != nil:
		return storeProblem(err)
	}
	h.accepted.Inc()
	w.Header().Set("Location", APIPrefix+"/operations/"+id)
	w.Header().Set("ETag", httpapi.ETag(res.Generation))
	return httpapi.WriteJSON(w, http.StatusAccepted, wire.DesiredStateResponse{
		OperationID: id, IntentID: id, NodeID: nodeID, StreamID: streamID, Generation: res.Generation,
		DesiredState: body.State, ConfigVersion: body.ConfigVersion, Convergence: wire.ConvergencePending,
	})
}

func (h *Hub) getStream(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	nodeID, streamID := r.PathValue("node_id"), r.PathValue("id")
	res, err := h.st.GetResource(ctx, nodeID, store.KindStream, streamID)
	if errors.Is(err, store.ErrNotFound) {
		return httpapi.NotFound(CodeStreamNotFound, "no desired state for that stream on that node")
	}
	if err != nil {
		return storeProblem(err)
	}
	view := wire.Stream{
		ID: streamID, NodeID: nodeID,
		Desired: wire.StreamDesired{State: res.State, Generation: res.Generation, ConfigVersion: res.ConfigVersion, ActionID: res.ActionID},
	}
	obs, err := h.st.ObservedStreams(ctx, nodeID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return storeProblem(err)
	}
	for _, o := range obs {
		if o.StreamID == streamID {
			view.Observed = wire.StreamObserved{State: o.State, Generation: o.Generation, ConfigVersion: o.ConfigVersion, ActionID: o.ActionID, LastError: o.LastError}
		}
	}
	latest, err := h.st.ListIntents(ctx, store.IntentFilter{NodeID: nodeID, ResourceID: streamID}, store.Paging{Page: 1, PageSize: 10})
	if err != nil {
		return storeProblem(err)
	}
	for _, in := range latest.Items {
		if in.Kind == store.KindStream {
			op := operationOf(in)
			view.LatestOperation = &op
			break
		}
	}
	view.Convergence = streamConvergence(view)
	w.Header().Set("ETag", httpapi.ETag(res.Generation))
	return httpapi.WriteJSON(w, http.StatusOK, view)
}

// streamConvergence is a provisional reading until the reconciler's
// Convergence is wired: in_sync when the observation matches the desire,
// else what the latest operation says.
func streamConvergence(v wire.Stream) string {
	d, o := v.Desired, v.Observed
	if o.State == d.State && o.Generation == d.Generation && o.ConfigVersion == d.ConfigVersion && o.ActionID == d.ActionID && o.LastError == "" {
		return wire.ConvergenceInSync
	}
	if v.LatestOperation != nil {
		return v.LatestOperation.Convergence
	}
	return wire.ConvergenceUnknown
}

// operationOf is the wire record of an intent with a provisional
// convergence derived from its state (reports are not consulted yet).
func operationOf(in store.Intent) wire.Operation {
	op := in.Wire()
	switch in.State {
	case wire.OpPending, wire.OpSuperseded:
		op.Convergence = wire.ConvergencePending
	case wire.OpDispatched, wire.OpAcknowledged, wire.OpSucceeded:
		op.Convergence = wire.ConvergenceApplying
	case wire.OpFailed, wire.OpTimedOut, wire.OpCancelled:
		op.Convergence = wire.ConvergenceBlocked
	default:
		op.Convergence = wire.ConvergenceUnknown
	}
	return op
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
	f := store.IntentFilter{NodeID: q.Get("node_id"), ResourceID: q.Get("resource_id"), Operation: q.Get("operation"), State: q.Get("state"), CorrelationID: q.Get("correlation_id")}
	pg, err := h.st.ListIntents(r.Context(), f, p)
	if err != nil {
		return storeProblem(err)
	}
	out := wire.Page[wire.Operation]{Items: make([]wire.Operation, len(pg.Items)), Page: pg.Page, PageSize: pg.PageSize, Total: pg.Total}
	for i, in := range pg.Items {
		out.Items[i] = operationOf(in)
	}
	return httpapi.WriteJSON(w, http.StatusOK, out)
}

func (h *Hub) getOperation(w http.ResponseWriter, r *http.Request) error {
	in, err := h.st.GetIntent(r.Context(), r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		return httpapi.NotFound(CodeOperationNotFound, "no operation with that id")
	}
	if err != nil {
		return storeProblem(err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, operationOf(in))
}

func (h *Hub) deleteOperation(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	id := r.PathValue("id")
	in, err := h.st.CancelIntent(ctx, store.Cancellation{
		IntentID: id, Actor: httpapi.Principal(ctx), CorrelationID: httpapi.CorrelationID(ctx), Now: h.opts.Now(),
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return httpapi.NotFound(CodeOperationNotFound, "no operation with that id")
	case errors.Is(err, store.ErrNotCancellable):
		e := httpapi.Conflict(CodeOperationNotCancellable, "the operation was already dispatched or finished; its outcome stays visible")
		if cur, gerr := h.st.GetIntent(ctx, id); gerr == nil {
			e.Details = map[string]any{"state": cur.State}
		}
		return e
	case err != nil:
		return storeProblem(err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, operationOf(in))
}

func (h *Hub) getEvents(w http.ResponseWriter, r *http.Request) error {
	p, err := paging(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := store.EventFilter{Kind: q.Get("kind"), NodeID: q.Get("node_id"), ResourceID: q.Get("resource_id"), OperationID: q.Get("operation_id"), CorrelationID: q.Get("correlation_id")}
	pg, err := h.st.ListEvents(r.Context(), f, p)
	if err != nil {
		return storeProblem(err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, pg)
}

func (h *Hub) getAudit(w http.ResponseWriter, r *http.Request) error {
	p, err := paging(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := store.AuditFilter{ResourceID: q.Get("resource_id"), NodeID: q.Get("node_id"), Actor: q.Get("actor"), Action: q.Get("action")}
	pg, err := h.st.ListAudit(r.Context(), f, p)
	if err != nil {
		return storeProblem(err)
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
		Role: "hub", Version: h.opts.Version, ProtocolVersion: wire.ProtocolVersion, APIPrefix: APIPrefix,
		Storage: storage, InsecureLocal: s.InsecureLocal, Auth: s.OperatorToken != "", StartedAt: wire.At(h.startedAt),
		Restored: Restored{Nodes: len(snap.Nodes), Resources: len(snap.Resources), PendingOutbox: len(snap.PendingOutbox),
			ActiveAttempts: len(snap.ActiveAttempts), LastEventID: snap.LastEventID},
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
