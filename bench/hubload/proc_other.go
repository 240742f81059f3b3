//go:build !linux

package main

import "syscall"

// childAttr: without Linux there is no parent-death signal (and no /proc
// to measure with; the benchmark needs Linux).
func childAttr() *syscall.SysProcAttr { return nil }
