package stream

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowplane/flowplane/internal/telemetry"
)

// kind names the part of a stream an error, retry or send belongs to; it is
// the value of the "component" metric label.
type kind string

const (
	kindInput       kind = "input"
	kindBuffer      kind = "buffer"
	kindProcessor   kind = "processor"
	kindOutput      kind = "output"
	kindErrorOutput kind = "error_output"
	kindWAL         kind = "wal"
	kindTemporary   kind = "temporary"
)

var allKinds = []kind{kindInput, kindBuffer, kindProcessor, kindOutput, kindErrorOutput, kindWAL}

// Metrics are the Prometheus collectors shared by every stream of a
// process. Labels are the stream id and, where useful, the component kind;
// never message content.
type Metrics struct {
	received   *prometheus.CounterVec
	sent       *prometheus.CounterVec
	errors     *prometheus.CounterVec
	dropped    *prometheus.CounterVec
	retries    *prometheus.CounterVec
	inFlight   *prometheus.GaugeVec
	walBacklog *prometheus.GaugeVec
	processing *prometheus.HistogramVec
}

// NewMetrics creates the stream collectors and registers them with reg
// (nil: not registered). Collectors already registered under the same
// names are reused, so calling it twice with one registry is harmless.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_stream_received_total", Help: "Messages read from the stream's input or replayed from its WAL.",
		}, []string{"stream"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_stream_sent_total", Help: "Messages accepted by the output or error_output.",
		}, []string{"stream", "component"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_stream_errors_total", Help: "Failures by component kind (each failed attempt counts).",
		}, []string{"stream", "component"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_stream_dropped_total", Help: "Messages dropped after a processor failure with no error_output.",
		}, []string{"stream"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_stream_retries_total", Help: "Retried writes and reads by component kind.",
		}, []string{"stream", "component"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "svc_stream_in_flight_batches", Help: "Batches in the pipeline, not yet acknowledged.",
		}, []string{"stream"}),
		walBacklog: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "svc_stream_wal_backlog_bytes", Help: "Bytes of WAL entries not yet delivered (streams with durability only).",
		}, []string{"stream"}),
		processing: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "svc_stream_processing_seconds",
			Help:    "Time the processors spent on one input batch, failed ones included.",
			Buckets: prometheus.ExponentialBuckets(1e-5, 4, 10),
		}, []string{"stream"}),
	}
	if reg != nil {
		m.received = telemetry.Register(reg, m.received)
		m.sent = telemetry.Register(reg, m.sent)
		m.errors = telemetry.Register(reg, m.errors)
		m.dropped = telemetry.Register(reg, m.dropped)
		m.retries = telemetry.Register(reg, m.retries)
		m.inFlight = telemetry.Register(reg, m.inFlight)
		m.walBacklog = telemetry.Register(reg, m.walBacklog)
		m.processing = telemetry.Register(reg, m.processing)
	}
	return m
}

// Forget deletes the series of one stream, e.g. once it is removed from the
// configuration.
func (m *Metrics) Forget(streamID string) {
	l := prometheus.Labels{"stream": streamID}
	m.received.DeletePartialMatch(l)
	m.sent.DeletePartialMatch(l)
	m.errors.DeletePartialMatch(l)
	m.dropped.DeletePartialMatch(l)
	m.retries.DeletePartialMatch(l)
	m.inFlight.DeletePartialMatch(l)
	m.walBacklog.DeletePartialMatch(l)
	m.processing.DeletePartialMatch(l)
}

// streamMetrics holds one stream's series, resolved once so the hot path
// does no label lookups.
type streamMetrics struct {
	received, sentOut, sentErr, dropped prometheus.Counter
	errors, retries                     map[kind]prometheus.Counter
	inFlight, walBacklog                prometheus.Gauge
	processing                          prometheus.Observer
}

// forStream resolves the series of stream id; the WAL backlog gauge only
// for a stream with a WAL, the temporary errors and retries only for one
// with temporary tables.
func (m *Metrics) forStream(id string, withWAL, withTemporaries bool) *streamMetrics {
	sm := &streamMetrics{
		received:   m.received.WithLabelValues(id),
		sentOut:    m.sent.WithLabelValues(id, string(kindOutput)),
		sentErr:    m.sent.WithLabelValues(id, string(kindErrorOutput)),
		dropped:    m.dropped.WithLabelValues(id),
		errors:     make(map[kind]prometheus.Counter, len(allKinds)),
		retries:    make(map[kind]prometheus.Counter, len(allKinds)),
		inFlight:   m.inFlight.WithLabelValues(id),
		processing: m.processing.WithLabelValues(id),
	}
	if withWAL {
		sm.walBacklog = m.walBacklog.WithLabelValues(id)
	}
	kinds := allKinds
	if withTemporaries {
		kinds = append(kinds[:len(kinds):len(kinds)], kindTemporary)
	}
	for _, k := range kinds {
		sm.errors[k] = m.errors.WithLabelValues(id, string(k))
		sm.retries[k] = m.retries.WithLabelValues(id, string(k))
	}
	return sm
}
