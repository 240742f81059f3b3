package stream

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/tracing"
)

// maxScan bounds the messages of a batch whose metadata is read for a
// trace context, and so the links a batch span keeps to other traces.
const maxScan = 16

// batchSpanOpts are the start options of every batch span, made once.
var batchSpanOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}

// batchTrace is the trace of one batch in flight: its span and the context
// the spans of its stages (and the headers outputs write) descend from.
// The zero value is tracing off: every method then does nothing.
type batchTrace struct {
	ctx  context.Context
	span trace.Span
	// recording: the batch was sampled. An unsampled batch makes no stage
	// spans (they would not be recorded either); one with an unsampled
	// parent still carries that context to the output's headers, so that
	// downstream keeps the decision. (An unsampled root has no span at
	// all: tracing.Provider's tracer decides roots before the SDK.)
	recording bool
}

// spanNames are the names of the stage spans, made once per stream so
// that a traced batch does not format them.
type spanNames struct {
	batch      string
	processors []string
}

func newSpanNames(cfg Config, staged int) spanNames {
	n := spanNames{batch: "stream " + cfg.ID, processors: make([]string, len(cfg.Processors))}
	for i := range cfg.Processors {
		n.processors[i] = "processors[" + strconv.Itoa(i+staged) + "]"
	}
	return n
}

// processor is the span name of processor i of cfg.Processors.
func (n spanNames) processor(i int) string {
	if i < len(n.processors) {
		return n.processors[i]
	}
	return ""
}

// startTrace begins the trace of batch b as it enters the pipeline, and
// its input span, which ends once the batch holds a slot (the wait is the
// stream's back-pressure on the input). The parent is the first valid
// traceparent among the metadata of the batch's first maxScan messages;
// other traces among them become links, so each leads to the batch. Only
// so many are looked at: a traced batch must not cost a lookup per
// message.
func (p *pipeline) startTrace(b message.Batch) (batchTrace, trace.Span) {
	t := p.s.cfg.Tracer
	var first trace.SpanContext
	var links []trace.Link
	for i := range min(len(b.Messages), maxScan) {
		sc := tracing.Remote(b.Messages[i].Meta.Fields)
		switch {
		case !sc.IsValid():
		case !first.IsValid():
			first = sc
		case sc.TraceID() != first.TraceID() &&
			(len(links) == 0 || links[len(links)-1].SpanContext.TraceID() != sc.TraceID()):
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	parent := p.hard
	if first.IsValid() {
		parent = trace.ContextWithRemoteSpanContext(parent, first)
	}
	opts := batchSpanOpts
	if len(links) > 0 {
		opts = append(opts[:len(opts):len(opts)], trace.WithLinks(links...))
	}
	ctx, span := t.Start(parent, p.s.names.batch, opts...)
	if !span.IsRecording() {
		return batchTrace{ctx: ctx, span: span}, nil
	}
	// Set once sampled: an unsampled batch does not pay for them.
	span.SetAttributes(
		attribute.String("flowplane.stream", p.s.cfg.ID),
		attribute.Int("messaging.batch.message_count", b.Len()),
	)
	_, in := t.Start(ctx, "input")
	return batchTrace{ctx: ctx, span: span, recording: true}, in
}

// stage starts the span of one stage of a traced batch and returns the
// context the stage runs with; off, it returns base and a nil span.
func (p *pipeline) stage(bt batchTrace, base context.Context, name string) (context.Context, trace.Span) {
	switch {
	case bt.span == nil:
		return base, nil
	case !bt.recording:
		return bt.ctx, nil
	}
	return p.s.cfg.Tracer.Start(bt.ctx, name)
}
