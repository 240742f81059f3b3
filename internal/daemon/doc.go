// Package daemon runs an engine node process: it is what `flowplane
// --config` does between the flags and the exit status. It reads and
// checks the configuration file (the walk --validate shares), takes the
// state directory, picks the configuration version to boot from the
// node's history (the history rules: a Hub version whose secrets this node
// cannot resolve gives way to the latest file version), and wires the
// logger, the data plane, the engine, the node and its listener and, with
// hub_urls, the Agent; then it runs them until the context ends or, on a
// standalone node, every stream and job ended.
//
// It does not parse flags, pick the process's role, handle signals or
// choose exit codes: cmd/flowplane does. It reaches streams and jobs only
// through the engine.
package daemon
