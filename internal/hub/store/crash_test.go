package store

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const crashEnv = "FLOWPLANE_STORE_CRASH_DB"

// TestCrashChild is the child of TestCrash: it writes from 32 goroutines
// and prints "resource generation intent" after each write returned.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("run by TestCrash")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5000 && ctx.Err() == nil; i++ {
				res := fmt.Sprint("s", g%4)
				id := fmt.Sprintf("g%d-%d", g, i)
				r, err := s.WriteDesired(ctx, dw(id, "n1", res, t0))
				if err != nil {
					continue
				}
				mu.Lock()
				// os.Stdout is unbuffered: once Fprintf returns the line is in the pipe.
				fmt.Fprintf(os.Stdout, "%s %d %s\n", res, r.Generation, id)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	os.Exit(0)
}

// TestCrash kills a writing child with SIGKILL at a random point and
// requires every write it reported as returned to be on disk, with
// generations 1..n per resource without gaps or duplicates.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	type rec struct {
		res string
		gen int64
		id  string
	}
	var printed []rec
	path := crashChild(t, "TestCrashChild", crashEnv, func(line string) bool {
		var r rec
		if _, err := fmt.Sscanf(line, "%s %d %s", &r.res, &r.gen, &r.id); err != nil {
			return false // test framework output
		}
		printed = append(printed, r)
		return true
	})

	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	gens := map[string]map[int64]string{}
	rows, err := s.rdb.Query("SELECT resource_id, generation, id FROM intents")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var res, id string
		var g int64
		if err := rows.Scan(&res, &g, &id); err != nil {
			t.Fatal(err)
		}
		if gens[res] == nil {
			gens[res] = map[int64]string{}
		}
		if other, dup := gens[res][g]; dup {
			t.Errorf("%s generation %d twice: %s and %s", res, g, other, id)
		}
		gens[res][g] = id
	}
	_ = rows.Close()
	for res, m := range gens {
		r, err := s.GetResource(context.Background(), "n1", KindStream, res)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(m)) != r.Generation {
			t.Errorf("%s: %d intents, generation %d", res, len(m), r.Generation)
		}
		for g := int64(1); g <= r.Generation; g++ {
			if _, ok := m[g]; !ok {
				t.Errorf("%s: generation %d missing", res, g)
			}
		}
	}
	for _, p := range printed {
		if got := gens[p.res][p.gen]; got != p.id {
			t.Errorf("returned write %s %s generation %d lost (found %q)", p.id, p.res, p.gen, got)
		}
	}
	if !strings.HasPrefix(printed[0].res, "s") {
		t.Errorf("unexpected output %+v", printed[0])
	}
}

// crashChild runs the test child in a process of its own on a new
// database (path in env), hands each line it prints to line (which
// reports whether it was a write) and kills it with SIGKILL after a random
// number of writes. It returns the database's path.
func crashChild(t *testing.T, child, env string, line func(string) bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hub.db")
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killAt := 50 + rand.IntN(400)
	n := 0
	sc := bufio.NewScanner(stdout)
	killed := false
	timer := time.AfterFunc(20*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	for sc.Scan() {
		if !line(sc.Text()) {
			continue
		}
		if n++; !killed && n >= killAt {
			_ = cmd.Process.Kill() // SIGKILL
			killed = true
		}
	}
	_ = cmd.Wait()
	if !killed {
		t.Fatalf("child ended before the kill after %d writes", n)
	}
	t.Logf("killed after %d printed writes (target %d)", n, killAt)
	return path
}
