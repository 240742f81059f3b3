package wal

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/lockfile"
)

// crashEnv names the directory a re-executed test binary writes to as the
// crash test's child.
const crashEnv = "FLOWPLANE_WAL_CRASH_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashEnv); dir != "" {
		os.Exit(crashWriter(dir))
	}
	os.Exit(m.Run())
}

// crashWriter is the child: it replays and acknowledges what an earlier run
// left, then appends with many entries in flight, printing "d <seq> <crc>"
// once an entry is durable and "a <seq>" before acknowledging one. It runs
// until killed (or a bound is reached).
func crashWriter(dir string) int {
	w, _, err := Open(Options{Dir: dir, Sync: SyncGroupCommit, SegmentBytes: 8 << 10, SyncInterval: 5 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	out := func(format string, args ...any) { _, _ = fmt.Fprintf(os.Stdout, format+"\n", args...) }
	var old []uint64
	if err := w.Replay(func(seq uint64, _ []byte) error { old = append(old, seq); return nil }); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for _, seq := range old {
		out("a %d", seq)
		if err := w.Ack(seq); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	type op struct {
		seq uint64
		crc uint32
		ch  <-chan error
	}
	ops := make(chan op, 64)
	go func() {
		defer close(ops)
		rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 7))
		deadline := time.Now().Add(20 * time.Second)
		for i := 0; i < 200_000 && time.Now().Before(deadline); i++ {
			data := make([]byte, 1+rng.IntN(300))
			for j := range data {
				data[j] = byte(rng.Uint32())
			}
			seq, ch := w.AppendAsync(data)
			ops <- op{seq, crc32.ChecksumIEEE(data), ch}
		}
	}()
	for o := range ops {
		if err := <-o.ch; err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		out("d %d %d", o.seq, o.crc)
		if o.seq%4 == 0 {
			out("a %d", o.seq)
			if err := w.Ack(o.seq); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
		}
	}
	_ = w.Close()
	return 0
}

// TestCrashRecoversDurableEntries runs the writer in a child process, kills
// it with SIGKILL after a few hundred durable entries, and checks that every
// entry it reported durable, and did not acknowledge, is replayed intact.
// Three crashes hit the same directory.
func TestCrashRecoversDurableEntries(t *testing.T) {
	dir := t.TempDir()
	durable := map[uint64]uint32{} // seq -> crc of its data
	acked := map[uint64]bool{}
	rng := rand.New(rand.NewPCG(3, 4))
	for cycle := range 3 {
		killAfter := 200 + rng.IntN(400)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		rd := bufio.NewReader(stdout)
		seen, killed := 0, false
		timer := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				break // EOF; a partial last line was never fully reported
			}
			f := strings.Fields(line)
			seq, _ := strconv.ParseUint(f[1], 10, 64)
			switch f[0] {
			case "d":
				crc, _ := strconv.ParseUint(f[2], 10, 32)
				durable[seq] = uint32(crc)
				seen++
			case "a":
				acked[seq] = true
			}
			if seen == killAfter && !killed {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		}
		timer.Stop()
		err = cmd.Wait()
		if !killed {
			t.Fatalf("cycle %d: child ended before it was killed: %v", cycle, err)
		}

		w, rec, err := Open(Options{Dir: dir, Sync: SyncGroupCommit, SegmentBytes: 8 << 10})
		if err != nil {
			t.Fatalf("cycle %d: Open after SIGKILL: %v", cycle, err)
		}
		if rec.CorruptSegment != "" {
			t.Errorf("cycle %d: a crash damaged an older segment: %+v", cycle, rec)
		}
		replayed := map[uint64]bool{}
		var last uint64
		err = w.Replay(func(seq uint64, data []byte) error {
			if seq <= last {
				t.Errorf("cycle %d: seq %d replayed after %d", cycle, seq, last)
			}
			last = seq
			replayed[seq] = true
			if crc, ok := durable[seq]; ok && crc != crc32.ChecksumIEEE(data) {
				t.Errorf("cycle %d: entry %d replayed with different data", cycle, seq)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("cycle %d: Replay: %v", cycle, err)
		}
		missing := 0
		for seq := range durable {
			if !acked[seq] && !replayed[seq] {
				missing++
				if missing <= 5 {
					t.Errorf("cycle %d: durable entry %d lost", cycle, seq)
				}
			}
		}
		if missing > 0 {
			t.Fatalf("cycle %d: %d durable entries lost (%d durable, %d replayed)", cycle, missing, len(durable), len(replayed))
		}
		t.Logf("cycle %d: %d durable so far, %d replayed, truncated %d bytes", cycle, len(durable), len(replayed), rec.TruncatedBytes)
		mustClose(t, w)
	}
}

// TestOpenRefusesDirectoryInUse opens a directory a second time, in this
// process and while a child process writes to it: both fail with
// ErrOpen, the latter naming the child's pid. Once the child is
// SIGKILLed, Open succeeds at once.
func TestOpenRefusesDirectoryInUse(t *testing.T) {
	dir := t.TempDir()
	w, _ := openT(t, dir, Options{})
	if _, _, err := Open(Options{Dir: dir}); !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open in the same process: %v, want ErrOpen", err)
	}
	mustClose(t, w)
	w, _ = openT(t, dir, Options{}) // Close released the directory
	mustClose(t, w)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatalf("the child reported nothing: %v", err)
	}
	_, _, err = Open(Options{Dir: dir})
	var he *lockfile.HeldError
	if !errors.Is(err, ErrInUse) || !errors.As(err, &he) || he.PID != cmd.Process.Pid {
		t.Fatalf("Open while a child writes: %v, want ErrOpen naming pid %d", err, cmd.Process.Pid)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	w, _, err = Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("Open after the holder was killed: %v", err)
	}
	mustClose(t, w)
}
