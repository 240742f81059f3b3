package lockfile

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrHeld is matched (errors.Is) by a HeldError.
var ErrHeld = errors.New("lockfile: held by another holder")

// HeldError reports a lock held by another process (or by another Lock of
// this process).
type HeldError struct {
	// Path is the lock file.
	Path string
	// PID is the holder's process id as it wrote it into the file, or 0
	// when unknown (the holder had not written it yet).
	PID int
}

func (e *HeldError) Error() string {
	switch e.PID {
	case 0:
		return fmt.Sprintf("%s is held by another process", e.Path)
	case os.Getpid():
		return fmt.Sprintf("%s is held by this process (pid %d) already", e.Path, e.PID)
	}
	return fmt.Sprintf("%s is held by process %d", e.Path, e.PID)
}

// Is makes errors.Is(err, ErrHeld) true for a HeldError.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Lock is a held lock. Release it once; the process's end releases it too.
type Lock struct {
	f *os.File
}

// Acquire takes the exclusive lock of the file at path, creating the file
// (0600) when missing; its directory must exist. It does not wait: a lock
// held elsewhere returns a *HeldError at once.
func Acquire(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lockfile: %w", err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lockfile: lock %s: %w", path, err)
	}
	if held {
		pid := readPID(f)
		f.Close()
		return nil, &HeldError{Path: path, PID: pid}
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("lockfile: %w", err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("lockfile: %w", err)
	}
	return &Lock{f: f}, nil
}

// readPID reads the holder's pid; 0 when the file holds none (yet).
func readPID(f *os.File) int {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// Release drops the lock. The file stays (see the package comment).
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor drops the flock
	l.f = nil
	return err
}
