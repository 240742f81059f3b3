package hub

import (
	"net/http"
	"slices"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/wire"
)

// Status is GET /status: stream totals summed over the registered nodes'
// latest reports, node totals, the Hub's version and uptime.
type Status struct {
	Version   string       `json:"version,omitempty"`
	StartedAt wire.Time    `json:"started_at"`
	UptimeMS  int64        `json:"uptime_ms"`
	Ready     bool         `json:"ready"`
	Storage   string       `json:"storage"`
	Streams   StreamTotals `json:"streams"`
	Nodes     NodeTotals   `json:"nodes"`
	Jobs      JobTotals    `json:"jobs"`
}

// JobTotals count the Hub's jobs by desired state, by observed state
// ("not_observed" for a job no node reported) and by convergence, for the
// console's overview.
type JobTotals struct {
	Total       int            `json:"total"`
	Desired     map[string]int `json:"desired"`
	Observed    map[string]int `json:"observed"`
	Convergence map[string]int `json:"convergence"`
}

// StreamTotals count reported streams (spec: total, running, failed), and
// every stream of GET /streams (desired or reported) by convergence, for
// the console's overview.
type StreamTotals struct {
	Total       int            `json:"total"`
	Running     int            `json:"running"`
	Failed      int            `json:"failed"`
	Convergence map[string]int `json:"convergence"`
}

// NodeTotals count registered nodes by liveness and mode.
type NodeTotals struct {
	Total       int `json:"total"`
	Online      int `json:"online"`
	Unavailable int `json:"unavailable"`
	Draining    int `json:"draining"`
	Maintenance int `json:"maintenance"`
}

func (h *Hub) getStatus(w http.ResponseWriter, r *http.Request) error {
	now := h.opts.Now()
	s := Status{Version: h.opts.Version, StartedAt: wire.At(h.startedAt), UptimeMS: now.Sub(h.startedAt).Milliseconds(),
		Ready: h.ready.Load() && !h.storageDown.Load(), Storage: "ok"}
	if h.storageDown.Load() {
		s.Storage = "unavailable"
	}
	segs, err := h.streamSegments(r.Context(), "")
	if err != nil {
		return problemFor(err, anyResource)
	}
	s.Streams.Convergence = map[string]int{}
	for _, sg := range segs {
		// A stream nobody desired is unknown: count those without
		// building them.
		for _, rs := range sg.desired {
			s.Streams.Convergence[h.convergenceOf(rs, now).Value]++
		}
		if n := sg.count() - len(sg.desired); n > 0 {
			s.Streams.Convergence[wire.ConvergenceUnknown] += n
		}
	}
	for _, n := range h.fleet.Nodes() {
		if n.RegisteredAt.IsZero() {
			continue
		}
		s.Nodes.Total++
		if n.Online {
			s.Nodes.Online++
		} else {
			s.Nodes.Unavailable++
		}
		switch n.Mode {
		case wire.NodeModeDraining:
			s.Nodes.Draining++
		case wire.NodeModeMaintenance:
			s.Nodes.Maintenance++
		}
		for _, o := range n.Observed {
			s.Streams.Total++
			switch o.State {
			case "running":
				s.Streams.Running++
			case "failed":
				s.Streams.Failed++
			}
		}
	}
	jobs, err := h.st.JobStates(r.Context())
	if err != nil {
		return problemFor(err, anyResource)
	}
	s.Jobs = JobTotals{Desired: map[string]int{}, Observed: map[string]int{}, Convergence: map[string]int{}}
	for _, js := range jobs {
		v := h.jobView(js, now)
		s.Jobs.Total++
		s.Jobs.Desired[v.Desired.State]++
		observed := v.Observed.State
		if observed == "" {
			observed = wire.TaskNotObserved
		}
		s.Jobs.Observed[observed]++
		s.Jobs.Convergence[v.Convergence]++
	}
	return httpapi.WriteJSON(w, http.StatusOK, s)
}

// OperationsStatus is GET /operations/status: bounded diagnostics.
type OperationsStatus struct {
	ByState            map[string]int `json:"by_state"`
	OldestPendingAgeMS int64          `json:"oldest_pending_age_ms"`
	OutboxDepth        int            `json:"outbox_depth"`
	InFlight           int            `json:"in_flight"`
	ReconcilerLagMS    int64          `json:"reconciler_lag_ms"`
	Nodes              []NodeQueue    `json:"nodes"`
	NodesTruncated     bool           `json:"nodes_truncated,omitempty"`
}

// NodeQueue is one node's queue depth.
type NodeQueue struct {
	NodeID   string `json:"node_id"`
	Queued   int    `json:"queued"`
	InFlight int    `json:"in_flight"`
}

// maxStatusNodes bounds the per-node rows of /operations/status: the
// deepest queues first.
const maxStatusNodes = 100

func (h *Hub) getOperationsStatus(w http.ResponseWriter, r *http.Request) error {
	st, err := h.st.OperationStats(r.Context())
	if err != nil {
		return problemFor(err, anyResource)
	}
	now := h.opts.Now()
	out := OperationsStatus{ByState: st.ByState, OutboxDepth: st.OutboxDepth, Nodes: []NodeQueue{}}
	if !st.OldestPendingAt.IsZero() {
		out.OldestPendingAgeMS = now.Sub(st.OldestPendingAt).Milliseconds()
	}
	if last := h.lastPass.Load(); last > 0 {
		out.ReconcilerLagMS = max(now.UnixMilli()-last, 0)
	}
	inFlight, queues := h.fleet.Queues()
	out.InFlight = inFlight
	for _, q := range queues {
		out.Nodes = append(out.Nodes, NodeQueue{NodeID: q.NodeID, Queued: q.Queued, InFlight: q.InFlight})
	}
	slices.SortFunc(out.Nodes, func(a, b NodeQueue) int {
		if a.InFlight != b.InFlight {
			return b.InFlight - a.InFlight
		}
		return cmpString(a.NodeID, b.NodeID)
	})
	if len(out.Nodes) > maxStatusNodes {
		out.Nodes, out.NodesTruncated = out.Nodes[:maxStatusNodes], true
	}
	return httpapi.WriteJSON(w, http.StatusOK, out)
}

func (h *Hub) getComponents(w http.ResponseWriter, r *http.Request) error {
	page, size, err := httpapi.ParsePage(r)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, httpapi.Paginate(h.opts.Registry.Catalog(), page, size))
}

func (h *Hub) getComponent(w http.ResponseWriter, r *http.Request) error {
	d, ok := h.opts.Registry.Describe(r.PathValue("kind"), r.PathValue("name"))
	if !ok {
		return httpapi.NotFound("component_not_found", "no "+quote(r.PathValue("kind"))+" component named "+quote(r.PathValue("name")))
	}
	return httpapi.WriteJSON(w, http.StatusOK, d)
}

func (h *Hub) getSchema(w http.ResponseWriter, r *http.Request) error {
	return httpapi.WriteJSON(w, http.StatusOK, h.schema)
}
