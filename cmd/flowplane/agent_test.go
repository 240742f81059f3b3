package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// stubHub answers the agent routes just enough for a node process: it
// issues sessions, keeps the reports and results, and hands out queued
// commands at once.
type stubHub struct {
	*httptest.Server
	mu      sync.Mutex
	streams map[string]wire.ReportStream // latest reported state by stream
	results map[string]string            // command id -> final state
	queue   []wire.Command
	// registers and heartbeats are the bodies received, in order.
	registers  []wire.RegisterRequest
	heartbeats []wire.HeartbeatRequest
	// heartbeatMS is the heartbeat interval sessions get (5000 unless set
	// before the node registers).
	heartbeatMS int64
}

func newStubHub(t *testing.T, token string) *stubHub {
	h := &stubHub{streams: map[string]wire.ReportStream{}, results: map[string]string{}, heartbeatMS: 5000}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/agent/register", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var reg wire.RegisterRequest
		_ = json.NewDecoder(r.Body).Decode(&reg)
		h.mu.Lock()
		h.registers = append(h.registers, reg)
		interval := h.heartbeatMS
		h.mu.Unlock()
		_ = json.NewEncoder(w).Encode(wire.RegisterResponse{SessionToken: "s1", SessionExpiresAt: wire.At(time.Now().Add(time.Hour)), LeaseTTLMS: 15000, HeartbeatIntervalMS: interval})
	})
	mux.HandleFunc("POST /api/v1/agent/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		var hb wire.HeartbeatRequest
		_ = json.NewDecoder(r.Body).Decode(&hb)
		h.mu.Lock()
		h.heartbeats = append(h.heartbeats, hb)
		h.mu.Unlock()
		_ = json.NewEncoder(w).Encode(wire.HeartbeatResponse{})
	})
	mux.HandleFunc("POST /api/v1/agent/report", func(w http.ResponseWriter, r *http.Request) {
		var rep wire.Report
		_ = json.NewDecoder(r.Body).Decode(&rep)
		h.mu.Lock()
		for _, s := range rep.Streams {
			h.streams[s.ID] = s
		}
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /api/v1/agent/commands", func(w http.ResponseWriter, r *http.Request) {
		// A short poll is enough here: the Agent polls again at once.
		h.mu.Lock()
		items := h.queue
		h.queue = nil
		h.mu.Unlock()
		if len(items) == 0 {
			time.Sleep(20 * time.Millisecond)
		}
		_ = json.NewEncoder(w).Encode(wire.Page[wire.Command]{Items: append([]wire.Command{}, items...)})
	})
	mux.HandleFunc("POST /api/v1/agent/commands/{id}/result", func(w http.ResponseWriter, r *http.Request) {
		var res wire.CommandResult
		_ = json.NewDecoder(r.Body).Decode(&res)
		if res.State != wire.ResultAcknowledged {
			h.mu.Lock()
			h.results[r.PathValue("id")] = res.State
			h.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	})
	h.Server = httptest.NewServer(mux)
	t.Cleanup(h.Close)
	return h
}

func (h *stubHub) stream(id string) wire.ReportStream {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.streams[id]
}

const (
	finiteStream  = "  - id: finite\n    input: {type: generate, context: '{}', count: 3, interval: 1ms}\n    pipeline: {processors: []}\n    output: {type: drop}\n"
	endlessStream = "  - id: endless\n    input: {type: generate, context: '{}', interval: 1ms}\n    pipeline: {processors: []}\n    output: {type: drop}\n"
)

func hubNodeDoc(addr, hubURL, token string, streams ...string) string {
	return fmt.Sprintf("logging: {level: info}\nhealth_check: {address: %q, hub_urls: [%q], node_token: %q}\nstreams:\n", addr, hubURL, token) + strings.Join(streams, "")
}

// TestHubManagedNode runs node processes with hub_urls: the Node API says
// which Hub the Agent uses; a node whose finite streams all completed does
// not exit (the Hub can still restart them); a stream the Hub stopped
// stays stopped after a SIGKILL and a restart with no Hub reachable;
// SIGTERM still stops the node cleanly.
func TestHubManagedNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	const token = "node-token-for-the-cli-test"
	hub := newStubHub(t, token)
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	base := "http://" + addr
	conf := filepath.Join(dir, "node.yaml")
	write := func(doc string) {
		if err := os.WriteFile(conf, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	enqueue := func(c wire.Command) {
		hub.mu.Lock()
		defer hub.mu.Unlock()
		hub.queue = append(hub.queue, c)
	}

	// Finite streams only: completed, the node stays up and managed.
	write(hubNodeDoc(addr, hub.URL, token, finiteStream))
	child := startChild(t, conf, filepath.Join(dir, "state-finite"))
	waitListening(t, addr)
	waitUntil(t, "the finite stream reported completed", func() bool { return hub.stream("finite").State == "completed" })
	var sys struct {
		Agent *struct {
			HubURL    string `json:"hub_url"`
			Connected bool   `json:"connected"`
		} `json:"agent"`
	}
	getJSON(t, base+"/system", &sys)
	if sys.Agent == nil || sys.Agent.HubURL != hub.URL || !sys.Agent.Connected {
		t.Fatalf("/system agent = %+v", sys.Agent)
	}
	enqueue(wire.Command{CommandID: "c0", AttemptID: "a0", Operation: wire.CommandStreamRestart, ResourceID: "finite", Generation: 1, ActionID: "again"})
	waitUntil(t, "the restart of the completed stream reported", func() bool {
		s := hub.stream("finite")
		return s.ActionID == "again" && s.State == "completed"
	})
	stopChild(t, child.Process)

	// The Hub stops a stream; the process is killed.
	state := filepath.Join(dir, "state")
	write(hubNodeDoc(addr, hub.URL, token, endlessStream))
	child = startChild(t, conf, state)
	waitListening(t, addr)
	waitUntil(t, "endless reported running", func() bool { return hub.stream("endless").State == "running" })
	enqueue(wire.Command{CommandID: "c1", AttemptID: "a1", Operation: wire.CommandStreamDesiredState, ResourceID: "endless", Generation: 2, Payload: wire.CommandPayload{State: "stopped"}})
	waitUntil(t, "the stop reported", func() bool {
		s := hub.stream("endless")
		return s.State == "stopped" && s.Generation == 2
	})
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	// No Hub now: the stream the Hub stopped never starts again.
	write(hubNodeDoc(addr, fmt.Sprintf("http://127.0.0.1:%d", freePort(t)), token, endlessStream))
	child = startChild(t, conf, state)
	waitListening(t, addr)
	var s wire.Stream
	waitUntil(t, "the node's view of endless", func() bool {
		getJSON(t, base+"/streams/endless", &s)
		return s.Desired.State == "stopped"
	})
	if s.Observed.State != "stopped" || s.Observed.Counters.Received != 0 {
		t.Errorf("endless after a restart without Hub: %+v", s.Observed)
	}
	getJSON(t, base+"/system", &sys)
	if sys.Agent == nil || sys.Agent.Connected {
		t.Errorf("/system agent without a Hub = %+v", sys.Agent)
	}
	stopChild(t, child.Process)
	if b, err := os.ReadFile(filepath.Join(state, "agent", "hub-state.json")); err != nil || strings.Contains(string(b), token) {
		t.Errorf("agent state: %v (holds the token: %v)", err, strings.Contains(string(b), token))
	}
}
