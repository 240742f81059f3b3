package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/netlab"
)

// netnsLab is a netlab.Lab for a test: it skips the test when namespaces
// are unavailable and is removed when the test ends.
type netnsLab struct{ *netlab.Lab }

// newNetnsLab creates the lab with one namespace per name, or skips the
// test with the reason when it cannot.
func newNetnsLab(t *testing.T, names ...string) *netnsLab {
	t.Helper()
	l, err := netlab.New(t.Logf, names...)
	if l != nil {
		t.Cleanup(l.Remove)
	}
	if errors.Is(err, netlab.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &netnsLab{l}
}

// host returns the named host; it fails the test for an unknown name.
func (l *netnsLab) host(t *testing.T, name string) *netlab.Host {
	t.Helper()
	h := l.Host(name)
	if h == nil {
		t.Fatalf("no host %q in the lab", name)
	}
	return h
}

// start runs flowplane (childBin) in host h with args and env added to the test's
// environment, and waits until the process is the binary itself inside
// the namespace. It is killed when owner ends; when owner failed, the last
// lines of its output are logged under name.
func (l *netnsLab) start(t, owner *testing.T, h *netlab.Host, name string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.NS, childBin}, args...)...)
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	logs := &logBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	owner.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if owner.Failed() {
			owner.Logf("%s (pid %d, namespace %s) output, last lines:\n%s", name, cmd.Process.Pid, h.NS, logs.tail(80))
		}
	})
	waitExecIn(t, cmd.Process.Pid, childBin, h.NS)
	return cmd
}

// waitExecIn waits until pid runs exe in another network namespace than
// the test's: ip netns exec has switched namespaces and exec'd, so the pid
// is the binary's own.
func waitExecIn(t *testing.T, pid int, exe, ns string) {
	t.Helper()
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.EvalSymlinks(exe)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, errExe := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		netns, errNS := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
		if errExe == nil && errNS == nil && got == want && netns != self {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d: exe %q (%v), net namespace %q (%v): not %s in namespace %s", pid, got, errExe, netns, errNS, want, ns)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// procMemory reads a process's resident set and its peak, in bytes, from
// /proc/<pid>/status.
func procMemory(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	return rss, hwm, nil
}
