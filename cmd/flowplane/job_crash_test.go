package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/goccy/go-json"
)

// crashJob is generate -> keyed tumbling window (partitioned, two subtasks)
// -> exactly-once file sink, checkpointing every 200 ms.
const crashJob = `
logging: {level: info}
health_check: {enabled: false, observability: {enabled: false}}
jobs:
  - id: crash
    version: 1
    parallelism: 2
    operators:
      - {id: clicks, kind: source, parallelism: 1}
      - id: counts
        kind: window
        config:
          key: this.user
          window: {type: tumbling, size_ms: 1000}
          aggregations: [{name: clicks, function: count}, {name: pages, function: sum, expression: this.page}]
      - {id: files, kind: sink}
    edges:
      - {from: clicks, to: counts, partitioned: true}
      - {from: counts, to: files}
    sources:
      - operator_id: clicks
        input_type: generate
        config: %s
        time: {mode: event_time, timestamp_field: ts}
    sinks:
      - operator_id: files
        output_type: file
        config: {path: %s}
    state: {backend: embedded_kv}
    checkpoint: {interval_ms: 200, retention: 2, object_store_uri: "file://%s"}
`

// crashSource is the generated input: 24,000 clicks of 7 users, 5 ms of
// event time apart, paced at 4,000 per second (6 s uninterrupted, more
// than the four kills leave it).
func crashSource() map[string]any {
	return map[string]any{
		"context":            `{"user": "u{{random:7}}", "page": {{random:10}}, "ts": {{timestamp_ms}}}`,
		"seed":               11,
		"timestamp_start_ms": 1767225600000,
		"timestamp_step_ms":  5,
		"count":              24000,
		"interval":           "5ms",
		"batch_size":         20,
	}
}

// windowResult is one line of the job's output.
type windowResult struct {
	Key         string  `json:"key"`
	WindowStart int64   `json:"window_start"`
	WindowEnd   int64   `json:"window_end"`
	Clicks      float64 `json:"clicks"`
	Pages       float64 `json:"pages"`
}

// oracle computes the window results straight from the generated events,
// read through the generate input itself.
func oracle(t *testing.T, conf map[string]any) map[string]windowResult {
	t.Helper()
	in, err := component.Default.NewInput("generate", conf, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer in.Close(ctx)
	want := map[string]windowResult{}
	for range 1_000_000 {
		b, _, err := in.Read(ctx)
		if errors.Is(err, message.ErrEndOfInput) {
			return want
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := range b.Messages {
			p, _ := b.Messages[i].Payload()
			var ev struct {
				User string
				Page float64
				TS   int64
			}
			if err := json.Unmarshal(p, &ev); err != nil {
				t.Fatal(err)
			}
			start := ev.TS - ev.TS%1000
			k := fmt.Sprintf("%s@%d", ev.User, start)
			r := want[k]
			r.Key, r.WindowStart, r.WindowEnd = ev.User, start, start+1000
			r.Clicks++
			r.Pages += ev.Page
			want[k] = r
		}
	}
	t.Fatal("the generate input never ended")
	return nil
}

// readParts reads every committed part file of the sink and fails the test
// on a window seen twice.
func readParts(t *testing.T, dir string) map[string]windowResult {
	t.Helper()
	got := map[string]windowResult{}
	files, err := filepath.Glob(filepath.Join(dir, "counts-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			var r windowResult
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: %q: %v", f, sc.Text(), err)
			}
			k := fmt.Sprintf("%s@%d", r.Key, r.WindowStart)
			if prev, dup := got[k]; dup {
				t.Errorf("window %s written twice (exactly-once broken): %+v and %+v (in %s)", k, prev, r, f)
			}
			got[k] = r
		}
		fh.Close()
	}
	return got
}

// TestJobExactlyOnceUnderSIGKILL runs a windowed job with an exactly-once
// file sink as a child process, SIGKILLs it at random moments several
// times, restarts it each time from its checkpoints, and checks that the
// committed output equals the oracle: every window once, with the right
// counts.
func TestJobExactlyOnceUnderSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills child processes for several seconds")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	src := crashSource()
	srcJSON, _ := json.Marshal(src)
	conf := filepath.Join(dir, "job.yaml")
	body := fmt.Sprintf(crashJob, srcJSON, filepath.Join(out, "counts.jsonl"), filepath.Join(dir, "checkpoints"))
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("kill schedule seed %d", seed)
	state := filepath.Join(dir, "state")
	const kills = 4
	for i := 0; i < kills; i++ {
		cmd := startChild(t, conf, state)
		wait := time.Duration(300+rng.IntN(700)) * time.Millisecond
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			t.Fatalf("run %d ended before its kill after %v: %v", i, wait, err)
		case <-time.After(wait):
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-exited
		t.Logf("run %d killed after %v", i, wait)
	}
	// The last run goes to the end: the node exits once the job completed.
	cmd := startChild(t, conf, state)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the last run failed: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the last run did not complete within 2 minutes")
	}
	want := oracle(t, src)
	got := readParts(t, out)
	var missing, wrong []string
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			missing = append(missing, k)
		case g != w:
			wrong = append(wrong, fmt.Sprintf("%s: got %+v, want %+v", k, g, w))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			wrong = append(wrong, "unexpected window "+k)
		}
	}
	if len(missing) > 0 || len(wrong) > 0 {
		sort.Strings(missing)
		t.Fatalf("%d windows expected, %d committed; missing %d: %s; wrong %d: %s",
			len(want), len(got), len(missing), strings.Join(first(missing, 10), ", "), len(wrong), strings.Join(first(wrong, 10), "; "))
	}
	pending, _ := filepath.Glob(filepath.Join(out, ".counts.jsonl.pending", "*"))
	if len(pending) > 0 {
		t.Errorf("pending files left after the job completed: %v", pending)
	}
	t.Logf("%d windows, each committed exactly once across %d SIGKILLs", len(want), kills)
}

func first(s []string, n int) []string { return s[:min(len(s), n)] }
