// Package tracing is the node's OpenTelemetry wiring: it builds the tracer
// provider of the `tracing` configuration section (an OTLP exporter over
// HTTP or gRPC, a parent-based ratio sampler) and shuts it down, flushing
// what is queued, when the node stops. It also holds the W3C trace context
// helpers the runtime and the connectors share: reading traceparent and
// tracestate from message metadata into a context, and writing the current
// span's context out as header values.
//
// With tracing off there is no provider: callers hold a nil trace.Tracer
// and test it before doing anything, so the per-batch path costs one
// comparison. The package must not know streams, jobs or components, and
// must not link the OpenTelemetry Collector (its receiver is for tests).
package tracing
