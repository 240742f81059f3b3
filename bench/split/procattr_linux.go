package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the child get SIGKILL if the benchmark dies first,
// so that no Hub or Agent outlives it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
