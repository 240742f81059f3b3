package main

import (
	"os/exec"
	"syscall"
	"time"

	"github.com/flowplane/flowplane/bench/internal/proc"
)

// dieWithParent makes the engine get SIGKILL if the harness dies first.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// procCPU is the user+system CPU time of a running process.
func procCPU(pid int) (time.Duration, bool) {
	d, err := proc.CPU(pid)
	return d, err == nil
}

// procPeakRSS is the peak resident set of a running process. The rusage of
// a waited-for child is no use here: Linux starts a forked child's peak at
// its parent's resident set, and the harness holds the brokers and their
// records.
func procPeakRSS(pid int) (int64, bool) {
	n, err := proc.PeakRSS(pid)
	return n, err == nil
}
