package history_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/node/history"
)

// crashDirEnv makes TestCrashChild the writer process of TestCrashSafety.
const crashDirEnv = "FLOWPLANE_HISTORY_CRASH_DIR"

// TestCrashChild is the child of TestCrashSafety: it appends versions,
// applies some and saves drafts, and reports on stdout each one whose
// call returned, until it is killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("run by TestCrashSafety")
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	s, err := history.Open(dir, time.Now)
	if err != nil {
		fail(err)
	}
	if _, _, err := s.Boot([]byte("streams: []\n"), config.YAML, "node.yaml"); err != nil {
		fail(err)
	}
	for i := range 100_000 { // bounded; the parent kills far earlier
		content := fmt.Sprintf("i: %d\n%s", i, strings.Repeat("# pad\n", i%700))
		v, err := s.Append([]byte(content), config.YAML, history.SourceAPI, history.Meta{CorrelationID: strconv.Itoa(i)})
		if err != nil {
			fail(err)
		}
		fmt.Printf("durable %s %s\n", v.ID, v.SHA256)
		if i%3 == 0 {
			if err := s.MarkApplied(v.ID); err != nil {
				fail(err)
			}
			fmt.Printf("applied %s\n", v.ID)
		}
		if i%4 == 0 {
			if _, err := s.SaveDraft([]byte(content), config.YAML, time.Now()); err != nil {
				fail(err)
			}
			fmt.Printf("draft saved\n")
		}
	}
}

// TestCrashSafety kills a writer with SIGKILL at a random moment, several
// times over one directory, and requires every version the writer
// reported to survive intact. (SIGKILL keeps the page cache, so this
// checks the rename protocol and the clean-up; the fsyncs guard against
// power loss, which a test cannot cause.)
func TestCrashSafety(t *testing.T) {
	if os.Getenv(crashDirEnv) != "" {
		t.Skip("in the child")
	}
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	durable := map[string]string{} // id -> sha256 reported
	applied, drafts := 0, 0
	for round := range 8 {
		killAfter := 1 + rng.IntN(25)
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		n := 0
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 3 && f[0] == "durable" && len(f[2]) == 64:
				durable[f[1]] = f[2]
				n++
				if n == killAfter {
					time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond) // a random moment, not a timing assertion
					if err := cmd.Process.Kill(); err != nil {
						t.Fatal(err)
					}
				}
			case len(f) == 2 && f[0] == "applied":
				if id, ok := strings.CutPrefix(f[1], "v"); ok {
					a, _ := strconv.Atoi(id)
					applied = max(applied, a)
				}
			case len(f) == 2 && f[0] == "draft":
				drafts++
			}
		}
		err = cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != -1 {
			t.Fatalf("round %d: child ended with %v, not by SIGKILL; stderr:\n%s", round, err, stderr.String())
		}

		s, err := history.Open(dir, time.Now)
		if err != nil {
			t.Fatalf("round %d: Open after kill: %v", round, err)
		}
		for id, want := range durable {
			v, err := s.Get(id)
			if err != nil {
				t.Fatalf("round %d: reported version %s: %v", round, id, err)
			}
			if v.SHA256 != want {
				t.Fatalf("round %d: %s has sha256 %s, child reported %s", round, id, v.SHA256, want)
			}
		}
		list := s.List()
		for i, v := range list {
			if v.ID != "v"+strconv.Itoa(i+1) {
				t.Fatalf("round %d: List()[%d] = %s", round, i, v.ID)
			}
		}
		a, err := s.Applied()
		if err != nil {
			t.Fatalf("round %d: Applied: %v", round, err)
		}
		if got, _ := strconv.Atoi(strings.TrimPrefix(a.ID, "v")); got < applied {
			t.Fatalf("round %d: applied %s, but the child reported v%d applied", round, a.ID, applied)
		}
		if _, ok := s.Draft(); drafts > 0 && !ok {
			t.Fatalf("round %d: draft lost", round)
		}
		if left := tempFiles(t, dir); len(left) > 0 {
			t.Fatalf("round %d: temporary files after Open: %v", round, left)
		}
		t.Logf("round %d: killed after %d reports; %d versions", round, killAfter, len(list))
	}
}
