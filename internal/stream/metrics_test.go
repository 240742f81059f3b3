package stream

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

// series flattens a registry into "name{label=value,...}" -> value, with
// histograms as their sample count.
func series(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName() + "{"
			for i, l := range m.GetLabel() {
				if i > 0 {
					key += ","
				}
				key += l.GetName() + "=" + l.GetValue()
			}
			key += "}"
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[key] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return out
}

func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m := NewMetrics(reg)
		if NewMetrics(reg) == nil { // registering again reuses the collectors
			t.Fatal("second NewMetrics returned nil")
		}
		in := newInput(10, 2)
		// Batches starting at a multiple of 4 fail (0, 4, 8, 12, 16).
		proc := &procFunc{fn: func(_ context.Context, b message.Batch) ([]message.Batch, error) {
			if num(b.Messages[0])%4 == 0 {
				return nil, errors.New("no")
			}
			return []message.Batch{b}, nil
		}}
		out := &testOutput{fail: func(attempt int, _ message.Batch) error {
			if attempt == 1 {
				return errors.New("first write fails")
			}
			return nil
		}}
		s := mustNew(t, Config{ID: "m", Input: in, Processors: []component.Processor{proc}, Output: out, Metrics: m})
		if err := s.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		got := series(t, reg)
		want := map[string]float64{
			"svc_stream_received_total{stream=m}":                       20,
			"svc_stream_sent_total{component=output,stream=m}":          10,
			"svc_stream_sent_total{component=error_output,stream=m}":    0,
			"svc_stream_dropped_total{stream=m}":                        10,
			"svc_stream_errors_total{component=processor,stream=m}":     5,
			"svc_stream_errors_total{component=output,stream=m}":        1,
			"svc_stream_retries_total{component=output,stream=m}":       1,
			"svc_stream_in_flight_batches{stream=m}":                    0,
			"svc_stream_processing_seconds{stream=m}":                   10,
			"svc_stream_errors_total{component=input,stream=m}":         0,
			"svc_stream_errors_total{component=buffer,stream=m}":        0,
			"svc_stream_errors_total{component=error_output,stream=m}":  0,
			"svc_stream_errors_total{component=wal,stream=m}":           0,
			"svc_stream_retries_total{component=input,stream=m}":        0,
			"svc_stream_retries_total{component=buffer,stream=m}":       0,
			"svc_stream_retries_total{component=processor,stream=m}":    0,
			"svc_stream_retries_total{component=error_output,stream=m}": 0,
			"svc_stream_retries_total{component=wal,stream=m}":          0,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("metrics (-want +got):\n%s", diff)
		}
		m.Forget("m")
		if got := series(t, reg); len(got) != 0 {
			t.Errorf("after Forget: %v", got)
		}
	})
}
