package tracing_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/flowplane/flowplane/internal/tracing"
)

const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestRemote reads traceparent (and tracestate) from message metadata as
// inputs copy headers: lower case or canonicalized, and rejects what is
// not a W3C traceparent.
func TestRemote(t *testing.T) {
	for _, tc := range []struct {
		name  string
		meta  map[string]string
		valid bool
		state string
	}{
		{"none", nil, false, ""},
		{"other fields", map[string]string{"kafka_topic": "t"}, false, ""},
		{"lower case", map[string]string{"traceparent": tp, "tracestate": "v=1"}, true, "v=1"},
		{"canonical", map[string]string{"Traceparent": tp, "Tracestate": "v=1"}, true, "v=1"},
		{"malformed", map[string]string{"traceparent": "00-zz-00f067aa0ba902b7-01"}, false, ""},
		{"zero trace id", map[string]string{"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := tracing.Remote(tc.meta)
			if sc.IsValid() != tc.valid {
				t.Fatalf("valid = %v, want %v", sc.IsValid(), tc.valid)
			}
			if !tc.valid {
				return
			}
			if sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || !sc.IsSampled() || !sc.IsRemote() {
				t.Errorf("span context %+v", sc)
			}
			if sc.TraceState().String() != tc.state {
				t.Errorf("tracestate %q, want %q", sc.TraceState().String(), tc.state)
			}
		})
	}
}

// TestHeaders writes the span context of ctx as header values, and
// nothing without one.
func TestHeaders(t *testing.T) {
	if _, _, ok := tracing.Headers(context.Background()); ok {
		t.Error("headers from a context without a span")
	}
	sc := tracing.Remote(map[string]string{"traceparent": tp, "tracestate": "v=1"})
	p, s, ok := tracing.Headers(trace.ContextWithSpanContext(context.Background(), sc))
	if !ok || p != tp || s != "v=1" {
		t.Errorf("Headers = %q, %q, %v; want %q, v=1", p, s, ok, tp)
	}
}
