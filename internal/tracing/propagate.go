package tracing

import (
	"context"
	"net/textproto"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The W3C trace context header names, which are also the message
// metadata fields that carry them through a stream or a job.
const (
	TraceParent = "traceparent"
	TraceState  = "tracestate"
)

var w3c = propagation.TraceContext{}

// fields reads header values from message metadata. Inputs copy header
// names as they arrive, and HTTP-style carriers write them canonicalized
// ("Traceparent"): both spellings are read.
type fields map[string]string

func (f fields) Get(k string) string {
	if v, ok := f[k]; ok {
		return v
	}
	return f[textproto.CanonicalMIMEHeaderKey(k)]
}

func (f fields) Set(k, v string) { f[k] = v }

func (f fields) Keys() []string {
	ks := make([]string, 0, len(f))
	for k := range f {
		ks = append(ks, k)
	}
	return ks
}

// Remote returns the span context a message's metadata fields carry in
// traceparent (and tracestate); invalid when they carry none or a
// malformed one.
func Remote(meta map[string]string) trace.SpanContext {
	if meta == nil {
		return trace.SpanContext{}
	}
	if _, ok := meta[TraceParent]; !ok {
		if _, ok := meta["Traceparent"]; !ok {
			return trace.SpanContext{}
		}
	}
	return trace.SpanContextFromContext(w3c.Extract(context.Background(), fields(meta)))
}

// End ends span, marking it failed with err when err is not nil; a nil
// span (tracing off) is left alone.
func End(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Headers returns the traceparent and tracestate values of the span in
// ctx, for an output to write into the headers of what it sends; ok is
// false when ctx holds no valid span context (tracing off, or no span).
// The values are computed once per call: an output calls it once per
// batch and writes the same strings into every record.
func Headers(ctx context.Context) (traceparent, tracestate string, ok bool) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", "", false
	}
	var c propagation.MapCarrier = make(map[string]string, 2)
	w3c.Inject(ctx, c)
	return c[TraceParent], c[TraceState], c[TraceParent] != ""
}
