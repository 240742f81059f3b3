package hub

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/flowplane/flowplane/internal/eventlog"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/tap"
	"github.com/flowplane/flowplane/internal/wire"
)

// A live tap through the Hub (docs/hub-api.md "Live tap"). The Hub never
// connects to a node: the operator's request waits in this Hub's memory
// until the node's Agent long-polls GET agent/taps, the Agent opens the
// tap on its node and pushes sampled batches to POST
// agent/taps/{id}/samples, and the Hub writes them to the operator's
// event stream. When the operator goes away or the duration ends, the
// session is gone and the Agent's next push answers 410, which stops it.
//
// Nothing of a tap is stored: it lives in the memory of the one Hub that
// serves the operator, so with several Hubs the Agent must poll that
// Hub. A Hub that has not seen the node's Agent poll for taps lately
// answers 503 at once rather than wait for a poll that goes elsewhere.

const (
	// tapPollSeen is how recent an Agent's tap poll must be for this Hub
	// to accept a tap of its node: the longest poll, and some.
	tapPollSeen = time.Duration(wire.MaxWaitMS)*time.Millisecond + 5*time.Second
	// tapStartWait bounds how long the operator waits for the node to take
	// the tap (it long-polls; the answer to its poll hands it over).
	tapStartWait = 10 * time.Second
	// tapGrace is how long after the duration the Hub waits for the
	// node's end before it ends the stream itself.
	tapGrace = 10 * time.Second
	// tapBatches bounds the batches a session holds for its operator; the
	// Hub drops (and counts) beyond it rather than make the Agent wait.
	tapBatches = 16
	// tapMaxSessions bounds the taps open on this Hub at once.
	tapMaxSessions = 256
	// codeTapGone answers an Agent's push for a tap nobody reads any more.
	codeTapGone = "tap_closed"
)

// tapRelay is the taps open on this Hub. mu guards every field.
type tapRelay struct {
	mu       sync.Mutex
	pending  map[string][]wire.TapRequest // by node: handed out at the next poll
	wake     map[string]chan struct{}     // by node: closed when pending grows
	polled   map[string]time.Time         // by node: its Agent's last tap poll here
	sessions map[string]*tapSession       // by tap id
}

// tapSession is one operator's tap.
type tapSession struct {
	node    string
	batches chan wire.TapBatch
	dropped uint64 // samples of batches the Hub dropped; guarded by tapRelay.mu
}

func newTapRelay() *tapRelay {
	return &tapRelay{pending: map[string][]wire.TapRequest{}, wake: map[string]chan struct{}{},
		polled: map[string]time.Time{}, sessions: map[string]*tapSession{}}
}

// open registers a session and queues its request for the node's Agent.
func (t *tapRelay) open(req wire.TapRequest, node string) (*tapSession, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.sessions) >= tapMaxSessions {
		return nil, false
	}
	s := &tapSession{node: node, batches: make(chan wire.TapBatch, tapBatches)}
	t.sessions[req.TapID] = s
	t.pending[node] = append(t.pending[node], req)
	if c := t.wake[node]; c != nil {
		close(c)
		delete(t.wake, node)
	}
	return s, true
}

// close forgets a session and a request not yet handed out.
func (t *tapRelay) close(id, node string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.sessions, id)
	t.pending[node] = slices.DeleteFunc(t.pending[node], func(r wire.TapRequest) bool { return r.TapID == id })
	if len(t.pending[node]) == 0 {
		delete(t.pending, node)
	}
}

// seen reports whether node's Agent polled this Hub for taps since after.
func (t *tapRelay) seen(node string, after time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.polled[node]
	return ok && at.After(after)
}

// take returns node's pending requests, or a channel closed when one
// comes.
func (t *tapRelay) take(node string, now time.Time) ([]wire.TapRequest, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.polled[node] = now
	if reqs := t.pending[node]; len(reqs) > 0 {
		delete(t.pending, node)
		return reqs, nil
	}
	c := t.wake[node]
	if c == nil {
		c = make(chan struct{})
		t.wake[node] = c
	}
	return nil, c
}

// push hands a batch to its session without waiting; it reports false
// when no session of node has that id.
func (t *tapRelay) push(id, node string, b wire.TapBatch) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.sessions[id]
	if s == nil || s.node != node {
		return false
	}
	select {
	case s.batches <- b:
	default:
		s.dropped += uint64(len(b.Messages))
		if b.End != nil || b.Error != nil {
			// The last word must arrive: make room for it.
			select {
			case old := <-s.batches:
				s.dropped += uint64(len(old.Messages))
			default:
			}
			s.batches <- b
		}
	}
	return true
}

// hubDropped is what the Hub dropped of session id.
func (t *tapRelay) hubDropped(s *tapSession) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return s.dropped
}

// getAgentTaps long-polls the taps waiting for the Agent's node.
func (h *Hub) getAgentTaps(w http.ResponseWriter, r *http.Request) error {
	wait, err := waitMS(r)
	if err != nil {
		return err
	}
	node := agentNode(r)
	reqs, c := h.taps.take(node, time.Now())
	if reqs == nil && wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-c:
			reqs, _ = h.taps.take(node, time.Now())
		case <-timer.C:
		case <-h.closing: // shutting down: the Agent polls again elsewhere
		case <-r.Context().Done():
			return nil
		}
	}
	if reqs == nil {
		reqs = []wire.TapRequest{}
	}
	return httpapi.WriteJSON(w, http.StatusOK, wire.Page[wire.TapRequest]{Items: reqs, Page: 1, PageSize: len(reqs), Total: len(reqs)})
}

// postAgentTapSamples takes a batch of a running tap.
func (h *Hub) postAgentTapSamples(w http.ResponseWriter, r *http.Request) error {
	var b wire.TapBatch
	if err := httpapi.DecodeJSON(r, &b, MaxBodyBytes); err != nil {
		return err
	}
	if !h.taps.push(r.PathValue("id"), agentNode(r), b) {
		return httpapi.NewError(http.StatusGone, codeTapGone, "nobody reads this tap any more: stop it")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *Hub) getStreamTap(w http.ResponseWriter, r *http.Request) error {
	return h.serveTap(w, r, "stream")
}

func (h *Hub) getJobTap(w http.ResponseWriter, r *http.Request) error {
	return h.serveTap(w, r, "job")
}

// serveTap relays a tap of a node's stream or job to the operator.
func (h *Hub) serveTap(w http.ResponseWriter, r *http.Request, kind string) error {
	p, err := tap.ParseParams(r.URL.Query(), kind == "job")
	if err != nil {
		return httpapi.BadRequest(httpapi.CodeInvalidQuery, err.Error())
	}
	nodeID, id := r.PathValue("node_id"), r.PathValue("id")
	n, ok := h.fleet.Node(nodeID)
	switch {
	case !ok || n.RegisteredAt.IsZero():
		return httpapi.NotFound(CodeNodeNotFound, "no node with this id has registered with the Hub")
	case !slices.Contains(n.Capabilities, wire.CapabilityTap):
		return httpapi.Conflict(httpapi.CodeConflict, "the node does not advertise the tap capability (a version without live taps): upgrade it to tap its data")
	case !n.Online:
		return httpapi.Unavailable("unavailable", "the node is offline: a tap needs its Agent connected")
	case !h.taps.seen(nodeID, time.Now().Add(-tapPollSeen)):
		return httpapi.Unavailable("unavailable", "the node's Agent is not connected to this Hub (another Hub of the group, or not yet): open the tap on the Hub it is connected to")
	}
	uid, err := uuid.NewV7()
	if err != nil {
		return err
	}
	tapID := uid.String()
	req := wire.TapRequest{TapID: tapID, Kind: kind, ResourceID: id, Stage: p.Stage, Operator: p.Operator, Rate: p.Rate, DurationMS: p.Duration.Milliseconds()}
	s, ok := h.taps.open(req, nodeID)
	if !ok {
		return httpapi.Unavailable("unavailable", fmt.Sprintf("the Hub serves %d taps already: try again later", tapMaxSessions))
	}
	defer h.taps.close(tapID, nodeID)
	ctx := r.Context()

	// The node answers first: a problem (no such stream, stage) or an
	// empty batch saying the tap runs.
	start := time.NewTimer(tapStartWait)
	defer start.Stop()
	var first wire.TapBatch
	select {
	case first = <-s.batches:
	case <-start.C:
		return httpapi.Unavailable("unavailable", "the node did not take the tap in time: try again")
	case <-h.closing:
		return httpapi.Unavailable("unavailable", "the Hub is shutting down: try again")
	case <-ctx.Done():
		return nil
	}
	if first.Error != nil {
		return tapProblem(first.Error)
	}
	h.auditTap(ctx, kind, nodeID, id, p)

	sse := eventlog.StartSSE(w)
	deadline := time.NewTimer(p.Duration + tapGrace)
	defer deadline.Stop()
	keep := time.NewTicker(eventlog.DefaultKeepAlive)
	defer keep.Stop()
	var reported uint64
	relay := func(b wire.TapBatch) (done bool) {
		for _, m := range b.Messages {
			sse.Event("", wire.TapEventMessage, m)
		}
		counts := b.TapCounts
		counts.Dropped += h.taps.hubDropped(s)
		if b.End != nil {
			end := *b.End
			end.Dropped += h.taps.hubDropped(s)
			sse.Event("", wire.TapEventEnd, end)
			return true
		}
		if counts.Dropped != reported {
			reported = counts.Dropped
			sse.Event("", wire.TapEventDropped, counts)
		}
		return false
	}
	done := relay(first)
	for !done {
		if err := sse.Flush(); err != nil {
			return nil
		}
		select {
		case b := <-s.batches:
			done = relay(b)
		case <-keep.C:
			sse.KeepAlive()
		case <-deadline.C:
			sse.Event("", wire.TapEventEnd, wire.TapEnd{Reason: wire.TapEndNode, TapCounts: wire.TapCounts{Dropped: h.taps.hubDropped(s)}})
			done = true
		case <-h.closing: // the Hub shuts down: a long tap must not hold it up
			sse.Event("", wire.TapEventEnd, wire.TapEnd{Reason: wire.TapEndHub, TapCounts: wire.TapCounts{Dropped: h.taps.hubDropped(s)}})
			done = true
		case <-ctx.Done():
			return nil
		}
	}
	_ = sse.Flush()
	return nil
}

// tapProblem is the problem of a node that could not open a tap, as the
// node answered it.
func tapProblem(p *wire.Problem) error {
	switch p.Code {
	case httpapi.CodeInvalidQuery:
		return httpapi.BadRequest(p.Code, p.Message)
	case "stream_not_found", "job_not_found":
		return httpapi.NotFound(p.Code, p.Message)
	}
	return httpapi.NewError(http.StatusBadGateway, "unavailable", "the node could not open the tap: "+truncate(p.Message, maxErrorLen))
}

// auditTap records an accepted tap: who tapped what, where, how long.
func (h *Hub) auditTap(ctx context.Context, kind, nodeID, id string, p tap.Params) {
	where := "stage=" + p.Stage
	if kind == "job" {
		where = "operator=" + p.Operator
	}
	by := actorOf(ctx)
	rec := store.AuditRecord{OccurredAt: wire.At(h.opts.Now()), Actor: by.id, ActorKind: by.kind, Action: actionTap,
		ResourceType: kind, ResourceID: truncate(id, maxIDLen), NodeID: truncate(nodeID, maxIDLen),
		CorrelationID: httpapi.CorrelationID(ctx), Outcome: store.OutcomeAccepted,
		Message: truncate(fmt.Sprintf("%s rate=%d duration_ms=%d", where, p.Rate, p.Duration.Milliseconds()), maxErrorLen)}
	if _, err := h.st.AppendAudit(context.WithoutCancel(ctx), rec); err != nil {
		h.storeFailed(err)
	}
}

// actionTap is the audit action of a tap, accepted or rejected.
const actionTap = "tap"

// tapRoutes are the operator's live tap routes.
func (h *Hub) tapRoutes(p string) []httpapi.Route {
	doc := func(what, where, tag string) httpapi.Doc {
		return httpapi.Doc{Summary: "Live tap: sampled messages of a node's " + what + " as server-sent events", Tag: tag,
			Query: []httpapi.Param{
				{Name: where, Description: tap.QueryDoc[where]}, {Name: "rate", Type: "integer", Description: tap.QueryDoc["rate"]}, {Name: "duration", Description: tap.QueryDoc["duration"]},
			},
			ResponseMedia: "text/event-stream", Problems: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}}
	}
	return []httpapi.Route{
		{Method: "GET", Pattern: p + "/nodes/{node_id}/streams/{id}/tap", Handler: h.auditedAs("stream", fixedAction(actionTap), h.getStreamTap),
			Doc: doc("stream", "stage", tagStreams)},
		{Method: "GET", Pattern: p + "/nodes/{node_id}/jobs/{id}/tap", Handler: h.auditedAs("job", fixedAction(actionTap), h.getJobTap),
			Doc: doc("job", "operator", tagJobs)},
	}
}
