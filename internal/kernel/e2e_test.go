package kernel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	_ "github.com/flowplane/flowplane/internal/connect/all"
	"github.com/flowplane/flowplane/internal/kernel"
)

// TestGenerateAggregateFileExactlyOnce runs the built-in parts end to end:
// generate (split, replayed) -> a keyed aggregate -> the file output's
// two-phase commit. The first run is cancelled after some checkpoints; the
// second resumes and completes. Every key's running count appears exactly
// once per value in the committed part files.
func TestGenerateAggregateFileExactlyOnce(t *testing.T) {
	const n, keys = 3000, 7
	outDir := t.TempDir()
	spec, p := countJob(t, "e2e", n, outDir, t.TempDir(), 20)
	spec.State.Root = t.TempDir()
	build := func() *kernel.Job {
		j, err := kernel.Build("jobs[0]", p, kernel.Options{Registry: component.Default, Spec: &spec})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	first := build()
	runUntilCheckpoint(t, ctx, first, 3)
	if s := first.Observe().State; s != kernel.Stopped {
		t.Fatalf("first run ended %s", s)
	}

	second := build()
	if err := second.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if o := second.Observe(); o.State != kernel.Completed || !strings.HasPrefix(o.RestoredFrom, "checkpoint ") {
		t.Fatalf("second run: %+v", o)
	}

	checkExactlyOnce(t, outDir, n, keys)
}

// checkExactlyOnce reads the committed part files of outDir: every key's
// running count appears exactly once per value, n records in all.
func checkExactlyOnce(t *testing.T, outDir string, n, keys int) {
	t.Helper()
	seen := map[string]map[int]int{}
	total := 0
	files, _ := filepath.Glob(filepath.Join(outDir, "counts-out-*.jsonl"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			var r map[string]any
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			k, _ := json.Marshal(r["key"])
			if seen[string(k)] == nil {
				seen[string(k)] = map[int]int{}
			}
			seen[string(k)][int(r["n"].(float64))]++
			total++
		}
		fh.Close()
	}
	if total != n {
		t.Errorf("%d records committed in %d part files, want %d", total, len(files), n)
	}
	if len(seen) != keys {
		t.Errorf("%d keys, want %d", len(seen), keys)
	}
	for k, counts := range seen {
		for c, times := range counts {
			if times != 1 {
				t.Errorf("key %s count %d committed %d times", k, c, times)
			}
		}
		for c := 1; c <= len(counts); c++ {
			if counts[c] != 1 {
				t.Errorf("key %s: count %d missing", k, c)
			}
		}
	}
}

// runUntilCheckpoint runs j until its checkpoint n completed, then stops it
// and fails t if the run ended with an error or ctx ended first.
func runUntilCheckpoint(t *testing.T, ctx context.Context, j *kernel.Job, n int64) {
	t.Helper()
	run, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- j.Run(run) }()
	for j.Observe().LastCheckpoint < n {
		if ctx.Err() != nil {
			stop()
			t.Fatal("no checkpoints")
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
