package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// orderSink records, in arrival order, the (client, k) of every message
// posted to it.
type orderSink struct {
	mu       sync.Mutex // guards arrivals
	arrivals [][2]int
}

func (s *orderSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m struct{ C, K int }
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &m); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.arrivals = append(s.arrivals, [2]int{m.C, m.K})
	s.mu.Unlock()
}

// check returns how many of clients*perClient messages have not arrived,
// and an error when a client's messages first arrived out of its order.
func (s *orderSink) check(clients, perClient int) (missing int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make([][]bool, clients)
	last := make([]int, clients)
	for c := range seen {
		seen[c], last[c] = make([]bool, perClient), -1
	}
	for _, a := range s.arrivals {
		c, k := a[0], a[1]
		if c < 0 || c >= clients || k < 0 || k >= perClient {
			return 0, fmt.Errorf("unexpected message %v", a)
		}
		if seen[c][k] {
			continue // a redelivery (at-least-once)
		}
		seen[c][k] = true
		if k < last[c] && err == nil {
			err = fmt.Errorf("client %d: message %d first arrived after %d", c, k, last[c])
		}
		last[c] = max(last[c], k)
	}
	for c := range seen {
		for _, ok := range seen[c] {
			if !ok {
				missing++
			}
		}
	}
	return missing, err
}

// TestCrashRidesOutOutputOutage posts 10,000 messages to a node's http input
// while its output's server is down: the WAL owns each one once durable, so
// every request is answered 200 although nothing can be delivered. The node
// is SIGKILLed, the output's server comes up, the node restarts, and every
// message reaches the server, each client's messages first arriving in the
// order they were sent.
func TestCrashRidesOutOutputOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	const (
		clients   = 8
		perClient = 1250 // 10,000 in all
	)
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	sinkAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t)) // nothing listens yet: connections are refused
	conf := filepath.Join(dir, "node.yaml")
	doc := fmt.Sprintf(`logging: {level: warn}
health_check: {enabled: false, observability: {enabled: false}}
streams:
  - id: ingest
    input: {type: http, address: "%s", path: /ingest}
    pipeline: {thread_num: 2, processors: [{type: json}]}
    output: {type: http, url: "http://%s/sink", timeout_ms: 2000}
    durability: {sync: group_commit}
`, addr, sinkAddr)
	if err := os.WriteFile(conf, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	child := startChild(t, conf, state)
	waitListening(t, addr)

	// Each client sends its messages one after the other, so their order
	// is the order the node reads them in.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := &http.Client{Timeout: 20 * time.Second}
	var (
		answered atomic.Int64
		failMu   sync.Mutex // guards failure
		failure  error
	)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for k := range perClient {
				body := fmt.Appendf(nil, `{"c": %d, "k": %d}`, c, k)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/ingest", bytes.NewReader(body))
				resp, err := client.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("answered %d", resp.StatusCode)
					}
				}
				if err != nil {
					failMu.Lock()
					if failure == nil {
						failure = fmt.Errorf("client %d, message %d, after %d answered 200: %w", c, k, answered.Load(), err)
					}
					failMu.Unlock()
					cancel()
					return
				}
				answered.Add(1)
			}
		})
	}
	wg.Wait()
	if failure != nil {
		t.Fatalf("with the output down: %v", failure)
	}
	if n := answered.Load(); n != clients*perClient {
		t.Fatalf("%d requests answered 200, want %d", n, clients*perClient)
	}

	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	// The output's server comes up on the address the node was refused at.
	ln, err := net.Listen("tcp", sinkAddr)
	if err != nil {
		t.Fatalf("sink: %v", err)
	}
	sk := &orderSink{}
	srv := &http.Server{Handler: sk}
	go srv.Serve(ln)
	defer srv.Close()

	child = startChild(t, conf, state)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		missing, err := sk.check(clients, perClient)
		if err != nil {
			t.Fatal(err)
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after restart, %d of %d messages never arrived", missing, clients*perClient)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = child.Process.Signal(syscall.SIGTERM)
	if err := child.Wait(); err != nil {
		t.Errorf("graceful stop after restart: %v", err)
	}
}
