package kernel

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowplane/flowplane/internal/telemetry"
)

// Metrics are the svc_job_* collectors shared by every job of a node. A nil
// *Metrics disables them.
type Metrics struct {
	recordsIn    *prometheus.CounterVec
	recordsOut   *prometheus.CounterVec
	lateDropped  *prometheus.CounterVec
	dropped      *prometheus.CounterVec
	ckptFailures *prometheus.CounterVec
	restarts     *prometheus.CounterVec
	wmLag        *prometheus.GaugeVec
	ckptDuration *prometheus.GaugeVec
	stateBytes   *prometheus.GaugeVec
}

// NewMetrics creates the job collectors and registers them with reg (nil:
// not registered). Collectors already registered under the same names are
// reused, so calling it twice with one registry is harmless.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	cv := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	gv := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"job"})
	}
	m := &Metrics{
		recordsIn:    cv("svc_job_records_in_total", "Records an operator was given.", "job", "operator"),
		recordsOut:   cv("svc_job_records_out_total", "Records an operator emitted.", "job", "operator"),
		lateDropped:  cv("svc_job_late_records_dropped_total", "Late records dropped (late_event_policy drop).", "job", "operator"),
		dropped:      cv("svc_job_records_dropped_total", "Records dropped by the kernel, by reason (timestamp: event time missing or unparsable).", "job", "operator", "reason"),
		ckptFailures: cv("svc_job_checkpoint_failures_total", "Checkpoints and savepoints abandoned (failed or timed out).", "job"),
		restarts:     cv("svc_job_restarts_total", "Restarts of the job after a task failure.", "job"),
		wmLag:        gv("svc_job_watermark_lag_ms", "Processing time minus the lowest task watermark."),
		ckptDuration: gv("svc_job_checkpoint_duration_ms", "Duration of the last completed checkpoint, barrier injection to manifest."),
		stateBytes:   gv("svc_job_state_bytes", "Live and on-disk state bytes of every task at the last checkpoint."),
	}
	if reg != nil {
		m.recordsIn = telemetry.Register(reg, m.recordsIn)
		m.recordsOut = telemetry.Register(reg, m.recordsOut)
		m.lateDropped = telemetry.Register(reg, m.lateDropped)
		m.dropped = telemetry.Register(reg, m.dropped)
		m.ckptFailures = telemetry.Register(reg, m.ckptFailures)
		m.restarts = telemetry.Register(reg, m.restarts)
		m.wmLag = telemetry.Register(reg, m.wmLag)
		m.ckptDuration = telemetry.Register(reg, m.ckptDuration)
		m.stateBytes = telemetry.Register(reg, m.stateBytes)
	}
	return m
}

// Forget deletes the series of one job, e.g. once it is removed from the
// configuration.
func (m *Metrics) Forget(jobID string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"job": jobID}
	for _, v := range []*prometheus.MetricVec{
		m.recordsIn.MetricVec, m.recordsOut.MetricVec, m.lateDropped.MetricVec, m.dropped.MetricVec,
		m.ckptFailures.MetricVec, m.restarts.MetricVec, m.wmLag.MetricVec, m.ckptDuration.MetricVec, m.stateBytes.MetricVec,
	} {
		v.DeletePartialMatch(l)
	}
}

// counter is a resolved series, or a no-op when metrics are disabled, so the
// hot path does one add per batch and no label lookups.
type counter struct{ c prometheus.Counter }

func (c counter) add(n int) {
	if c.c != nil && n > 0 {
		c.c.Add(float64(n))
	}
}

func (m *Metrics) opCounter(v func(*Metrics) *prometheus.CounterVec, labels ...string) counter {
	if m == nil {
		return counter{}
	}
	return counter{v(m).WithLabelValues(labels...)}
}

func (m *Metrics) setGauge(v func(*Metrics) *prometheus.GaugeVec, jobID string, x float64) {
	if m != nil {
		v(m).WithLabelValues(jobID).Set(x)
	}
}
