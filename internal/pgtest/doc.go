// Package pgtest runs PostgreSQL servers for tests: Debian's binaries
// (package postgresql) in a temporary directory, on 127.0.0.1 and a free
// port, with a password user whose password tests check never shows.
//
// For tests, benchmarks (bench/hubfailover) and the pgdev command (a
// throwaway server for the README's walkthrough) only: the flowplane
// binary never links it (TestImportRules). A test
// that needs PostgreSQL is skipped when the binaries are not installed
// (.ci/run installs them).
package pgtest
