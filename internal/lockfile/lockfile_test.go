package lockfile

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// holderEnv makes the test binary a process that holds the lock named by
// the variable's value, says so on stdout, and waits to be killed.
const holderEnv = "LOCKFILE_TEST_HOLD"

func TestMain(m *testing.M) {
	if path := os.Getenv(holderEnv); path != "" {
		if _, err := Acquire(path); err != nil {
			os.Stdout.WriteString("error: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("held\n")
		select {}
	}
	os.Exit(m.Run())
}

func TestAcquireIsExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flowplane.lock")
	l, err := Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file holds %q, want this pid %d", got, os.Getpid())
	}
	// A second open file description conflicts even in the same process.
	_, err = Acquire(path)
	var he *HeldError
	if !errors.As(err, &he) || !errors.Is(err, ErrHeld) {
		t.Fatalf("second Acquire: %v, want a HeldError", err)
	}
	if he.PID != os.Getpid() || he.Path != path {
		t.Errorf("HeldError %+v, want path %s pid %d", he, path, os.Getpid())
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l, err = Acquire(path)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l.Release()
}

func TestAcquireMissingDirectory(t *testing.T) {
	if _, err := Acquire(filepath.Join(t.TempDir(), "none", "x.lock")); err == nil || errors.Is(err, ErrHeld) {
		t.Fatalf("Acquire in a missing directory: %v, want an open error", err)
	}
}

// TestKilledHolderReleases holds the lock in a child process: while it
// lives the lock is refused with its pid; once it is SIGKILLed the lock
// is free, with no clean-up.
func TestKilledHolderReleases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flowplane.lock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "held\n" {
		t.Fatalf("holder said %q, %v", line, err)
	}
	_, err = Acquire(path)
	var he *HeldError
	if !errors.As(err, &he) || he.PID != cmd.Process.Pid {
		t.Fatalf("Acquire while the child holds it: %v, want a HeldError naming pid %d", err, cmd.Process.Pid)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), strconv.Itoa(cmd.Process.Pid)) {
		t.Errorf("message %q does not name the file and the pid", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	l, err := Acquire(path)
	if err != nil {
		t.Fatalf("Acquire after the holder was killed: %v", err)
	}
	l.Release()
}
