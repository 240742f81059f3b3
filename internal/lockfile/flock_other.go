//go:build !unix

package lockfile

import "os"

// tryLock does not lock where flock(2) does not exist: the lock file and
// its pid are written, but a second process is not refused.
func tryLock(*os.File) (held bool, err error) { return false, nil }
