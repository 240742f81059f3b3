// Package proc reads a running process's CPU time and memory from Linux's
// /proc, for the benchmark programs that measure child processes (a Hub,
// an engine, a broker) while they run. Elsewhere every call fails with
// ErrUnsupported.
package proc
