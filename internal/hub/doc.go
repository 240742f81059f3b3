// Package hub is the fleet's desired-state control plane: the operator API,
// the agent API, reconciliation, events and audit over a durable store.
//
// It knows nodes only through the wire types; it must not import the
// engine or any stream runtime.
package hub
