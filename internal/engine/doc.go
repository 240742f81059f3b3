// Package engine owns the streams (and later the jobs) of one node. It
// builds components from a materialized configuration (the deep build that
// --validate also runs), starts and stops streams, applies a new
// configuration by diff, and exposes per-stream status.
//
// It does not parse configuration files or serve HTTP.
package engine
