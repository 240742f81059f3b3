//go:build !linux

package pgtest

import "syscall"

// endWithParent does nothing where there is no parent-death signal.
func endWithParent(*syscall.SysProcAttr) {}
