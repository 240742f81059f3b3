package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	_ "github.com/flowplane/flowplane/internal/connect/all"
	"github.com/flowplane/flowplane/internal/dataplane"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/eventlog"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/node/history"
	"github.com/flowplane/flowplane/internal/openapi/openapitest"
	"github.com/flowplane/flowplane/internal/policy"
	"github.com/flowplane/flowplane/internal/secretref"
	"github.com/flowplane/flowplane/internal/telemetry"
	"github.com/flowplane/flowplane/internal/wire"
)

const (
	testNodeID = "node-test"
	testToken  = "operator-token-0123456789abcdef"
	// waitFor bounds every poll of the suite.
	waitFor = 10 * time.Second
)

// hcLocal is a control-plane server on a free loopback port.
const hcLocal = `health_check:
  enabled: true
  address: 127.0.0.1:0
`

// genStream is a stream that keeps running: an unbounded generate input
// every 10ms into drop.
func genStream(id, payload string) string {
	return fmt.Sprintf(`  - id: %s
    input: {type: generate, context: '{"s": "%s"}', interval: 10ms, batch_size: 1}
    pipeline: {processors: []}
    output: {type: drop}
`, id, payload)
}

// httpStream is a stream writing to url with one extra header value
// (secret references allowed).
func httpStream(id, url, headerValue string) string {
	return fmt.Sprintf(`  - id: %s
    input: {type: generate, context: '{"s": "%s"}', interval: 10ms, batch_size: 1}
    pipeline: {processors: []}
    output:
      type: http
      url: %s
      timeout_ms: 60000
      headers: {X-Api-Key: "%s"}
`, id, id, url, headerValue)
}

// doc assembles a YAML configuration.
func doc(healthCheck string, streams ...string) string {
	return "logging: {level: error}\n" + healthCheck + "streams:\n" + strings.Join(streams, "")
}

// slowServer is an HTTP endpoint that holds every request until released,
// so that stopping a stream writing to it takes until then.
type slowServer struct {
	*httptest.Server
	got     chan struct{} // closed at the first request
	gotOnce sync.Once
	release func()
}

func newSlowServer(t *testing.T) *slowServer {
	t.Helper()
	s := &slowServer{got: make(chan struct{})}
	released := make(chan struct{})
	var once sync.Once
	s.release = func() { once.Do(func() { close(released) }) }
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.gotOnce.Do(func() { close(s.got) })
		select {
		case <-released:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(func() {
		s.release()
		s.Close()
	})
	return s
}

// harness is one node built as cmd/flowplane builds it, served on a real
// loopback listener.
type harness struct {
	t      *testing.T
	base   string // "" when no listener runs
	ln     *node.Listener
	n      *node.Node
	eng    *engine.Engine
	events *eventlog.Log
	hist   *history.Store
	dir    string // the state directory
	client *http.Client
	hopts  node.HandlerOptions
	// token is sent as Authorization: Bearer unless a request sets its own.
	token string
	// dp is the engine's data plane (harnessOptions.dataPlane), or nil.
	dp *dataplane.Server
	// openapi checks answers against the node's OpenAPI document.
	openapi func() (*openapitest.Checker, error)
}

type harnessOptions struct {
	// slow is released before the engine shuts down.
	slow *slowServer
	// noWait skips waiting for every stream to run.
	noWait bool
	// noHistory leaves the configuration history out.
	noHistory bool
	// agent is the handler's AgentStatus hook.
	agent func() node.AgentStatus
	// server bounds the listener's connections and timeouts.
	server httpapi.ServerOptions
	// logs, when set, receives the node's log (level info, logFormat or
	// plain), built as cmd/flowplane builds it: scrubbed by the node's
	// redactor.
	logs      io.Writer
	logFormat string
	// dataPlane gives the engine a data plane on 127.0.0.1:0 (needs the
	// real internal/dataplane); it is closed after the engine.
	dataPlane bool
	// policy, when set, is the node's remote policy (its state directory
	// the harness's).
	policy *config.RemotePolicy
}

func newHarness(t *testing.T, text string, opts ...harnessOptions) *harness {
	t.Helper()
	var o harnessOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	dir := t.TempDir()
	reg := component.Default
	discard := slog.New(slog.DiscardHandler)
	hist, err := history.Open(filepath.Join(dir, "config"), time.Now)
	if err != nil {
		t.Fatalf("history.Open: %v", err)
	}
	version, _, err := hist.Boot([]byte(text), config.YAML, "node.yaml")
	if err != nil {
		t.Fatalf("Boot: %v", err)
	}
	cfg, err := config.Materialize(version.Content, version.Format, reg, secretref.Resolver{})
	if err != nil {
		t.Fatalf("Materialize: %v", err)
	}
	if ps := engine.Check(cfg, reg); len(ps) > 0 {
		t.Fatalf("engine.Check: %v", ps)
	}
	secrets := config.NewRedactor()
	secrets.Merge(cfg.Redactor())
	log := discard
	if o.logs != nil {
		format := o.logFormat
		if format == "" {
			format = "plain"
		}
		if log, _, err = telemetry.NewLogger(config.Logging{Level: "info", Format: format}, o.logs, secrets); err != nil {
			t.Fatal(err)
		}
	}
	metrics := telemetry.NewRegistry()
	events := eventlog.New(eventlog.Options{LastID: time.Now().UnixMilli() * 1000})
	var nd atomic.Pointer[node.Node]
	var dp *dataplane.Server
	if o.dataPlane {
		if dp, err = dataplane.Listen(dataplane.Options{Addr: "127.0.0.1:0", NodeID: testNodeID, Logger: log, Registerer: metrics}); err != nil {
			t.Fatalf("dataplane.Listen: %v", err)
		}
	}
	var pol *policy.Policy
	var remote engine.Sandbox
	if o.policy != nil {
		pol = policy.New(*o.policy, dir)
		remote = engine.Sandbox{FS: pol.FS(), Net: pol.Net()}
	}
	eng := engine.New(engine.Options{
		Registry: reg, Logger: log, StateDir: dir, Metrics: metrics, NodeID: testNodeID, DataPlane: dp,
		OnState: func(id string, st engine.StreamState) {
			if n := nd.Load(); n != nil {
				n.OnStreamState(id, st)
			}
		},
		Remote: remote,
	})
	n := node.New(node.Options{
		Engine: eng, Registry: reg, Events: events, Logger: log, Secrets: secrets,
		NodeID: testNodeID, BootID: uuid.Must(uuid.NewV7()).String(), Version: "test", Policy: pol,
	}, cfg, version.ID)
	if !o.noHistory {
		n.AttachHistory(hist, secretref.Resolver{}, cfg)
	}
	nd.Store(n)
	hopts := node.HandlerOptions{HealthCheck: cfg.HealthCheck, Events: events, Metrics: metrics, Logger: log, AgentStatus: o.agent, Server: o.server}
	ln, err := n.Listen(hopts)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	h := &harness{t: t, ln: ln, n: n, eng: eng, events: events, hist: hist, dir: dir, hopts: hopts, dp: dp,
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}}
	h.openapi = sync.OnceValues(func() (*openapitest.Checker, error) {
		doc, err := n.OpenAPI(hopts)
		if err != nil {
			return nil, err
		}
		return openapitest.Cached(doc)
	})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	if ln != nil {
		h.base = "http://" + ln.Addr().String()
		if ln.TLS() {
			h.base = "https://" + ln.Addr().String()
		}
		go func() { served <- ln.Serve(ctx) }()
	}
	t.Cleanup(func() {
		if o.slow != nil {
			o.slow.release()
		}
		cancel()
		if ln != nil {
			if err := <-served; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}
		h.client.CloseIdleConnections()
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		eng.Shutdown(sctx)
		if dp != nil {
			if err := dp.Close(); err != nil {
				t.Errorf("close the data plane: %v", err)
			}
		}
	})
	events.Append(wire.Event{Kind: wire.EventNodeStarted, NodeID: testNodeID, Message: "node started with configuration " + version.ID})
	if err := eng.Apply(context.Background(), cfg); err != nil {
		t.Fatalf("engine.Apply: %v", err)
	}
	if !o.noWait {
		eventually(t, "every stream running", func() (bool, string) {
			for _, s := range n.Streams() {
				if s.Observed.State != string(engine.StreamRunning) {
					return false, s.ID + " is " + s.Observed.State
				}
			}
			return true, ""
		})
	}
	return h
}

// eventually polls cond every 10ms until it holds, failing after waitFor.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last: %s", what, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// response is one answer, body read.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) String() string {
	return fmt.Sprintf("%d %s", r.Status, bytes.TrimSpace(r.Body))
}

// do sends one request. header holds name, value pairs; Content-Type
// defaults to application/json for a body, Authorization to the harness
// token ("Authorization", "" sends none).
func (h *harness) do(t *testing.T, method, path, body string, header ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	return h.send(t, method, path, rd, header...)
}

// doReader sends a JSON body of unknown length (chunked).
func (h *harness) doReader(t *testing.T, method, path string, body io.Reader) response {
	t.Helper()
	return h.send(t, method, path, struct{ io.Reader }{body})
}

func (h *harness) send(t *testing.T, method, path string, rd io.Reader, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, h.base+path, rd)
	if err != nil {
		t.Fatalf("NewRequest %s %s: %v", method, path, err)
	}
	if rd != nil {
		// A body is JSON unless the test says otherwise; a bodiless
		// mutation goes without Content-Type, as curl -X POST sends it.
		req.Header.Set("Content-Type", "application/json")
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	res, err := h.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	// Every answer the suite gets must be one the OpenAPI document allows.
	if c := h.checker(t); c != nil {
		if err := c.Check(req, res.StatusCode, res.Header, b); err != nil {
			t.Error(err)
		}
	}
	return response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// expect sends a request and fails unless it answers status.
func (h *harness) expect(t *testing.T, status int, method, path, body string, header ...string) response {
	t.Helper()
	r := h.do(t, method, path, body, header...)
	if r.Status != status {
		t.Fatalf("%s %s = %s, want %d", method, path, r, status)
	}
	return r
}

// decode unmarshals a JSON body.
func decode[T any](t *testing.T, r response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, r, err)
	}
	return v
}

// problem decodes a problem envelope and checks its code.
func problem(t *testing.T, r response, code string) wire.Problem {
	t.Helper()
	p := decode[wire.Problem](t, r)
	if p.Code != code {
		t.Fatalf("problem code = %q, want %q (%s)", p.Code, code, r)
	}
	if p.Message == "" || p.CorrelationID == "" {
		t.Fatalf("problem envelope incomplete: %s", r)
	}
	if got := r.Header.Get("X-Correlation-ID"); got != p.CorrelationID {
		t.Fatalf("X-Correlation-ID %q differs from the problem's %q", got, p.CorrelationID)
	}
	return p
}

// waitOp polls an operation until it is terminal and returns it.
func (h *harness) waitOp(t *testing.T, id string) wire.Operation {
	t.Helper()
	var op wire.Operation
	eventually(t, "operation "+id+" to finish", func() (bool, string) {
		op = decode[wire.Operation](t, h.expect(t, 200, "GET", "/operations/"+id, ""))
		switch op.State {
		case wire.OpSucceeded, wire.OpFailed, wire.OpCancelled, wire.OpTimedOut, wire.OpSuperseded:
			return true, ""
		}
		return false, op.State
	})
	return op
}

// succeed waits for an operation and requires it succeeded.
func (h *harness) succeed(t *testing.T, id string) wire.Operation {
	t.Helper()
	op := h.waitOp(t, id)
	if op.State != wire.OpSucceeded {
		t.Fatalf("operation %s (%s) ended %s: %+v", id, op.Operation, op.State, op.Failure)
	}
	return op
}

// stream fetches one stream's views.
func (h *harness) stream(t *testing.T, id string) wire.Stream {
	t.Helper()
	return decode[wire.Stream](t, h.expect(t, 200, "GET", "/streams/"+id, ""))
}

// waitInSync polls a stream until its convergence is in_sync.
func (h *harness) waitInSync(t *testing.T, id string) wire.Stream {
	t.Helper()
	var s wire.Stream
	eventually(t, "stream "+id+" in_sync", func() (bool, string) {
		s = h.stream(t, id)
		return s.Convergence == wire.ConvergenceInSync, s.Convergence + " observed " + s.Observed.State
	})
	return s
}

// action posts a stream action and returns the 202 answer.
func (h *harness) action(t *testing.T, id, action string, header ...string) wire.DesiredStateResponse {
	t.Helper()
	r := h.expect(t, 202, "POST", "/streams/"+id+"/"+action, "", header...)
	return decode[wire.DesiredStateResponse](t, r)
}

// configBody is the JSON body of the configuration endpoints.
func configBody(t *testing.T, format, content string) string {
	t.Helper()
	b, err := json.Marshal(map[string]string{"format": format, "content": content})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// concrete fills a route pattern's wildcards.
func concrete(pattern string, values map[string]string) string {
	out := pattern
	for k, v := range values {
		out = strings.ReplaceAll(out, "{"+k+"}", v)
	}
	return out
}

// mustJSON encodes v.
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
