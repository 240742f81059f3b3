package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
)

// ErrUnsupported is returned where /proc is not Linux's.
var ErrUnsupported = errors.New("proc: needs Linux's /proc")

// ClockTicks is USER_HZ, the unit of the CPU times in /proc (stat files):
// 100 on every Linux architecture Go supports.
const ClockTicks = 100

// CPU is the user plus system CPU time pid has used so far (fields 14 and
// 15 of /proc/<pid>/stat).
func CPU(pid int) (time.Duration, error) {
	if runtime.GOOS != "linux" {
		return 0, ErrUnsupported
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStat(b)
}

// parseStat returns utime+stime of one /proc/<pid>/stat line.
func parseStat(b []byte) (time.Duration, error) {
	// The command name (field 2) is in parentheses and may hold spaces and
	// parentheses: fields count from after its last ')', where field 3
	// (state) starts.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("proc: stat has no command name")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("proc: stat has %d fields", len(f)+2)
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("proc: stat times: %w", err)
	}
	return time.Duration(ut+st) * time.Second / ClockTicks, nil
}

// PeakRSS is pid's peak resident set in bytes, VmHWM of
// /proc/<pid>/status. The rusage of a waited-for child is no substitute:
// Linux starts a forked child's peak at its parent's resident set.
func PeakRSS(pid int) (int64, error) {
	if runtime.GOOS != "linux" {
		return 0, ErrUnsupported
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			f := bytes.Fields(v) // "<n> kB"
			if len(f) == 0 {
				break
			}
			kb, err := strconv.ParseInt(string(f[0]), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("proc: status has no VmHWM")
}
