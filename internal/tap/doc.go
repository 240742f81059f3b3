// Package tap samples the messages of a running stream or job for a live
// view: copies of what passes one point (a stream's input, the output of
// processor i, the output; a job operator's output) are offered to the
// taps attached there.
//
// A Set belongs to one stream or job and outlives its restarts; the runtime
// calls Offer at each point. With no tap attached, Offer costs one atomic
// load. With taps attached, each takes messages within its rate (a token
// bucket) and hands copies to a bounded buffer by a non-blocking send:
// when its reader is slow the copy is dropped and counted, and the runtime
// never waits. What a tap copies is raw: redaction is its reader's duty,
// since only the node knows the secret values.
//
// Params holds a tap request's query (stage or operator, rate, duration)
// and ParseParams its bounds: the defaults, DefaultRate messages/s for
// DefaultDuration, and at most MaxRate for MaxDuration.
//
// The package must not block its callers, know HTTP, or read configuration.
package tap
