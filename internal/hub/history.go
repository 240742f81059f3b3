package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/history"
	"github.com/flowplane/flowplane/internal/wire"
)

// History is GET .../history: the per-second rates of a series' counters
// at every step the Hub kept (docs/hub-api.md "History").
type History struct {
	StepMS      int64           `json:"step_ms"`
	RetentionMS int64           `json:"retention_ms"`
	Series      []HistorySeries `json:"series"`
}

// HistorySeries is one counter's rates: points [unix ms, per second],
// oldest first.
type HistorySeries struct {
	Name   string       `json:"name"`
	Points [][2]float64 `json:"points"`
}

// The series names of the history: a stream's, a node's and the fleet's
// messages, a job's records.
var (
	streamHistoryNames = []string{"received", "sent", "errors"}
	jobHistoryNames    = []string{"records_in", "records_out"}
	// nodeMetricNames are the node metrics (as reported) behind them.
	nodeMetricNames = map[string]string{"messages_received": "received", "messages_sent": "sent", "stream_errors": "errors"}
)

func historyStep(o Options) time.Duration {
	if o.HistoryStep > 0 {
		return o.HistoryStep
	}
	return history.DefaultStep
}

// historyRoutes are the history routes.
func (h *Hub) historyRoutes(p string) []httpapi.Route {
	doc := func(summary, tag string) httpapi.Doc {
		return httpapi.Doc{Summary: summary, Tag: tag, Response: History{}}
	}
	return []httpapi.Route{
		{Method: "GET", Pattern: p + "/history", Handler: h.getHistory(func(*http.Request) (string, []string) { return "fleet", streamHistoryNames }),
			Doc: doc("The fleet's message rates over the last hour (kept in memory)", tagSystem)},
		{Method: "GET", Pattern: p + "/nodes/{node_id}/history", Handler: h.getHistory(func(r *http.Request) (string, []string) {
			return "node/" + r.PathValue("node_id"), streamHistoryNames
		}), Doc: doc("A node's message rates over the last hour (kept in memory)", tagNodes)},
		{Method: "GET", Pattern: p + "/nodes/{node_id}/streams/{id}/history", Handler: h.getHistory(func(r *http.Request) (string, []string) {
			return "stream/" + r.PathValue("node_id") + "/" + r.PathValue("id"), streamHistoryNames
		}), Doc: doc("A stream's message rates over the last hour (kept in memory)", tagStreams)},
		{Method: "GET", Pattern: p + "/jobs/{id}/history", Handler: h.getHistory(func(r *http.Request) (string, []string) {
			return "job/" + r.PathValue("id"), jobHistoryNames
		}), Doc: doc("A job's record rates over the last hour (kept in memory)", tagJobs)},
	}
}

// getHistory answers the kept points of the series key names, one series
// per counter name (empty when the Hub has not seen it twice yet).
func (h *Hub) getHistory(key func(*http.Request) (string, []string)) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		k, names := key(r)
		step := historyStep(h.opts)
		out := History{StepMS: step.Milliseconds(), RetentionMS: step.Milliseconds() * int64(history.DefaultSize), Series: make([]HistorySeries, len(names))}
		pts := h.history.Points(k)
		for i, name := range names {
			s := HistorySeries{Name: name, Points: make([][2]float64, 0, len(pts))}
			for _, p := range pts {
				if v, ok := p.Rates[name]; ok {
					s.Points = append(s.Points, [2]float64{float64(p.At.UnixMilli()), v})
				}
			}
			out.Series[i] = s
		}
		return httpapi.WriteJSON(w, http.StatusOK, out)
	}
}

// historyLoop samples the fleet's counters at every step while the Hub
// serves: what the nodes last reported of their streams and metrics, and
// the jobs' task records.
func (h *Hub) historyLoop(ctx context.Context) {
	step := historyStep(h.opts)
	tick := time.NewTicker(step)
	defer tick.Stop()
	for {
		h.sampleHistory(ctx, step)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sampleHistory records one observation of every series.
func (h *Hub) sampleHistory(ctx context.Context, step time.Duration) {
	obs := map[string]history.Counters{}
	fleetC := history.Counters{}
	for _, n := range h.fleet.Nodes() {
		nc := history.Counters{}
		for metric, name := range nodeMetricNames {
			if v, ok := n.Metrics[metric]; ok {
				nc[name] = v
				fleetC[name] += v
			}
		}
		obs["node/"+n.NodeID] = nc
		for id, c := range n.Counters {
			obs["stream/"+n.NodeID+"/"+id] = history.Counters{"received": float64(c.Received), "sent": float64(c.Sent), "errors": float64(c.Errors)}
		}
	}
	obs["fleet"] = fleetC
	if jobs, err := h.st.ObservedJobs(ctx); err == nil {
		// A split job's tasks are on several nodes: its records are summed.
		ids := map[string]history.Counters{}
		nodes := make([]string, 0, len(jobs))
		for node := range jobs {
			nodes = append(nodes, node)
		}
		sort.Strings(nodes)
		for _, node := range nodes {
			for _, o := range jobs[node] {
				var d wire.JobObservation
				if json.Unmarshal(o.Detail, &d) != nil {
					continue
				}
				c := ids[o.JobID]
				if c == nil {
					c = history.Counters{"records_in": 0, "records_out": 0}
					ids[o.JobID] = c
				}
				for _, t := range d.Tasks {
					c["records_in"] += float64(t.RecordsIn)
					c["records_out"] += float64(t.RecordsOut)
				}
			}
		}
		for id, c := range ids {
			obs["job/"+id] = c
		}
	}
	h.history.Observe(h.opts.Now(), obs, step*history.DefaultSize)
}
