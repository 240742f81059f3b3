package dataplane

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowplane/flowplane/internal/telemetry"
)

// metrics are the svc_dataplane_* collectors of a node; streams resolve
// their series once, when they open.
type metrics struct {
	bytes        *prometheus.CounterVec // job, channel, direction
	batches      *prometheus.CounterVec // job, channel, direction
	waiting      *prometheus.GaugeVec   // job, channel
	backpressure *prometheus.CounterVec // job, channel
	links        *prometheus.GaugeVec   // state
	refused      *prometheus.CounterVec // reason
	handshakes   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_dataplane_bytes_total",
			Help: "Payload bytes of data-plane frames, by job, channel (the stream's label) and direction (sent or received).",
		}, []string{"job", "channel", "direction"}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_dataplane_batches_total",
			Help: "Record batch frames of the data plane, by job, channel and direction.",
		}, []string{"job", "channel", "direction"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "svc_dataplane_credit_waiting",
			Help: "Data-plane senders waiting for credit now, by job and channel.",
		}, []string{"job", "channel"}),
		backpressure: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_dataplane_backpressure_seconds_total",
			Help: "Time data-plane senders spent waiting for credit, by job and channel.",
		}, []string{"job", "channel"}),
		links: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "svc_dataplane_links",
			Help: "Data-plane links to peers, by state (connecting, up, down).",
		}, []string{"state"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_dataplane_connections_refused_total",
			Help: "Data-plane connections refused by this node's listener, by reason (capacity, timeout, tls, unknown_job, unknown_node, bad_secret, protocol).",
		}, []string{"reason"}),
		handshakes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svc_dataplane_handshakes",
			Help: "Accepted data-plane connections in their handshake (TLS and job proof) now.",
		}),
	}
	if reg != nil {
		m.bytes = telemetry.Register(reg, m.bytes)
		m.batches = telemetry.Register(reg, m.batches)
		m.waiting = telemetry.Register(reg, m.waiting)
		m.backpressure = telemetry.Register(reg, m.backpressure)
		m.links = telemetry.Register(reg, m.links)
		m.refused = telemetry.Register(reg, m.refused)
		m.handshakes = telemetry.Register(reg, m.handshakes)
	}
	return m
}

// forgetJob deletes a job's series once its mesh closed.
func (m *metrics) forgetJob(job string) {
	l := prometheus.Labels{"job": job}
	m.bytes.DeletePartialMatch(l)
	m.batches.DeletePartialMatch(l)
	m.waiting.DeletePartialMatch(l)
	m.backpressure.DeletePartialMatch(l)
}
