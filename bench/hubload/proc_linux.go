package main

import "syscall"

// childAttr makes the kernel kill the Hub child if this process dies
// first, so that an interrupted benchmark leaves nothing running.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
