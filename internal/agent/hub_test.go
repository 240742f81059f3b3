package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// testHub is a wire-level Hub agent API on a loopback listener, enough to
// drive an Agent: register (node token), sessions, heartbeat, report,
// long-polled commands, results. It captures every request. The end-to-end
// tests run against internal/hub (realhub_test.go); this one stays for what
// the real Hub does not do on demand: expire every session, deliver a
// command twice or already expired, refuse the node token, issue sessions
// shorter than the Hub's one-second minimum.
type testHub struct {
	*httptest.Server
	nodeToken string

	mu           sync.Mutex
	changed      chan struct{} // closed and replaced on every change
	requests     []captured
	sessions     map[string]bool // token -> valid
	sessionLife  time.Duration   // 0: the registered session_ttl_ms
	heartbeatMS  int64
	epoch        int64 // the leader epoch register and heartbeat answers carry
	registers    []wire.RegisterRequest
	reports      []wire.Report
	jobObs       []wire.JobObservations
	results      []result
	queue        []wire.Command
	unavailable  bool                                           // answer 503 to everything
	resultDelay  time.Duration                                  // final results are answered this late
	holdResult   func(commandID string, res wire.CommandResult) // when set, called before a result is recorded and answered
	seq          int
	answered401s int
}

type captured struct {
	Method, Path, Auth string
	Body               []byte
	Status             int
}

type result struct {
	CommandID string
	wire.CommandResult
}

func newTestHub(t testing.TB, nodeToken string) *testHub {
	t.Helper()
	h := &testHub{nodeToken: nodeToken, sessions: map[string]bool{}, changed: make(chan struct{}), heartbeatMS: 5000}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/agent/register", h.register)
	mux.HandleFunc("POST /api/v1/agent/heartbeat", h.authed(h.heartbeat))
	mux.HandleFunc("POST /api/v1/agent/report", h.authed(h.report))
	mux.HandleFunc("POST /api/v1/agent/job-observations", h.authed(h.jobObservations))
	mux.HandleFunc("GET /api/v1/agent/commands", h.authed(h.commands))
	mux.HandleFunc("POST /api/v1/agent/commands/{id}/result", h.authed(h.result))
	h.Server = httptest.NewServer(tap(mux, func() int {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.unavailable {
			return http.StatusServiceUnavailable
		}
		return 0
	}, func(c captured) { h.update(func() { h.requests = append(h.requests, c) }) }))
	t.Cleanup(h.Close)
	return h
}

// tap serves next, or answers the status down returns when it is not 0,
// and hands every request, with its body and answer status, to record.
func tap(next http.Handler, down func() int, record func(captured)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &statusRecorder{ResponseWriter: w, status: 200}
		if status := down(); status != 0 {
			rec.WriteHeader(status)
		} else {
			next.ServeHTTP(rec, r)
		}
		record(captured{Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Body: body, Status: rec.status})
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(s int) {
	r.status = s
	r.ResponseWriter.WriteHeader(s)
}

// update changes the hub's state under its lock and wakes waiters.
func (h *testHub) update(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f()
	close(h.changed)
	h.changed = make(chan struct{})
}

func problemJSON(w http.ResponseWriter, status int, code string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(wire.Problem{Code: code, Message: code, CorrelationID: "test"})
}

func (h *testHub) register(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+h.nodeToken {
		problemJSON(w, http.StatusUnauthorized, "unauthorized")
		return
	}
	var req wire.RegisterRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		problemJSON(w, http.StatusBadRequest, "invalid_json")
		return
	}
	var resp wire.RegisterResponse
	h.update(func() {
		h.seq++
		tok := "session-" + strconv.Itoa(h.seq)
		h.sessions[tok] = true
		h.registers = append(h.registers, req)
		life := h.sessionLife
		if life == 0 {
			life = time.Duration(req.SessionTTLMS) * time.Millisecond
		}
		resp = wire.RegisterResponse{SessionToken: tok, SessionExpiresAt: wire.At(time.Now().Add(life)), LeaseTTLMS: req.LeaseTTLMS, HeartbeatIntervalMS: h.heartbeatMS, Epoch: h.epoch}
	})
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func (h *testHub) authed(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		h.mu.Lock()
		ok := h.sessions[tok]
		if !ok {
			h.answered401s++
		}
		h.mu.Unlock()
		if !ok {
			problemJSON(w, http.StatusUnauthorized, "session_expired")
			return
		}
		next(w, r)
	}
}

func (h *testHub) heartbeat(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	epoch := h.epoch
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(wire.HeartbeatResponse{LeaseExpiresAt: wire.At(time.Now().Add(15 * time.Second)), Epoch: epoch})
}

func (h *testHub) report(w http.ResponseWriter, r *http.Request) {
	var rep wire.Report
	if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
		problemJSON(w, http.StatusBadRequest, "invalid_json")
		return
	}
	h.update(func() { h.reports = append(h.reports, rep) })
	w.WriteHeader(http.StatusNoContent)
}

func (h *testHub) jobObservations(w http.ResponseWriter, r *http.Request) {
	var o wire.JobObservations
	if err := json.NewDecoder(r.Body).Decode(&o); err != nil {
		problemJSON(w, http.StatusBadRequest, "invalid_json")
		return
	}
	h.update(func() { h.jobObs = append(h.jobObs, o) })
	w.WriteHeader(http.StatusNoContent)
}

func (h *testHub) commands(w http.ResponseWriter, r *http.Request) {
	waitMS, _ := strconv.Atoi(r.URL.Query().Get("wait_ms"))
	deadline := time.NewTimer(time.Duration(waitMS) * time.Millisecond)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		items, changed := h.queue, h.changed
		if len(items) > 0 {
			h.queue = nil
		}
		h.mu.Unlock()
		if len(items) > 0 {
			h.update(func() {})
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(wire.Page[wire.Command]{Items: items, Page: 1, PageSize: len(items), Total: len(items)})
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(wire.Page[wire.Command]{Items: []wire.Command{}, Page: 1, PageSize: 50})
			return
		case <-r.Context().Done():
			return
		}
	}
}

func (h *testHub) result(w http.ResponseWriter, r *http.Request) {
	var res wire.CommandResult
	if err := json.NewDecoder(r.Body).Decode(&res); err != nil {
		problemJSON(w, http.StatusBadRequest, "invalid_json")
		return
	}
	h.mu.Lock()
	delay, hold := h.resultDelay, h.holdResult
	h.mu.Unlock()
	if res.State != wire.ResultAcknowledged && delay > 0 {
		time.Sleep(delay)
	}
	if hold != nil {
		hold(r.PathValue("id"), res)
	}
	h.update(func() { h.results = append(h.results, result{CommandID: r.PathValue("id"), CommandResult: res}) })
	w.WriteHeader(http.StatusNoContent)
}

// enqueue queues commands for the next poll, delivered together.
func (h *testHub) enqueue(cmds ...wire.Command) {
	h.update(func() { h.queue = append(h.queue, cmds...) })
}

// expireSessions makes every session answer 401 session_expired.
func (h *testHub) expireSessions() {
	h.update(func() { clear(h.sessions) })
}

func (h *testHub) setUnavailable(down bool) {
	h.update(func() { h.unavailable = down })
}

// waitFor waits until cond (called under the hub's lock) holds.
func (h *testHub) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	timeout := time.NewTimer(waitFor)
	defer timeout.Stop()
	for {
		h.mu.Lock()
		ok, changed := cond(), h.changed
		h.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			h.mu.Lock()
			defer h.mu.Unlock()
			t.Fatalf("timed out waiting for %s; %d registers, %d reports, results %+v", what, len(h.registers), len(h.reports), h.results)
		}
	}
}

// lastReport returns the newest report (under the hub's lock).
func (h *testHub) lastReportLocked() (wire.Report, bool) {
	if len(h.reports) == 0 {
		return wire.Report{}, false
	}
	return h.reports[len(h.reports)-1], true
}

// waitStream waits for a report whose stream id satisfies cond and
// returns that stream.
func (h *testHub) waitStream(t testing.TB, id, what string, cond func(wire.ReportStream) bool) wire.ReportStream {
	t.Helper()
	var got wire.ReportStream
	h.waitFor(t, "report of "+id+" "+what, func() bool {
		rep, ok := h.lastReportLocked()
		if !ok {
			return false
		}
		for _, s := range rep.Streams {
			if s.ID == id && cond(s) {
				got = s
				return true
			}
		}
		return false
	})
	return got
}

// resultsFor returns the results posted for a command.
func (h *testHub) resultsFor(id string) []result {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []result
	for _, r := range h.results {
		if r.CommandID == id {
			out = append(out, r)
		}
	}
	return out
}

// waitFinal waits for a final (not acknowledged) result of an attempt.
func (h *testHub) waitFinal(t *testing.T, commandID, attemptID string) result {
	t.Helper()
	var got result
	h.waitFor(t, fmt.Sprintf("final result of %s/%s", commandID, attemptID), func() bool {
		for _, r := range h.results {
			if r.CommandID == commandID && r.AttemptID == attemptID && r.State != wire.ResultAcknowledged {
				got = r
				return true
			}
		}
		return false
	})
	return got
}

// checkNoTokenLeak requires that the node token was presented only to
// register and appears in no request body.
func (h *testHub) checkNoTokenLeak(t *testing.T, token string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.requests {
		if strings.Contains(r.Auth, token) && r.Path != "/api/v1/agent/register" {
			t.Errorf("node token presented to %s %s", r.Method, r.Path)
		}
		if bytes.Contains(r.Body, []byte(token)) {
			t.Errorf("node token in the body of %s %s", r.Method, r.Path)
		}
	}
}

// waitFor bounds every wait of the suite; it is not a timing assertion.
const waitFor = 15 * time.Second
