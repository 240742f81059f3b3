//go:build unix

package httpapi

import "syscall"

// fileLimit returns the soft limit on open file descriptors, 0 when unknown.
func fileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 0
	}
	return int(rl.Cur)
}
