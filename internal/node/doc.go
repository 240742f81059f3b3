// Package node is the Node API over one engine: stream views (desired,
// observed, convergence), node-local desired-state operations run in order
// per resource, the local event log, and the durable configuration history
// (validate, draft, diff, apply, rollback), plus the probes and metrics
// endpoints. cmd/flowplane builds a Node and serves its Handler.
//
// It must not import the Hub; it speaks the shared wire types.
package node
