// Package expression compiles and evaluates the expr-lang expressions of
// the mapping, filter and log processors and of job operators (map, filter,
// keys, aggregations), so that streams and jobs speak one language: `this`
// is the value (a decoded JSON value), `meta` free-form string metadata,
// with the helpers merge() and uuid() beside expr's builtins.
//
// It knows nothing of messages or records and does no I/O.
package expression
