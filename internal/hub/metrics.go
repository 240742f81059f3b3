package hub

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/wire"
)

// Command label values (spec "Discovery and metrics"): the job commands,
// the stream actions, and other for anything else.
var commandLabels = []string{"job_start", "job_stop", "job_checkpoint", "job_savepoint",
	"stream_start", "stream_stop", "stream_restart", "other"}

// Outcome label values (spec).
const (
	outcomeEnqueued        = "enqueued"
	outcomeNodeUnavailable = "node_unavailable"
	outcomeCapacity        = "capacity"
	outcomeRejected        = "rejected"
)

var outcomeLabels = []string{outcomeEnqueued, wire.OpAcknowledged, wire.OpSucceeded, wire.OpFailed, wire.OpTimedOut,
	outcomeNodeUnavailable, outcomeCapacity, outcomeRejected}

// commandLabel is the command label of a command: never an id or a text.
func commandLabel(c wire.Command) string {
	switch {
	case c.Operation == wire.CommandStreamRestart:
		return "stream_restart"
	case c.Operation == wire.CommandStreamDesiredState && c.Payload.State == "running":
		return "stream_start"
	case c.Operation == wire.CommandStreamDesiredState && c.Payload.State == "stopped":
		return "stream_stop"
	case slices.Contains(commandLabels, c.Operation):
		return c.Operation
	}
	return "other"
}

// failOutcome is the outcome label of an intent the reconciler gave up on.
func failOutcome(code string) string {
	if code == reconcile.CodeNodeUnavailable {
		return outcomeNodeUnavailable
	}
	return outcomeRejected
}

// hubMetrics are the Hub's Prometheus series. registry is what the open
// /metrics serves: no label value in it is chosen by a node. reported adds
// the metrics nodes report, labelled by node id and metric name; it is
// served only behind the operator token ({prefix}/metrics).
type hubMetrics struct {
	registry         *prometheus.Registry
	reported         *prometheus.Registry
	accepted         prometheus.Counter
	total            *prometheus.CounterVec
	duration         *prometheus.HistogramVec
	reconcileSeconds prometheus.Histogram
	refused          *prometheus.CounterVec
	eventsDropped    prometheus.Counter
}

func newHubMetrics(h *Hub) *hubMetrics {
	m := &hubMetrics{registry: prometheus.NewRegistry(), reported: prometheus.NewRegistry()}
	m.accepted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "svc_hub_intents_accepted_total",
		Help: "Desired-state intents durably accepted since the Hub started.",
	})
	m.total = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "svc_command_total",
		Help: "Commands by command and outcome since the Hub started.",
	}, []string{"command", "outcome"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "svc_command_duration",
		Help:    "Seconds from a command's dispatch to its node's queue to the Agent's acknowledgement.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"command"})
	m.reconcileSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "svc_hub_reconcile_pass_seconds",
		Help:    "Duration of one reconciliation pass.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "svc_hub_registrations_refused_total",
		Help: "Registrations refused for capacity since the Hub started, by reason (rate: SVC_HUB_REGISTER_RATE; max_nodes: SVC_HUB_MAX_NODES).",
	}, []string{"reason"})
	m.eventsDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "svc_hub_node_events_dropped_total",
		Help: "Events nodes caused beyond their budget (120 a minute, 240 at once), dropped since the Hub started.",
	})
	leader := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "svc_hub_leader",
		Help: "1 while this Hub holds the leader lease and runs the reconciler, 0 while it stands by.",
	}, func() float64 {
		if h.lead.mayAct(h.opts.Now()) {
			return 1
		}
		return 0
	})
	epoch := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "svc_hub_lease_epoch",
		Help: "Epoch of the leader lease as this Hub last saw it; it grows by one at every change of leader.",
	}, func() float64 { return float64(h.lead.currentEpoch()) })
	m.refused.WithLabelValues(refusedRate)
	m.refused.WithLabelValues(refusedMaxNodes)
	// Every label combination exists from the start, so rates work at once.
	for _, c := range commandLabels {
		m.duration.WithLabelValues(c)
		for _, o := range outcomeLabels {
			m.total.WithLabelValues(c, o)
		}
	}
	m.registry.MustRegister(m.accepted, m.total, m.duration, m.reconcileSeconds, m.refused, m.eventsDropped, leader, epoch, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), fleetCollector{h})
	m.reported.MustRegister(reportedCollector{h})
	return m
}

func (m *hubMetrics) command(label, outcome string) {
	m.total.WithLabelValues(label, outcome).Inc()
}

// fleetCollector exposes fleet gauges.
type fleetCollector struct{ h *Hub }

// reportedCollector exposes the metrics nodes report. Node ids match
// wire.IDPattern and metric names Prometheus' name pattern (the Hub
// refuses reports otherwise); a node reports at most MaxReportMetrics.
type reportedCollector struct{ h *Hub }

func (c reportedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descReported }

func (c reportedCollector) Collect(ch chan<- prometheus.Metric) {
	for _, n := range c.h.fleet.Nodes() {
		for k, v := range n.Metrics {
			ch <- prometheus.MustNewConstMetric(descReported, prometheus.GaugeValue, v, n.NodeID, k)
		}
	}
}

var (
	descNodes    = prometheus.NewDesc("svc_hub_nodes", "Registered nodes by liveness status.", []string{"status"}, nil)
	descInflight = prometheus.NewDesc("svc_hub_attempts_in_flight", "Command attempts dispatched and not finished.", nil, nil)
	descReported = prometheus.NewDesc("svc_node_reported", "A metric an Agent reported, by node and metric name.", []string{"node_id", "metric"}, nil)
)

func (c fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descNodes
	ch <- descInflight
}

func (c fleetCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[string]float64{reconcile.StatusOnline: 0, reconcile.StatusUnavailable: 0}
	for _, n := range c.h.fleet.Nodes() {
		counts[n.Status]++
	}
	for s, v := range counts {
		ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, v, s)
	}
	ch <- prometheus.MustNewConstMetric(descInflight, prometheus.GaugeValue, float64(c.h.fleet.InFlight()))
}

// NodeMetrics is one node's reported metrics in the JSON form of /metrics.
type NodeMetrics struct {
	NodeID  string             `json:"node_id"`
	Metrics map[string]float64 `json:"metrics"`
}

// MetricsJSON is the JSON form of GET /metrics.
type MetricsJSON struct {
	Items     []NodeMetrics      `json:"items"`
	Aggregate map[string]float64 `json:"aggregate"`
}

// getPublicMetrics serves the open top-level /metrics: Prometheus text of
// the Hub's registry only, whose label values the Hub chooses. The metrics
// nodes report (svc_node_reported), the JSON form and the node_id filter
// stay behind the operator token at {prefix}/metrics.
func (h *Hub) getPublicMetrics(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if q.Has("format") || q.Has("node_id") {
		e := httpapi.BadRequest(httpapi.CodeInvalidQuery,
			"/metrics serves Prometheus text only; format and node_id are served at "+h.prefix+"/metrics")
		e.Details = map[string]any{"parameter": firstPresent(q, "format", "node_id")}
		return e
	}
	promhttp.HandlerFor(h.metrics.registry, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	return nil
}

func firstPresent(q url.Values, names ...string) string {
	for _, n := range names {
		if q.Has(n) {
			return n
		}
	}
	return ""
}

// getMetrics serves Prometheus text, or the JSON form with ?format=json or
// Accept: application/json; ?node_id= narrows both to one node's reports.
func (h *Hub) getMetrics(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	format := q.Get("format")
	if format != "" && format != "json" && format != "text" && format != "prometheus" {
		return httpapi.BadRequest(httpapi.CodeInvalidQuery, "format must be json or text")
	}
	nodeID := q.Get("node_id")
	if format == "json" || (format == "" && strings.Contains(r.Header.Get("Accept"), "application/json")) {
		return httpapi.WriteJSON(w, http.StatusOK, h.metricsJSON(nodeID))
	}
	if nodeID == "" {
		promhttp.HandlerFor(prometheus.Gatherers{h.metrics.registry, h.metrics.reported}, promhttp.HandlerOpts{}).ServeHTTP(w, r)
		return nil
	}
	// One node: its reported metrics only.
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	var b strings.Builder
	b.WriteString("# HELP svc_node_reported A metric an Agent reported, by node and metric name.\n# TYPE svc_node_reported gauge\n")
	for _, nm := range h.metricsJSON(nodeID).Items {
		for _, k := range sortedKeys(nm.Metrics) {
			fmt.Fprintf(&b, "svc_node_reported{node_id=%q,metric=%q} %v\n", nm.NodeID, k, nm.Metrics[k])
		}
	}
	_, err := w.Write([]byte(b.String()))
	return err
}

func (h *Hub) metricsJSON(nodeID string) MetricsJSON {
	out := MetricsJSON{Items: []NodeMetrics{}, Aggregate: map[string]float64{}}
	for _, n := range h.fleet.Nodes() {
		if nodeID != "" && n.NodeID != nodeID {
			continue
		}
		m := make(map[string]float64, len(n.Metrics))
		for k, v := range n.Metrics {
			m[k] = v
			out.Aggregate[k] += v
		}
		out.Items = append(out.Items, NodeMetrics{NodeID: n.NodeID, Metrics: m})
	}
	sort.Slice(out.Items, func(i, j int) bool { return out.Items[i].NodeID < out.Items[j].NodeID })
	return out
}

func sortedKeys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
