package kernel

import (
	"context"
	"encoding/binary"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/operator"
	"github.com/flowplane/flowplane/internal/tracing"
)

// Tracing a job (Options.Tracer): a source task makes a span per batch it
// reads, its parent the first traceparent among the batch's messages; any
// other task makes a span per data element it receives, its parent the
// span context the element carries. An element carries the context of the
// span that was current when its first record was buffered (router.go), in
// a channel or, across nodes, in its frame (codec.go). Sinks write with
// the span's context, so an output puts it in the headers it sends.

// chainSpan starts the span of one batch through task t's chain and
// returns the context to push it with. The caller checked that the job is
// traced; parent is the span to continue, invalid for a new trace.
func (t *task) chainSpan(ctx context.Context, parent trace.SpanContext, n int) (context.Context, trace.Span) {
	tr := t.r.j.opts.Tracer
	if parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, parent)
	}
	if t.spanName == "" {
		t.spanName = "job " + t.r.j.plan.JobID + " " + t.spec.ID
	}
	ctx, span := tr.Start(ctx, t.spanName)
	if span.IsRecording() { // an unsampled batch does not pay for them
		span.SetAttributes(
			attribute.String("flowplane.job", t.r.j.plan.JobID),
			attribute.String("flowplane.task", t.spec.ID),
			attribute.Int("flowplane.records", n),
		)
	}
	return ctx, span
}

// sourceParent is the span context the first traced message of b carries.
func sourceParent(b message.Batch) trace.SpanContext {
	for i := range b.Messages {
		if sc := tracing.Remote(b.Messages[i].Meta.Fields); sc.IsValid() {
			return sc
		}
	}
	return trace.SpanContext{}
}

// spanOf is the span context of ctx to carry with an element, nil when
// there is none.
func spanOf(ctx context.Context) *trace.SpanContext {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	return &sc
}

// tagTrace starts the optional trailer of a batch frame: the W3C trace
// context of the element (trace id, span id, flags, then the tracestate as
// a string). A frame without it is what releases before tracing sent; a
// node of such a release rejects a frame with it, so a split job's nodes
// run one release when tracing is on.
const tagTrace byte = 0x01

func appendTrace(b []byte, sc *trace.SpanContext) []byte {
	if sc == nil {
		return b
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	b = append(b, tagTrace)
	b = append(b, tid[:]...)
	b = append(b, sid[:]...)
	b = append(b, byte(sc.TraceFlags()))
	return appendString(b, sc.TraceState().String())
}

// readTrace reads the trailer appendTrace wrote; p must hold exactly it.
func readTrace(p []byte) (*trace.SpanContext, error) {
	const fixed = 1 + 16 + 8 + 1
	if len(p) < fixed+1 || p[0] != tagTrace {
		return nil, errCorrupt
	}
	var c trace.SpanContextConfig
	copy(c.TraceID[:], p[1:17])
	copy(c.SpanID[:], p[17:25])
	c.TraceFlags = trace.TraceFlags(p[25])
	n, k := binary.Uvarint(p[fixed:])
	if k <= 0 || n != uint64(len(p)-fixed-k) {
		return nil, errCorrupt
	}
	if n > 0 {
		ts, err := trace.ParseTraceState(string(p[fixed+k:]))
		if err != nil {
			return nil, errCorrupt
		}
		c.TraceState = ts
	}
	c.Remote = true
	sc := trace.NewSpanContext(c)
	if !sc.IsValid() {
		return nil, errCorrupt
	}
	return &sc, nil
}

// tracedPush pushes an element's records through the task's chain in a
// span of their own when the element carries a span context.
func (t *task) tracedPush(ctx context.Context, o *chainOp, e element) error {
	if e.tc == nil || t.r.j.opts.Tracer == nil {
		return t.push(ctx, o, e.recs)
	}
	ctx, span := t.chainSpan(ctx, *e.tc, len(e.recs))
	err := t.push(ctx, o, e.recs)
	tracing.End(span, err)
	return err
}

// tracedSource pushes a source batch's records in the batch's span.
func (t *task) tracedSource(ctx context.Context, b message.Batch, recs []operator.Record) error {
	ctx, span := t.chainSpan(ctx, sourceParent(b), len(recs))
	err := t.push(ctx, t.src, recs)
	tracing.End(span, err)
	return err
}
