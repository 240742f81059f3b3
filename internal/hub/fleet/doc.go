// Package fleet is the Hub's live view of its nodes: leases, Agent
// sessions, the commands waiting for delivery, the attempts in flight, the
// marks that tell the reconciler which nodes may have work, and the
// long-polls waiting for a command, parked without a goroutine.
//
// One type, Fleet, owns all of it behind one mutex that no code outside
// this package sees: every method locks for itself and returns copies (a
// node's observation, metrics and counters are shared read-only, because
// the fleet replaces them and never edits them in place).
//
// The fleet is memory only. The durable truth is the Hub's store: the
// Hub writes first and then tells the fleet (Register, Accept, Enqueue,
// ...), and rebuilds the fleet from the store at restore (Restore). Leases
// are not durable: after a Hub restart every node is unavailable until
// its next heartbeat.
//
// The fleet must not import the hub package, serve routes, touch the store
// or decide what to dispatch: the decisions are the pure functions of
// internal/hub/reconcile, fed with what the fleet reports (ReconcileNode,
// Attempts). It does take over the connections of long-polls (Poll, ParkOn),
// because a parked poll is fleet state.
package fleet
