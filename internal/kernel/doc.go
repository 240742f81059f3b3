// Package kernel runs one job on one node: a task goroutine per chain and
// subtask, joined by bounded channels that carry data, watermarks and
// checkpoint barriers in order; a coordinator that injects barriers, writes
// manifests and commits them; and recovery from checkpoints and savepoints.
//
// The plan comes from package job, operators from package operator, state
// and artifacts from package state, sources and sinks from the component
// registry. The kernel does not know about nodes, HTTP or the Hub.
package kernel
