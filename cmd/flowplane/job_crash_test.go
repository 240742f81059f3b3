package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/goccy/go-json"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// crashJob is generate -> keyed tumbling window (partitioned, two subtasks)
// -> exactly-once file sink, checkpointing every 200 ms to an S3 store.
const crashJob = `
logging: {level: info}
health_check: {enabled: false, observability: {enabled: false}}
streams: []
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
    checkpoint: {interval_ms: 200, retention: 2, object_store_uri: "%s"}
`

// crashSource is the generated input: 36,000 clicks of 7 users, 5 ms of
// event time apart, paced at 4,000 per second (9 s uninterrupted, more
// than the kills leave it).
func crashSource() map[string]any {
	return map[string]any{
		"context":            `{"user": "u{{random:7}}", "page": {{random:10}}, "ts": {{timestamp_ms}}}`,
		"seed":               11,
		"timestamp_start_ms": 1767225600000,
		"timestamp_step_ms":  5,
		"count":              36000,
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
	s3 := slowS3(t, 300*time.Millisecond)
	body := fmt.Sprintf(crashJob, srcJSON, filepath.Join(out, "counts.jsonl"), s3.uri)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("kill schedule seed %d", seed)
	state := filepath.Join(dir, "state")
	// Even runs die at a random moment; odd ones while a checkpoint's
	// manifest is being written, after every sink prepared its
	// transaction and before the checkpoint is committed: the moment a
	// sink that makes data visible too early is caught.
	const kills = 6
	for i := 0; i < kills; i++ {
		cmd := startProcess(t, "node", s3.env, "--config", conf, "--state-dir", state)
		wait := time.Duration(300+rng.IntN(700)) * time.Millisecond
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			t.Fatalf("run %d ended before its kill after %v: %v", i, wait, err)
		case <-time.After(wait):
		}
		how := "at a random moment"
		if i%2 == 1 {
			s3.armed.Store(true)
			select {
			case <-s3.writing:
				how = "while a manifest was written"
			case <-time.After(5 * time.Second):
				t.Fatalf("run %d wrote no checkpoint manifest within 5 s", i)
			}
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-exited
		t.Logf("run %d killed %s, %v after its start", i, how, wait)
	}
	// The last run goes to the end: the node exits once the job completed.
	cmd := startProcess(t, "node", s3.env, "--config", conf, "--state-dir", state)
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
	checkOracle(t, want, readParts(t, out))
	pending, _ := filepath.Glob(filepath.Join(out, ".counts.jsonl.pending", "*"))
	if len(pending) > 0 {
		t.Errorf("pending files left after the job completed: %v", pending)
	}
	t.Logf("%d windows, each committed exactly once across %d SIGKILLs", len(want), kills)
}

func first(s []string, n int) []string { return s[:min(len(s), n)] }

// slowS3 serves an in-memory S3 bucket on loopback whose manifest writes
// take delay, as a distant object store's do, and can report the next
// manifest write as it starts.
type slowStore struct {
	uri     string
	env     []string    // what a child needs to reach it
	armed   atomic.Bool // report the next manifest write on writing
	writing chan struct{}
}

func slowS3(t *testing.T, delay time.Duration) *slowStore {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket("checkpoints"); err != nil {
		t.Fatal(err)
	}
	s := &slowStore{writing: make(chan struct{}, 1)}
	s3 := gofakes3.New(backend).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "_manifest.json") {
			if s.armed.CompareAndSwap(true, false) {
				s.writing <- struct{}{}
			}
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return // the writer died: the manifest never lands
			}
		}
		s3.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	none := filepath.Join(t.TempDir(), "none")
	s.env = []string{"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_SESSION_TOKEN=", "AWS_PROFILE=",
		"AWS_CONFIG_FILE=" + none, "AWS_SHARED_CREDENTIALS_FILE=" + none, "AWS_EC2_METADATA_DISABLED=true"}
	s.uri = "s3://checkpoints/crash?region=us-east-1&use_path_style=true&endpoint=" + srv.URL
	return s
}

// checkOracle fails t unless the committed windows got are exactly want.
func checkOracle(t *testing.T, want, got map[string]windowResult) {
	t.Helper()
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
}
