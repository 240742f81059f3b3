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

// Operation names of stream intents.
const (
	OpStreamDesiredState = "stream_desired_state"
	OpStreamStart        = "stream_start"
	OpStreamStop         = "stream_stop"
	OpStreamRestart      = "stream_restart"
)

// CodeAmbiguousStream answers a legacy route whose stream runs on several nodes.
const CodeAmbiguousStream = "ambiguous_stream"

// desiredRequest is the body of PUT desired-state. A missing
// config_version keeps the stream's current one; "" accepts any.
type desiredRequest struct {
	State         string  `json:"state"`
	ConfigVersion *string `json:"config_version,omitempty"`
}

// streamActionRequest is the optional body of a stream action: a
// config_version replaces the stream's current one.
type streamActionRequest struct {
	ConfigVersion *string `json:"config_version,omitempty"`
}

// desire is one stream desired-state write as the handlers build it.
type desire struct {
	nodeID, streamID, operation string
	state, configVersion        string
	actionID                    string
}

func (h *Hub) putStreamDesired(w http.ResponseWriter, r *http.Request) error {
	var body desiredRequest
	if err := httpapi.DecodeJSON(r, &body, MaxBodyBytes); err != nil {
		return err
	}
	var probs []httpapi.FieldProblem
	if body.State != "running" && body.State != "stopped" {
		probs = append(probs, httpapi.FieldProblem{Path: "state", Message: "must be running or stopped"})
	}
	if body.ConfigVersion != nil && len(*body.ConfigVersion) > maxIDLen {
		probs = append(probs, httpapi.FieldProblem{Path: "config_version", Message: "at most 255 characters"})
	}
	if len(probs) > 0 {
		return httpapi.Validation(probs)
	}
	d := desire{nodeID: r.PathValue("node_id"), streamID: r.PathValue("id"), operation: OpStreamDesiredState, state: body.State}
	if body.ConfigVersion != nil {
		d.configVersion = *body.ConfigVersion
	} else {
		cur, err := h.st.GetResource(r.Context(), d.nodeID, store.KindStream, d.streamID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return problemFor(err, anyResource)
		}
		d.configVersion = cur.ConfigVersion
	}
	return h.writeDesired(w, r, d)
}

// postStreamAction is POST .../streams/{id}/<action>: start, stop or
// restart (also at .../actions/restart).
func (h *Hub) postStreamAction(action string) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		return h.streamAction(w, r, r.PathValue("node_id"), r.PathValue("id"), action)
	}
}

// postLegacyAction is the un-targeted POST /streams/{id}/<action>: an
// adapter that finds the one node hosting the stream.
func (h *Hub) postLegacyAction(action string) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		id := r.PathValue("id")
		nodes, err := h.hostsOf(r.Context(), id)
		if err != nil {
			return problemFor(err, anyResource)
		}
		switch len(nodes) {
		case 0:
			return httpapi.NotFound(CodeStreamNotFound, "no node hosts or is desired to run that stream")
		case 1:
			return h.streamAction(w, r, nodes[0], id, action)
		}
		e := httpapi.Conflict(CodeAmbiguousStream, "the stream exists on several nodes; use /nodes/{node_id}/streams/{id}/"+action)
		e.Details = map[string]any{"node_ids": nodes}
		return e
	}
}

// hostsOf returns the nodes that report the stream or hold a desired state
// for it, sorted.
func (h *Hub) hostsOf(ctx context.Context, streamID string) ([]string, error) {
	set := map[string]bool{}
	for _, n := range h.fleet.Nodes() {
		for _, o := range n.Observed {
			if o.StreamID == streamID {
				set[n.NodeID] = true
			}
		}
	}
	states, err := h.st.ResourceStates(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, rs := range states {
		if rs.Kind == store.KindStream && rs.ResourceID == streamID {
			set[rs.NodeID] = true
		}
	}
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return "\"" + s + "\""
}

// streamActions are the one-shot stream actions: the operation each
// writes (and is audited as) and the state it sets.
var streamActions = map[string]struct{ operation, state string }{
	"start":   {OpStreamStart, "running"},
	"stop":    {OpStreamStop, "stopped"},
	"restart": {OpStreamRestart, "running"},
}

// streamAction writes the desire of a one-shot action: start and stop set
// the state; restart keeps it running with a new action_id, and converges
// only when a report carries that action_id. The configuration version
// stays what the last write set.
func (h *Hub) streamAction(w http.ResponseWriter, r *http.Request, nodeID, streamID, action string) error {
	var body streamActionRequest
	if _, err := httpapi.DecodeOptionalJSON(r, &body, MaxBodyBytes); err != nil {
		return err
	}
	a := streamActions[action]
	d := desire{nodeID: nodeID, streamID: streamID, operation: a.operation, state: a.state}
	if action == "restart" {
		d.actionID = h.opts.NewID()
	}
	cur, err := h.st.GetResource(r.Context(), nodeID, store.KindStream, streamID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return problemFor(err, anyResource)
	}
	d.configVersion = cur.ConfigVersion
	if body.ConfigVersion != nil {
		if len(*body.ConfigVersion) > maxIDLen {
			return httpapi.Validation([]httpapi.FieldProblem{{Path: "config_version", Message: "at most 255 characters"}})
		}
		d.configVersion = *body.ConfigVersion
	}
	return h.writeDesired(w, r, d)
}

// writeDesired writes a stream's desired state through the intent
// pipeline: generation+1, intent, outbox row, audit row and event in one
// transaction, then 202.
func (h *Hub) writeDesired(w http.ResponseWriter, r *http.Request, d desire) error {
	if d.nodeID == "" || d.streamID == "" || len(d.nodeID) > maxIDLen || len(d.streamID) > maxIDLen {
		return httpapi.Validation([]httpapi.FieldProblem{{Message: "node_id and stream id are 1 to 255 characters"}})
	}
	return h.accept(w, r, intentWrite{about: anyResource, conditional: true,
		conflict: map[string]any{"node_id": d.nodeID, "stream_id": d.streamID},
		commit: func(ctx context.Context, m intentMeta) (committed, error) {
			res, err := h.st.WriteDesired(ctx, store.DesiredWrite{
				IntentID: m.id, Operation: d.operation, NodeID: d.nodeID, Kind: store.KindStream,
				ResourceID: d.streamID, State: d.state, ConfigVersion: d.configVersion, ActionID: d.actionID, IfMatch: m.ifMatch,
				CorrelationID: m.correlationID, Actor: m.by.id, ActorKind: m.by.kind, Now: m.now, ExpiresAt: m.expiresAt,
			})
			if err != nil {
				return committed{}, err
			}
			return committed{operationID: m.id, nodes: []string{d.nodeID}, etag: httpapi.ETag(res.Generation),
				converge: func() {
					h.convergeWritten(&written{asOf: res.Txn, rs: store.ResourceState{Latest: &res.Intent, Resource: store.Resource{
						NodeID: d.nodeID, Kind: store.KindStream, ResourceID: d.streamID, State: d.state, ConfigVersion: d.configVersion,
						Generation: res.Generation, ActionID: d.actionID, UpdatedAt: res.Intent.CreatedAt}}})
				},
				body: func(status string) any {
					return wire.DesiredStateResponse{
						OperationID: m.id, IntentID: m.id, NodeID: d.nodeID, StreamID: d.streamID, Generation: res.Generation,
						DesiredState: d.state, ConfigVersion: d.configVersion, ActionID: d.actionID, Convergence: wire.ConvergencePending,
						NodeStatus: status, Warnings: nodeWarnings(status),
					}
				}}, nil
		}})
}

func (h *Hub) getStream(w http.ResponseWriter, r *http.Request) error {
	nodeID, streamID := r.PathValue("node_id"), r.PathValue("id")
	rs, err := h.st.GetResourceState(r.Context(), nodeID, store.KindStream, streamID)
	if errors.Is(err, store.ErrNotFound) {
		// A stream a node reports without a desired state still has a view.
		if o, ok := h.observedOnly(nodeID, streamID); ok {
			o.Configuration = h.streamConfiguration(r.Context(), nodeID, streamID)
			return httpapi.WriteJSON(w, http.StatusOK, o)
		}
		return httpapi.NotFound(CodeStreamNotFound, "that node neither reports nor is desired to run that stream")
	}
	if err != nil {
		return problemFor(err, anyResource)
	}
	w.Header().Set("ETag", httpapi.ETag(rs.Generation))
	v := h.streamView(rs, h.opts.Now())
	v.Configuration = h.streamConfiguration(r.Context(), nodeID, streamID)
	return httpapi.WriteJSON(w, http.StatusOK, v)
}

// observedOnly is the view of a stream a node reports but nobody desired:
// its convergence is unknown.
func (h *Hub) observedOnly(nodeID, streamID string) (wire.Stream, bool) {
	n, _ := h.fleet.Node(nodeID)
	for _, o := range n.Observed {
		if o.StreamID == streamID {
			return wire.Stream{ID: streamID, NodeID: nodeID, Observed: n.ObservedView(o), Convergence: wire.ConvergenceUnknown}, true
		}
	}
	return wire.Stream{}, false
}

// getStreams lists the streams across the fleet: every desired stream and
// every reported one, by node and id. Filters: node_id, convergence, state
// (the observed state; "none" for a stream no node reported yet). A fleet
// reports up to MaxReportStreams streams per node: without a convergence or
// state filter only the nodes the page reaches are merged, and only the
// page's views are built.
func (h *Hub) getStreams(w http.ResponseWriter, r *http.Request) error {
	page, size, err := httpapi.ParsePage(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	nodeFilter, convFilter, stateFilter := q.Get("node_id"), q.Get("convergence"), q.Get("state")
	segs, err := h.streamSegments(r.Context(), nodeFilter)
	if err != nil {
		return problemFor(err, anyResource)
	}
	now := h.opts.Now()
	ctx := r.Context()
	var refs wire.Page[streamRef]
	if convFilter == "" && stateFilter == "" && !scoped(ctx) {
		refs = pageSegments(segs, page, size)
	} else {
		var all []streamRef
		for _, sg := range segs {
			all = append(all, sg.merge()...)
		}
		all = slices.DeleteFunc(all, func(s streamRef) bool {
			if scoped(ctx) && !mayRead(ctx, access.Resource{Node: s.nodeID(), Stream: s.streamID()}) {
				return true
			}
			if convFilter == "" && stateFilter == "" {
				return false
			}
			conv, state := h.streamSummary(s, now)
			return (convFilter != "" && conv != convFilter) || (stateFilter != "" && state != stateFilter)
		})
		refs = httpapi.Paginate(all, page, size)
	}
	out := wire.Page[wire.Stream]{Items: make([]wire.Stream, 0, len(refs.Items)), Page: refs.Page, PageSize: refs.PageSize, Total: refs.Total}
	for _, s := range refs.Items {
		out.Items = append(out.Items, h.streamRefView(s, now))
	}
	return httpapi.WriteJSON(w, http.StatusOK, out)
}

// observedState is a stream's reported state, "none" when no node
// reported it.
func observedState(s wire.Stream) string {
	if s.Observed.State == "" {
		return "none"
	}
	return s.Observed.State
}

// streamRef is one stream of the fleet before its view is built: a
// desired one (rs, with its observation if any), or one a node reports
// that nobody desired (node and obs).
type streamRef struct {
	rs   *store.ResourceState
	node *fleet.Node
	obs  *store.ObservedStream
}

// nodeID is the node s is on.
func (s streamRef) nodeID() string {
	if s.rs != nil {
		return s.rs.NodeID
	}
	return s.node.NodeID
}

// streamID is the id of s.
func (s streamRef) streamID() string {
	if s.rs != nil {
		return s.rs.ResourceID
	}
	return s.obs.StreamID
}

// streamRefView is the view of s.
func (h *Hub) streamRefView(s streamRef, now time.Time) wire.Stream {
	if s.rs != nil {
		return h.streamView(*s.rs, now)
	}
	return wire.Stream{ID: s.obs.StreamID, NodeID: s.node.NodeID, Observed: s.node.ObservedView(*s.obs), Convergence: wire.ConvergenceUnknown}
}

// streamSummary is the convergence and the observed state (as
// observedState) of s, without a view for a reported-only stream.
func (h *Hub) streamSummary(s streamRef, now time.Time) (convergence, state string) {
	if s.rs != nil {
		v := h.streamView(*s.rs, now)
		return v.Convergence, observedState(v)
	}
	if s.obs.State == "" {
		return wire.ConvergenceUnknown, "none"
	}
	return wire.ConvergenceUnknown, s.obs.State
}

// streamSegment is one node's streams: its desired ones and, when the
// fleet knows the node, its report (both by stream id; the fleet keeps
// reports sorted).
type streamSegment struct {
	desired []store.ResourceState
	node    *fleet.Node // nil: the fleet does not know the node
}

func (sg streamSegment) observed() []store.ObservedStream {
	if sg.node == nil {
		return nil
	}
	return sg.node.Observed
}

// count is how many streams the segment lists: a desired stream the node
// reports is listed once.
func (sg streamSegment) count() int {
	obs := sg.observed()
	n := len(sg.desired) + len(obs)
	for _, rs := range sg.desired {
		if _, found := slices.BinarySearchFunc(obs, rs.ResourceID, func(o store.ObservedStream, id string) int { return cmpString(o.StreamID, id) }); found {
			n--
		}
	}
	return n
}

// merge lists the segment's streams by id.
func (sg streamSegment) merge() []streamRef {
	obs := sg.observed()
	out := make([]streamRef, 0, len(sg.desired)+len(obs))
	d := 0
	for j := range obs {
		for d < len(sg.desired) && sg.desired[d].ResourceID < obs[j].StreamID {
			out = append(out, streamRef{rs: &sg.desired[d]})
			d++
		}
		if d < len(sg.desired) && sg.desired[d].ResourceID == obs[j].StreamID {
			out = append(out, streamRef{rs: &sg.desired[d]}) // its view carries the observation
			d++
			continue
		}
		out = append(out, streamRef{node: sg.node, obs: &obs[j]})
	}
	for ; d < len(sg.desired); d++ {
		out = append(out, streamRef{rs: &sg.desired[d]})
	}
	return out
}

// streamSegments is the fleet's streams, of one node when nodeID is set,
// as one segment per node by node id.
func (h *Hub) streamSegments(ctx context.Context, nodeID string) ([]streamSegment, error) {
	states, err := h.st.ResourceStates(ctx, nodeID)
	if err != nil {
		return nil, err
	}
	states = slices.DeleteFunc(states, func(rs store.ResourceState) bool { return rs.Kind != store.KindStream })
	slices.SortFunc(states, func(a, b store.ResourceState) int {
		if c := cmpString(a.NodeID, b.NodeID); c != 0 {
			return c
		}
		return cmpString(a.ResourceID, b.ResourceID)
	})
	nodes := h.fleet.Nodes()
	if nodeID != "" {
		nodes = slices.DeleteFunc(nodes, func(n fleet.Node) bool { return n.NodeID != nodeID })
	}
	var out []streamSegment
	d, i := 0, 0
	for d < len(states) || i < len(nodes) {
		var id string
		switch {
		case i == len(nodes):
			id = states[d].NodeID
		case d == len(states):
			id = nodes[i].NodeID
		default:
			id = min(states[d].NodeID, nodes[i].NodeID)
		}
		var sg streamSegment
		start := d
		for d < len(states) && states[d].NodeID == id {
			d++
		}
		sg.desired = states[start:d]
		if i < len(nodes) && nodes[i].NodeID == id {
			sg.node = &nodes[i]
			i++
		}
		out = append(out, sg)
	}
	return out, nil
}

// pageSegments is one page of the segments' streams: only the segments the
// page reaches are merged.
func pageSegments(segs []streamSegment, page, size int) wire.Page[streamRef] {
	out := wire.Page[streamRef]{Items: []streamRef{}, Page: page, PageSize: size}
	first := (page - 1) * size
	for _, sg := range segs {
		n := sg.count()
		if out.Total+n > first && out.Total < first+size {
			refs := sg.merge()
			lo := max(first-out.Total, 0)
			hi := min(first+size-out.Total, len(refs))
			out.Items = append(out.Items, refs[lo:hi]...)
		}
		out.Total += n
	}
	return out
}

// operation is the record of one intent with its derived fields.
func (h *Hub) operation(ctx context.Context, in store.Intent) wire.Operation {
	var rs *store.ResourceState
	if got, err := h.st.GetResourceState(ctx, in.NodeID, in.Kind, in.ResourceID); err == nil {
		rs = &got
	}
	return h.operationOf(in, rs, h.opts.Now())
}

// operations turns a page of intents into operation records.
func (h *Hub) operations(ctx context.Context, pg wire.Page[store.Intent]) wire.Page[wire.Operation] {
	out := wire.Page[wire.Operation]{Items: make([]wire.Operation, len(pg.Items)), Page: pg.Page, PageSize: pg.PageSize, Total: pg.Total}
	cache := map[[3]string]*store.ResourceState{}
	now := h.opts.Now()
	for i, in := range pg.Items {
		k := [3]string{in.NodeID, in.Kind, in.ResourceID}
		rs, ok := cache[k]
		if !ok {
			if got, err := h.st.GetResourceState(ctx, in.NodeID, in.Kind, in.ResourceID); err == nil {
				rs = &got
			}
			cache[k] = rs
		}
		out.Items[i] = h.operationOf(in, rs, now)
	}
	return out
}

// deleteStreamDesired is DELETE .../streams/{id}/desired-state: the Hub
// stops managing the stream (a typo'd node or stream id otherwise stays
// blocked forever). Its pending intents are superseded, its convergence
// goes back to unknown (reason not_managed), and the node's own report of
// the stream, if any, stays visible. 404 stream_not_found when the Hub
// holds no desired state for it; If-Match as on PUT.
func (h *Hub) deleteStreamDesired(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	nodeID, streamID := r.PathValue("node_id"), r.PathValue("id")
	gen, anyGen, present, err := httpapi.ParseIfMatch(r.Header.Get("If-Match"))
	if err != nil {
		return err
	}
	by := actorOf(ctx)
	u := store.Unmanage{NodeID: nodeID, StreamID: streamID, Actor: by.id, ActorKind: by.kind,
		CorrelationID: httpapi.CorrelationID(ctx), Now: h.opts.Now()}
	if present && !anyGen {
		u.IfMatch = &gen
	}
	res, err := h.st.UnmanageStream(ctx, u)
	var conflict *store.GenerationConflictError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return httpapi.NotFound(CodeStreamNotFound, "the Hub holds no desired state for that stream")
	case errors.As(err, &conflict):
		return httpapi.GenerationConflict(conflict.Expected, conflict.Current, map[string]any{"node_id": nodeID, "stream_id": streamID})
	case err != nil:
		return h.storeFailed(err)
	}
	// The store recorded the convergence_changed to unknown; the worker,
	// which finds no desired state to evaluate, starts from it if the
	// stream is managed again.
	h.conv.baseline(nodeID+"\x00"+store.KindStream+"\x00"+streamID,
		convSeen{value: wire.ConvergenceUnknown, generation: res.Generation, asOf: res.Txn})
	h.converge(nodeID, streamID)
	h.nudge()
	w.WriteHeader(http.StatusNoContent)
	return nil
}
