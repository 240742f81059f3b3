//go:build !linux

package main

import "os/exec"

// dieWithParent does nothing where the parent's death cannot be signalled.
func dieWithParent(*exec.Cmd) {}
