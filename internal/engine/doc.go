// Package engine owns the streams and jobs of one node. It builds
// components from a materialized configuration (the deep build that
// --validate also runs), starts and stops streams and jobs, applies a new
// configuration by diff, runs the jobs a Hub places on the node (split
// ones over the node's data plane), and exposes their status and changes.
//
// It is the node's one door: the node, the Agent and the command reach
// streams, jobs, their state and artifacts, WALs and the data plane only
// through it; names.go and dataplane.go give them the runtimes' names
// they need.
//
// It does not parse configuration files or serve HTTP.
package engine
