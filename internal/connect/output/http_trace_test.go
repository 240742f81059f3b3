package output

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/flowplane/flowplane/internal/tracing"
)

// TestHTTPWritesTraceContext: the request of a traced batch carries the
// batch's traceparent and tracestate; an untraced one carries neither.
func TestHTTPWritesTraceContext(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	got := make(chan http.Header, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	t.Cleanup(srv.Close)
	o := buildHTTP(t, map[string]any{"url": srv.URL})
	sc := tracing.Remote(map[string]string{tracing.TraceParent: tp, tracing.TraceState: "v=1"})
	if err := o.Write(trace.ContextWithSpanContext(testCtx(t), sc), batch(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if h := <-got; h.Get("traceparent") != tp || h.Get("tracestate") != "v=1" {
		t.Errorf("traced request: traceparent %q tracestate %q", h.Get("traceparent"), h.Get("tracestate"))
	}
	if err := o.Write(testCtx(t), batch(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if h := <-got; h.Get("traceparent") != "" || h.Get("tracestate") != "" {
		t.Errorf("untraced request: traceparent %q tracestate %q", h.Get("traceparent"), h.Get("tracestate"))
	}
}
