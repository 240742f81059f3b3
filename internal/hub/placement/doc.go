// Package placement decides which node runs a job. It is pure: the caller
// passes every node it knows with its liveness, mode, capabilities and load,
// and gets back one node id or, per node considered, why it cannot take the
// job.
//
// A node qualifies when it is online, active (neither draining nor in
// maintenance), not excluded, and advertises every required capability.
// With requested node ids only those are considered, and the least loaded
// qualified one is chosen, ties going to the earlier requested id (strategy
// requested). Otherwise the least loaded qualified candidate is chosen,
// ties going to the smaller node id (strategy least_loaded).
//
// Split places the tasks of a split job over the eligible nodes the caller
// chose: balanced by task count, a chain's subtasks spread before any node
// gets a second one, late-event side edges kept on their upstream's node
// (see Split).
//
// Spread says which nodes one job write reaches: the job's other nodes get
// the write's intent, the nodes it leaves a fence. The store applies it
// inside the write's transaction, where the job's current nodes are read.
//
// The package must not do I/O, read the clock, keep state or depend on the
// order of the candidates it is given: the same input always yields the
// same decision.
package placement
