// Package eventlog is a bounded, in-memory event log with live fan-out: the
// node's local event log, and the in-memory tail of the Hub's durable one.
//
// A Log keeps the newest events (2048 by default, the specification's limit)
// in a ring, assigns each appended event the next strictly increasing id,
// answers filtered, paged queries newest first, and lets any number of
// Subscriptions read every event after a given id, replay first and live
// after, without a gap or a duplicate. Subscribers read the ring through
// their own cursor, so Append never waits for a subscriber and a subscriber
// holds no goroutine and no buffer of its own; one that falls more than the
// ring's capacity behind is told so by a resync marker and continues with the
// oldest retained event. ServeSSE writes a Subscription as a Server-Sent
// Events stream in the framing of API.md.
//
// Storage is pluggable through Insert: a durable store (the Hub's SQLite)
// assigns ids itself and feeds committed events in, and restores the retained
// tail at start-up through Options.LastID and Insert.
//
// The package must not know about streams, jobs, nodes or HTTP routing: it
// stores and delivers wire.Event values, and its only HTTP code is the SSE
// writer, which the caller mounts on its own route.
package eventlog
