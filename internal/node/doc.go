// Package node is the Node API over one engine: stream views (desired,
// observed, convergence), node-local desired-state operations run in order
// per resource, the local event log, and the durable configuration history
// (validate, draft, diff, apply, rollback), plus the probes and metrics
// endpoints. cmd/flowplane builds a Node and serves its Handler.
//
// The Agent carries out the Hub's configuration commands through the same
// paths, synchronously (hub.go): ValidateHub, ApplyHub (a version of
// source hub recording the Hub's version id), ReapplyVersion and
// DiffTexts. The values the Hub resolved for ${secret:} references resolve
// those references only, join the node's redactor before anything runs,
// and are never stored: the history keeps the text as the Hub sent it.
//
// It must not import the Hub; it speaks the shared wire types.
package node
