//go:build !linux

package main

import (
	"os/exec"
	"time"
)

func dieWithParent(*exec.Cmd) {}

// procCPU is unavailable here: the CPU time then comes from rusage once
// the engine exited (its shutdown included).
func procCPU(int) (time.Duration, bool) { return 0, false }

// procPeakRSS is unavailable here: the peak comes from rusage.
func procPeakRSS(int) (int64, bool) { return 0, false }
