// Package pgtest runs PostgreSQL servers for tests: Debian's binaries
// (package postgresql) in a temporary directory, on 127.0.0.1 and a free
// port, with a password user whose password tests check never shows.
//
// Tests only: no package outside a _test.go file may import it. A test
// that needs PostgreSQL is skipped when the binaries are not installed
// (.ci/run installs them).
package pgtest
