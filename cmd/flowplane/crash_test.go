package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// sink is the HTTP server the stream's output posts to. It accepts the
// first `accept` messages, then answers 503 until opened, recording every
// id it accepted.
type sink struct {
	mu       sync.Mutex // guards the fields below
	accept   int
	open     bool
	received map[int]bool
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m struct{ ID int }
	if err := json.Unmarshal(body, &m); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open && len(s.received) >= s.accept {
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	}
	s.received[m.ID] = true
}

func (s *sink) has(ids []int) (missing []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if !s.received[id] {
			missing = append(missing, id)
		}
	}
	return missing
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := loopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func startChild(t *testing.T, conf, state string) *exec.Cmd {
	t.Helper()
	return startProcess(t, "node", nil, "--config", conf, "--state-dir", state)
}

// startProcess starts flowplane (childBin) with args and env added to the test's
// environment; the process is killed when t ends. When the test fails,
// the last lines of the output are printed under name.
func startProcess(t *testing.T, name string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	return startProcessFor(t, t, name, env, args...)
}

// startProcessFor is startProcess for a process that outlives t: it is
// killed when owner (a parent of t) ends.
func startProcessFor(t, owner *testing.T, name string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := childCommand(args...)
	cmd.Env = append(cmd.Env, env...)
	logs := &logBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	owner.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if owner.Failed() {
			owner.Logf("%s (pid %d) output, last lines:\n%s", name, cmd.Process.Pid, logs.tail(80))
		}
	})
	return cmd
}

// logBuffer collects a child's output; it may be read while the child runs.
type logBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// tail returns the last n lines.
func (b *logBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := strings.SplitAfter(b.buf.String(), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "")
}

func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never listened", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCrashKeepsAcknowledgedMessages posts messages to a node's http input,
// SIGKILLs the node while some acknowledged messages exist only in its WAL
// (the output's sink refuses them), restarts it, and requires every message
// that was answered 200 to reach the sink.
func TestCrashKeepsAcknowledgedMessages(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	sk := &sink{accept: 20, received: map[int]bool{}}
	srv := httptest.NewServer(sk)
	defer srv.Close()

	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	conf := filepath.Join(dir, "node.yaml")
	doc := fmt.Sprintf(`logging: {level: warn}
health_check: {enabled: false, observability: {enabled: false}}
streams:
  - id: ingest
    input: {type: http, address: "%s", path: /ingest}
    pipeline: {thread_num: 2, processors: [{type: json}]}
    output: {type: http, url: "%s/sink", timeout_ms: 2000}
    durability: {sync: group_commit}
`, addr, srv.URL)
	if err := os.WriteFile(conf, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")

	child := startChild(t, conf, state)
	waitListening(t, addr)

	var (
		mu     sync.Mutex
		acked  []int
		nextID atomic.Int64
	)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	client := &http.Client{Timeout: 5 * time.Second}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				id := int(nextID.Add(1))
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/ingest", bytes.NewReader(fmt.Appendf(nil, `{"id": %d}`, id)))
				resp, err := client.Do(req)
				if err != nil {
					return // the node is gone
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					mu.Lock()
					acked = append(acked, id)
					mu.Unlock()
				}
			}
		})
	}
	// Kill once the sink is refusing and more acknowledged messages exist
	// than it accepted, at a random point past that.
	target := 24 + rand.IntN(6)
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= target {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("only %d messages acknowledged before the deadline", n)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	cancel()
	wg.Wait()

	mu.Lock()
	ids := append([]int(nil), acked...)
	mu.Unlock()
	if walOnly := len(sk.has(ids)); walOnly == 0 {
		t.Fatalf("every acknowledged message was already delivered; the crash tested nothing")
	}

	// Restart with the sink open: the WAL replays what was acknowledged.
	sk.mu.Lock()
	sk.open = true
	sk.mu.Unlock()
	child = startChild(t, conf, state)
	deadline := time.Now().Add(30 * time.Second)
	for len(sk.has(ids)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after restart, %d of %d acknowledged messages never arrived: %v", len(sk.has(ids)), len(ids), sk.has(ids))
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = child.Process.Signal(syscall.SIGTERM)
	if err := child.Wait(); err != nil {
		t.Errorf("graceful stop after restart: %v", err)
	}
}
