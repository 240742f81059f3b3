package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

const testToken = "s3cret-operator-token"

type testHub struct {
	h    *Hub
	base string
	stop func()
}

// serve opens a Hub over path (not restored: the caller decides) and
// serves it on 127.0.0.1:0 until stop.
func serve(t *testing.T, path, token string, restore bool) *testHub {
	t.Helper()
	return serveWith(t, path, token, restore, httpapi.ServerOptions{})
}

// serveWith is serve with the listener's connection bounds and timeouts.
func serveWith(t *testing.T, path, token string, restore bool, so httpapi.ServerOptions) *testHub {
	t.Helper()
	return serveOptions(t, restore, Options{
		Settings: Settings{Address: "127.0.0.1:0", Storage: path, OperatorToken: token, NodeToken: nodeTokenFor(token)},
		Logger:   slog.New(slog.DiscardHandler), Version: "test", Server: so,
	})
}

// serveOptions starts a Hub with o on a loopback port.
func serveOptions(t *testing.T, restore bool, o Options) *testHub {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h, err := open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if restore {
		h.restore(ctx)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx, ln) }()
	stopped := false
	th := &testHub{h: h, base: "http://" + ln.Addr().String()}
	th.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if err := h.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	}
	t.Cleanup(th.stop)
	return th
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) problem(t *testing.T) wire.Problem {
	t.Helper()
	var p wire.Problem
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem %q: %v", r.body, err)
	}
	return p
}

func (th *testHub) do(t *testing.T, method, path, body string, hdr ...string) resp {
	t.Helper()
	req := th.request(t, context.Background(), method, path, body, hdr...)
	r := roundTrip(t, http.DefaultClient, req)
	checkOpenAPI(t, th.h, req, r.status, r.header, r.body)
	return r
}

// roundTrip sends req with c and reads the whole answer.
func roundTrip(t *testing.T, c *http.Client, req *http.Request) resp {
	t.Helper()
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// request builds a request to the test Hub; hdr holds header name, value
// pairs.
func (th *testHub) request(t *testing.T, ctx context.Context, method, path, body string, hdr ...string) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, th.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		// A body is JSON unless the test says otherwise; a bodiless
		// mutation goes without Content-Type, as curl -X POST sends it.
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req
}

func decode[T any](t *testing.T, r resp) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
	return v
}

func dbPath(t testing.TB) string { return filepath.Join(t.TempDir(), "hub.db") }

const streamPath = "/api/v1/nodes/n1/streams/s1"

func TestDesiredStateWrite(t *testing.T) {
	th := serve(t, dbPath(t), "", true)

	r := th.do(t, "PUT", streamPath+"/desired-state", `{"state":"running","config_version":"v1"}`)
	if r.status != http.StatusAccepted {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	got := decode[wire.DesiredStateResponse](t, r)
	if got.OperationID == "" || got.IntentID != got.OperationID {
		t.Fatalf("operation ids: %+v", got)
	}
	want := wire.DesiredStateResponse{OperationID: got.OperationID, IntentID: got.OperationID, NodeID: "n1", StreamID: "s1",
		Generation: 1, DesiredState: "running", ConfigVersion: "v1", Convergence: "pending", NodeStatus: "unknown",
		Warnings: []wire.Warning{{Code: "node_unknown", Message: "no node with this id has registered with the Hub; the intent waits for it until it expires"}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("body (-want +got):\n%s", d)
	}
	if loc := r.header.Get("Location"); loc != "/api/v1/operations/"+got.OperationID {
		t.Errorf("Location = %q", loc)
	}
	if et := r.header.Get("ETag"); et != `"generation-1"` {
		t.Errorf("ETag = %q", et)
	}

	r = th.do(t, "PUT", streamPath+"/desired-state", `{"state":"stopped","config_version":"v1"}`)
	if g := decode[wire.DesiredStateResponse](t, r); r.status != 202 || g.Generation != 2 {
		t.Fatalf("second PUT: %d %s", r.status, r.body)
	}

	r = th.do(t, "PUT", streamPath+"/desired-state", `{"state":"running","config_version":"v2"}`, "If-Match", `"generation-1"`)
	if r.status != http.StatusPreconditionFailed {
		t.Fatalf("stale If-Match: %d %s", r.status, r.body)
	}
	p := r.problem(t)
	wantDetails := map[string]any{"expected_generation": float64(1), "current_generation": float64(2),
		"resource": map[string]any{"node_id": "n1", "stream_id": "s1"}}
	if p.Code != "generation_conflict" || !cmp.Equal(p.Details, wantDetails) {
		t.Errorf("412 problem: %+v (details diff %s)", p, cmp.Diff(wantDetails, p.Details))
	}

	r = th.do(t, "PUT", streamPath+"/desired-state", `{"state":"running","config_version":"v2"}`, "If-Match", `W/"generation-2"`)
	if g := decode[wire.DesiredStateResponse](t, r); r.status != 202 || g.Generation != 3 {
		t.Fatalf("matching If-Match: %d %s", r.status, r.body)
	}

	for _, tc := range []struct{ name, body, ifMatch, code string }{
		{"bad state", `{"state":"paused","config_version":"v1"}`, "", "validation_failed"},
		{"unknown field", `{"state":"running","extra":1}`, "", "invalid_json"},
		{"malformed If-Match", `{"state":"running"}`, "generation-x", "invalid_header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := []string{}
			if tc.ifMatch != "" {
				h = append(h, "If-Match", tc.ifMatch)
			}
			r := th.do(t, "PUT", streamPath+"/desired-state", tc.body, h...)
			if p := r.problem(t); p.Code != tc.code {
				t.Errorf("status %d code %q, want %q", r.status, p.Code, tc.code)
			}
		})
	}

	r = th.do(t, "GET", streamPath, "")
	if r.status != 200 || r.header.Get("ETag") != `"generation-3"` {
		t.Fatalf("GET stream: %d %v %s", r.status, r.header.Get("ETag"), r.body)
	}
	view := decode[wire.Stream](t, r)
	if d := cmp.Diff(wire.StreamDesired{State: "running", Generation: 3, ConfigVersion: "v2"}, view.Desired); d != "" {
		t.Errorf("desired (-want +got):\n%s", d)
	}
	if view.LatestOperation == nil || view.LatestOperation.Generation != 3 || view.Convergence != "pending" {
		t.Errorf("latest operation / convergence: %+v", view)
	}
	if r := th.do(t, "GET", "/api/v1/nodes/n1/streams/nope", ""); r.status != 404 || r.problem(t).Code != "stream_not_found" {
		t.Errorf("unknown stream: %d %s", r.status, r.body)
	}

	m := th.do(t, "GET", "/metrics", "")
	if m.status != 200 || !bytes.Contains(m.body, []byte("svc_hub_intents_accepted_total 3")) {
		t.Errorf("metrics: %d, counter missing or wrong", m.status)
	}
}

func TestIdempotencyKey(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	auth := []string{"Authorization", "Bearer " + testToken, "Idempotency-Key", "k-1"}
	first := th.do(t, "PUT", streamPath+"/desired-state", `{"state":"running","config_version":"v1"}`, auth...)
	if first.status != 202 {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	again := th.do(t, "PUT", streamPath+"/desired-state", `{"state":"running","config_version":"v1"}`, auth...)
	if again.status != 202 || again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.body, first.body) {
		t.Errorf("replay: %d %q %s", again.status, again.header.Get("Idempotent-Replayed"), again.body)
	}
	if again.header.Get("Location") != first.header.Get("Location") || again.header.Get("ETag") != `"generation-1"` {
		t.Errorf("replayed headers: %v", again.header)
	}
	reused := th.do(t, "PUT", streamPath+"/desired-state", `{"state":"stopped","config_version":"v1"}`, auth...)
	if reused.status != 409 || reused.problem(t).Code != "idempotency_key_reused" {
		t.Errorf("reuse: %d %s", reused.status, reused.body)
	}
	ops := decode[wire.Page[wire.Operation]](t, th.do(t, "GET", "/api/v1/operations", "", auth[:2]...))
	if ops.Total != 1 {
		t.Errorf("operations after replay = %d, want 1", ops.Total)
	}
}

func TestDurableAcrossRestart(t *testing.T) {
	path := dbPath(t)
	th := serve(t, path, "", true)
	w := decode[wire.DesiredStateResponse](t, th.do(t, "PUT", streamPath+"/desired-state", `{"state":"running","config_version":"v7"}`))
	th.stop()

	h, err := New(context.Background(), Options{Settings: Settings{Storage: path}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if !h.Ready() {
		t.Fatal("not ready after New")
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}

	th2 := serve(t, path, "", true)
	view := decode[wire.Stream](t, th2.do(t, "GET", streamPath, ""))
	if view.Desired.Generation != 1 || view.Desired.ConfigVersion != "v7" || view.Desired.State != "running" {
		t.Errorf("after restart: %+v", view.Desired)
	}
	op := decode[wire.Operation](t, th2.do(t, "GET", "/api/v1/operations/"+w.OperationID, ""))
	if op.State != "pending" || op.Generation != 1 {
		t.Errorf("operation after restart: %+v", op)
	}
	sys := decode[System](t, th2.do(t, "GET", "/api/v1/system", ""))
	if sys.Restored.Resources != 1 || sys.Restored.PendingOutbox != 1 || sys.Storage != "durable" {
		t.Errorf("system after restart: %+v", sys)
	}
}

func TestAuthOnEveryAPIRoute(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	routes := th.h.Routes()
	if len(routes) < 10 {
		t.Fatalf("only %d routes", len(routes))
	}
	for _, rt := range routes {
		path := strings.NewReplacer("{$}", "", "{node_id}", "n1", "{id}", "x", "{kind}", "input", "{name}", "generate", "{action}", "start").Replace(rt.Pattern)
		t.Run(rt.Method+" "+rt.Pattern, func(t *testing.T) {
			body := ""
			if rt.Method == "PUT" {
				body = `{"state":"running"}`
			}
			r := th.do(t, rt.Method, path, body)
			api := strings.HasPrefix(rt.Pattern, APIPrefix+"/")
			agent := strings.HasPrefix(rt.Pattern, APIPrefix+"/agent/")
			if api == rt.Public {
				t.Fatalf("route %s public=%v", rt.Pattern, rt.Public)
			}
			if api && (r.status != 401 || r.header.Get("WWW-Authenticate") == "") {
				t.Errorf("no token: %d %s", r.status, r.body)
			}
			if api && !agent && r.problem(t).Code != "unauthorized" {
				t.Errorf("no token: code %s", r.body)
			}
			if !api && r.status == 401 {
				t.Errorf("public route answered 401")
			}
			if !api {
				return
			}
			if r := th.do(t, rt.Method, path, body, "Authorization", "Bearer wrong"); r.status != 401 {
				t.Errorf("wrong token: %d", r.status)
			}
			status := th.status(t, rt.Method, path, body, "Authorization", "Bearer "+testToken)
			switch {
			case agent && status != 401:
				t.Errorf("agent route accepted the operator token: %d", status)
			case !agent && status == 401:
				t.Errorf("right token answered 401")
			}
		})
	}
}

// status sends a request and returns its status without reading the body,
// so streaming routes (SSE, long polls) answer too.
func (th *testHub) status(t *testing.T, method, path, body string, hdr ...string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := http.DefaultClient.Do(th.request(t, ctx, method, path, body, hdr...))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func TestRecovering(t *testing.T) {
	th := serve(t, dbPath(t), "", false)
	check := func(path string, status int, code string) {
		t.Helper()
		r := th.do(t, "GET", path, "")
		if r.status != status {
			t.Errorf("%s: %d %s, want %d", path, r.status, r.body, status)
		}
		if code != "" {
			if p := r.problem(t); p.Code != code || p.CorrelationID == "" {
				t.Errorf("%s: problem %+v, want %s", path, p, code)
			}
		}
	}
	// A restore that fails keeps the Hub recovering.
	th.h.snapshot = func(context.Context) (store.Snapshot, error) {
		return store.Snapshot{}, errors.New("boom")
	}
	for _, restoreFails := range []bool{false, true} {
		if restoreFails {
			th.h.restore(context.Background())
		}
		check("/api/v1/system", 503, "recovering")
		check(streamPath, 503, "recovering")
		check("/metrics", 503, "recovering")
		check("/readiness", 503, "")
		check("/liveness", 200, "")
	}
	if p := decode[Probe](t, th.do(t, "GET", "/readiness", "")); p.Reason != "restore_failed" {
		t.Errorf("readiness after failed restore: %+v", p)
	}
	th.h.snapshot = th.h.st.Snapshot
	th.h.restore(context.Background())
	check("/api/v1/system", 200, "")
	check("/readiness", 200, "")
	check(streamPath, 404, "stream_not_found")
}

func TestReadsAndCancel(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	put := func(node, stream, state, corr string) wire.DesiredStateResponse {
		t.Helper()
		r := th.do(t, "PUT", "/api/v1/nodes/"+node+"/streams/"+stream+"/desired-state",
			`{"state":"`+state+`","config_version":"v1"}`, "X-Correlation-ID", corr)
		if r.status != 202 {
			t.Fatalf("PUT: %d %s", r.status, r.body)
		}
		return decode[wire.DesiredStateResponse](t, r)
	}
	a := put("n1", "s1", "running", "corr-a")
	b := put("n1", "s2", "running", "corr-b")
	c := put("n2", "s1", "stopped", "corr-c")
	sup := put("n1", "s1", "stopped", "corr-d") // supersedes a

	opsOf := func(q string) []string {
		t.Helper()
		r := th.do(t, "GET", "/api/v1/operations"+q, "")
		if r.status != 200 {
			t.Fatalf("operations%s: %d %s", q, r.status, r.body)
		}
		var ids []string
		for _, o := range decode[wire.Page[wire.Operation]](t, r).Items {
			ids = append(ids, o.OperationID)
		}
		return ids
	}
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"", []string{sup.OperationID, c.OperationID, b.OperationID, a.OperationID}},
		{"?node_id=n1", []string{sup.OperationID, b.OperationID, a.OperationID}},
		{"?resource_id=s1&node_id=n1", []string{sup.OperationID, a.OperationID}},
		{"?state=superseded", []string{a.OperationID}},
		{"?correlation_id=corr-c", []string{c.OperationID}},
		{"?operation=stream_desired_state&page=2&page_size=3", []string{a.OperationID}},
	} {
		t.Run("operations"+tc.q, func(t *testing.T) {
			if d := cmp.Diff(tc.want, opsOf(tc.q)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
	if r := th.do(t, "GET", "/api/v1/operations?page_size=101", ""); r.status != 400 || r.problem(t).Code != "invalid_query" {
		t.Errorf("page_size 101: %d %s", r.status, r.body)
	}
	if r := th.do(t, "GET", "/api/v1/operations/nope", ""); r.status != 404 || r.problem(t).Code != "operation_not_found" {
		t.Errorf("unknown op: %d %s", r.status, r.body)
	}

	ev := decode[wire.Page[wire.Event]](t, th.do(t, "GET", "/api/v1/events?kind=intent_accepted&node_id=n2", ""))
	if ev.Total != 1 || ev.Items[0].OperationID != c.OperationID || ev.Items[0].CorrelationID != "corr-c" {
		t.Errorf("events: %+v", ev)
	}
	au := decode[wire.Page[store.AuditRecord]](t, th.do(t, "GET", "/api/v1/audit?resource_id=s2", ""))
	if au.Total != 1 || au.Items[0].Outcome != "accepted" || au.Items[0].Actor != "anonymous" || au.Items[0].CorrelationID != "corr-b" {
		t.Errorf("audit: %+v", au)
	}

	// Cancel before dispatch.
	r := th.do(t, "DELETE", "/api/v1/operations/"+b.OperationID, "")
	if r.status != 200 || decode[wire.Operation](t, r).State != "cancelled" {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	if r := th.do(t, "DELETE", "/api/v1/operations/"+b.OperationID, ""); r.status != 409 || r.problem(t).Code != "operation_not_cancellable" {
		t.Errorf("cancel twice: %d %s", r.status, r.body)
	}
	if ev := decode[wire.Page[wire.Event]](t, th.do(t, "GET", "/api/v1/events?kind=operation_cancelled", "")); ev.Total != 1 {
		t.Errorf("operation_cancelled events: %d", ev.Total)
	}
	// After dispatch the intent is no longer cancellable.
	now := time.Now()
	if err := th.h.st.StartAttempt(context.Background(), store.AttemptStart{IntentID: c.OperationID, AttemptID: "att-1",
		NodeID: "n2", Now: now, ExpiresAt: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if r := th.do(t, "DELETE", "/api/v1/operations/"+c.OperationID, ""); r.status != 409 || r.problem(t).Details["state"] != "dispatched" {
		t.Errorf("cancel after dispatch: %d %s", r.status, r.body)
	}
	if r := th.do(t, "DELETE", "/api/v1/operations/nope", ""); r.status != 404 {
		t.Errorf("cancel unknown: %d", r.status)
	}
}

func TestStorageUnavailable(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	if err := th.h.Close(); err != nil {
		t.Fatal(err)
	}
	r := th.do(t, "PUT", streamPath+"/desired-state", `{"state":"running","config_version":"v1"}`)
	if r.status != 503 || r.problem(t).Code != "storage_unavailable" {
		t.Errorf("PUT on closed store: %d %s", r.status, r.body)
	}
}

// nodeTokenFor is the node registration token of a test Hub whose operator
// token is token (none when the Hub is open).
func nodeTokenFor(token string) string {
	if token == "" {
		return ""
	}
	return token + "-node"
}
