package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/agent"
	"github.com/flowplane/flowplane/internal/hub"
	"github.com/flowplane/flowplane/internal/wire"
)

const operatorToken = "operator-token-for-agent-tests"

// realHub is internal/hub served on a loopback listener, reached through a
// loopback proxy that records every agent request and can answer 503.
type realHub struct {
	h       *hub.Hub
	url     string // the Hub itself
	proxy   *tapProxy
	storage string // the SQLite file
}

type tapProxy struct {
	*httptest.Server
	mu       sync.Mutex
	requests []captured
	down     bool
}

func newTapProxy(t *testing.T, target string) *tapProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &tapProxy{}
	p.Server = httptest.NewServer(tap(rp, func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.down {
			return http.StatusBadGateway
		}
		return 0
	}, func(c captured) {
		p.mu.Lock()
		p.requests = append(p.requests, c)
		p.mu.Unlock()
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *tapProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

func (p *tapProxy) count(path string, status int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.requests {
		if r.Path == path && (status == 0 || r.Status == status) {
			n++
		}
	}
	return n
}

// checkNoTokenLeak: the node token only ever went to register.
func (p *tapProxy) checkNoTokenLeak(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.requests) == 0 {
		t.Error("no request went through the proxy")
	}
	for _, r := range p.requests {
		if strings.Contains(r.Auth, testNodeToken) && r.Path != "/api/v1/agent/register" || bytes.Contains(r.Body, []byte(testNodeToken)) {
			t.Errorf("node token sent with %s %s", r.Method, r.Path)
		}
	}
}

func startRealHub(t *testing.T) *realHub {
	t.Helper()
	storage := filepath.Join(t.TempDir(), "hub.db")
	h, addr := serveHub(t, hub.Settings{Storage: storage})
	rh := &realHub{h: h, url: "http://" + addr, storage: storage}
	rh.proxy = newTapProxy(t, rh.url)
	return rh
}

// serveHub serves internal/hub on a loopback port with the test's tokens
// and the other settings of st, until the test ends; it returns the Hub
// and its address.
func serveHub(t *testing.T, st hub.Settings) (*hub.Hub, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st.Address, st.OperatorToken, st.NodeToken = "127.0.0.1:0", operatorToken, testNodeToken
	h, err := hub.New(ctx, hub.Options{Settings: st, Logger: slog.New(slog.DiscardHandler), Version: "test"})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("hub Serve: %v", err)
		}
		_ = h.Close()
	})
	return h, ln.Addr().String()
}

// operator sends an operator API request to the Hub and decodes a 2xx
// answer into out.
func (rh *realHub) operator(t *testing.T, method, path, body string, out any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, rh.url+"/api/v1"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	if body != "" || method != "GET" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// waitConverged polls the Hub's view of a stream until cond holds.
func (rh *realHub) waitStream(t *testing.T, stream, what string, cond func(wire.Stream) bool) wire.Stream {
	t.Helper()
	var v wire.Stream
	eventually(t, stream+" "+what+" at the Hub", func() bool {
		req, _ := http.NewRequest("GET", rh.url+"/api/v1/nodes/"+testNodeID+"/streams/"+stream, nil)
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return false
		}
		v = wire.Stream{}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
		return cond(v)
	})
	return v
}

func inSync(gen int64, state string) func(wire.Stream) bool {
	return func(v wire.Stream) bool {
		return v.Convergence == wire.ConvergenceInSync && v.Desired.Generation == gen && v.Observed.State == state && v.Observed.Generation == gen
	}
}

// TestRealHub runs the Agent against internal/hub: register with the node
// token behind a dead first URL; desired-state writes and a restart
// converge (in_sync, with the restart's action id); a replaced session is
// renewed transparently without touching the streams; a Hub answering 5xx
// is left for the next URL; after a restart of the node process the Hub
// sees the same generations and stays in_sync; the node token only ever
// goes to register.
func TestRealHub(t *testing.T) {
	rh := startRealHub(t)
	second := newTapProxy(t, rh.url) // another URL of the same Hub
	dir := t.TempDir()
	urls := []string{deadURL(t), rh.proxy.URL, second.URL}
	tn := startNode(t, nodeOptions{stateDir: dir, hubURLs: urls, streams: []string{"a", "b"}})

	// Registered behind the dead URL; the Hub sees the node and its streams.
	rh.waitStream(t, "a", "observed running", func(v wire.Stream) bool { return v.Observed.State == "running" })
	var node struct {
		Status       string   `json:"status"`
		Capabilities []string `json:"capabilities"`
	}
	rh.operator(t, "GET", "/nodes/"+testNodeID, "", &node)
	if node.Status != "online" || !strings.Contains(strings.Join(node.Capabilities, ","), wire.CapabilityStreamControl) {
		t.Errorf("hub node view %+v", node)
	}
	if st := tn.agent.Status(); st.HubURL != rh.proxy.URL || !st.Connected {
		t.Errorf("agent status %+v", st)
	}

	// Desired state through the operator API converges.
	var w wire.DesiredStateResponse
	rh.operator(t, "PUT", "/nodes/"+testNodeID+"/streams/a/desired-state", `{"state":"stopped","config_version":"v1"}`, &w)
	rh.waitStream(t, "a", "stopped in_sync", inSync(w.Generation, "stopped"))
	if s := tn.stream(t, "a"); s.Observed.State != "stopped" {
		t.Errorf("node view of a: %s", s.Observed.State)
	}
	if evs := tn.hubEvents(wire.EventCommandSucceeded, w.OperationID); len(evs) != 1 {
		t.Errorf("%d hub command_succeeded events for %s on the node", len(evs), w.OperationID)
	}
	rh.operator(t, "PUT", "/nodes/"+testNodeID+"/streams/b/desired-state", `{"state":"running","config_version":"v1"}`, &w)
	rh.waitStream(t, "b", "running in_sync", inSync(w.Generation, "running"))
	rh.operator(t, "POST", "/nodes/"+testNodeID+"/streams/b/actions/restart", "", &w)
	v := rh.waitStream(t, "b", "restarted in_sync", inSync(w.Generation, "running"))
	if w.ActionID == "" || v.Observed.ActionID != w.ActionID {
		t.Errorf("restart action id: hub %q, observed %q", w.ActionID, v.Observed.ActionID)
	}

	// Another registration of the node id replaces the Agent's session: its
	// next call is answered 401 and it registers again, streams untouched.
	startedB := tn.stream(t, "b").Observed.StartedAt
	registers := rh.proxy.count("/api/v1/agent/register", 200)
	replaceSession(t, rh.url, dir)
	eventually(t, "a transparent re-register", func() bool {
		return rh.proxy.count("/api/v1/agent/register", 200) > registers && rh.proxy.count("/api/v1/agent/commands", 401)+rh.proxy.count("/api/v1/agent/heartbeat", 401)+rh.proxy.count("/api/v1/agent/report", 401)+rh.proxy.count("/api/v1/agent/taps", 401) > 0
	})
	if s := tn.stream(t, "b"); !s.Observed.StartedAt.Equal(startedB.Time) || s.Observed.State != "running" {
		t.Errorf("a re-register touched stream b: %+v", s.Observed)
	}
	rh.operator(t, "PUT", "/nodes/"+testNodeID+"/streams/a/desired-state", `{"state":"running","config_version":"v1"}`, &w)
	rh.waitStream(t, "a", "running in_sync after the re-register", inSync(w.Generation, "running"))

	// The URL in use answers 502: the Agent moves on to the next one.
	rh.proxy.setDown(true)
	rh.operator(t, "PUT", "/nodes/"+testNodeID+"/streams/a/desired-state", `{"state":"stopped","config_version":"v1"}`, &w)
	rh.waitStream(t, "a", "stopped in_sync through the next URL", inSync(w.Generation, "stopped"))
	if st := tn.agent.Status(); st.HubURL != second.URL {
		t.Errorf("agent uses %s, want the third URL", st.HubURL)
	}
	genA := w.Generation

	// A new process over the same state directory: same generations, a
	// stays stopped, the Hub stays in_sync.
	tn.stop()
	next := startNode(t, nodeOptions{stateDir: dir, hubURLs: urls, streams: []string{"a", "b"}})
	rh.waitStream(t, "a", "in_sync after the node restarted", func(v wire.Stream) bool {
		return inSync(genA, "stopped")(v) && v.Observed.Generation == genA
	})
	if s := next.stream(t, "a"); s.Observed.Counters.Received != 0 {
		t.Errorf("a ran after the restart: %+v", s.Observed)
	}
	next.stop()
	rh.proxy.checkNoTokenLeak(t)
	second.checkNoTokenLeak(t)
}

// replaceSession registers the test node id directly, as a second process
// over the same state directory would (same node credential), which
// replaces the Agent's session.
func replaceSession(t *testing.T, hubURL, stateDir string) {
	t.Helper()
	cred, err := os.ReadFile(filepath.Join(stateDir, "agent", "node_credential"))
	if err != nil {
		t.Fatal(err)
	}
	if status, _ := registerDirect(t, hubURL, strings.TrimSpace(string(cred))); status != 200 {
		t.Fatalf("register: %d", status)
	}
}

// registerDirect registers the test node id with cred and the node token,
// as another process would; it returns the status and the problem code.
func registerDirect(t *testing.T, hubURL, cred string) (int, string) {
	t.Helper()
	body, _ := json.Marshal(wire.RegisterRequest{NodeID: testNodeID, BootID: "intruder", ProtocolVersion: wire.ProtocolVersion,
		Capabilities: []string{wire.CapabilityStreamControl}, NodeCredential: cred})
	req, _ := http.NewRequest("POST", hubURL+"/api/v1/agent/register", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testNodeToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p wire.Problem
	_ = json.NewDecoder(resp.Body).Decode(&p)
	return resp.StatusCode, p.Code
}

// TestRealHubSessionRenewal: with one-second sessions (the Hub's minimum)
// the Agent renews ahead of expiry and no call is answered 401.
func TestRealHubSessionRenewal(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a session renewal (~1s)")
	}
	rh := startRealHub(t)
	tn := startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{rh.proxy.URL}, streams: []string{"a"}, tune: func(o *agent.Options) {
		o.SessionTTL = time.Second
	}})
	eventually(t, "a renewal", func() bool { return rh.proxy.count("/api/v1/agent/register", 200) >= 2 })
	for _, p := range []string{"/api/v1/agent/commands", "/api/v1/agent/heartbeat", "/api/v1/agent/report"} {
		if n := rh.proxy.count(p, 401); n > 0 {
			t.Errorf("%s answered 401 %d times", p, n)
		}
	}
	tn.stop()
	rh.proxy.checkNoTokenLeak(t)
}
