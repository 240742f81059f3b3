package node_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/wire"
)

// secured is a control-plane server with a token and one allowed origin.
var secured = `health_check:
  enabled: true
  address: 127.0.0.1:0
  api_token: ` + testToken + `
  cors_origins: [http://console.test]
`

func securedDoc() string {
	return doc(secured, genStream("a", "a"), genStream("b", "b"), genStream("c", "c"))
}

// routeCase is one request of the route table walk and what it must answer.
type routeCase struct {
	path   string
	body   string
	header []string
	status int
	// check looks at a key field of the body.
	check func(t *testing.T, r response)
}

// field returns a top-level field of a JSON object body.
func field(t *testing.T, r response, name string) any {
	t.Helper()
	m := decode[map[string]any](t, r)
	v, ok := m[name]
	if !ok {
		t.Fatalf("body has no %q: %s", name, r)
	}
	return v
}

func wantField(name string, want any) func(*testing.T, response) {
	return func(t *testing.T, r response) {
		t.Helper()
		if got := field(t, r, name); got != want {
			t.Errorf("%s = %v, want %v (%s)", name, got, want, r)
		}
	}
}

func wantCode(code string) func(*testing.T, response) {
	return func(t *testing.T, r response) { t.Helper(); problem(t, r, code) }
}

func wantItems(min int) func(*testing.T, response) {
	return func(t *testing.T, r response) {
		t.Helper()
		p := decode[wire.Page[map[string]any]](t, r)
		if len(p.Items) < min || p.Total < min {
			t.Errorf("want at least %d items: %s", min, r)
		}
	}
}

func wantAccepted(operation string) func(*testing.T, response) {
	return func(t *testing.T, r response) {
		t.Helper()
		op := decode[wire.Operation](t, r)
		if op.Operation != operation || op.OperationID == "" {
			t.Errorf("accepted %+v, want a %s operation", op, operation)
		}
		if loc := r.Header.Get("Location"); loc != "/operations/"+op.OperationID {
			t.Errorf("Location = %q, want /operations/%s", loc, op.OperationID)
		}
	}
}

func wantDesired(stream, state string) func(*testing.T, response) {
	return func(t *testing.T, r response) {
		t.Helper()
		d := decode[wire.DesiredStateResponse](t, r)
		if d.StreamID != stream || d.DesiredState != state || d.OperationID == "" {
			t.Errorf("desired-state answer %+v, want %s %s", d, stream, state)
		}
		if r.Header.Get("ETag") != httpapi.ETag(d.Generation) || r.Header.Get("Location") != "/operations/"+d.OperationID {
			t.Errorf("ETag %q Location %q for %+v", r.Header.Get("ETag"), r.Header.Get("Location"), d)
		}
	}
}

// TestRouteTable walks the router's route table: every route must have a
// case here, and every case must be a route, so a new route without a test
// fails the suite. GET routes run first (nothing is stopped or applied
// yet), then the mutations.
func TestRouteTable(t *testing.T) {
	text := securedDoc() + "jobs:" + countJob("j", t.TempDir())
	h := newHarness(t, text)
	h.token = testToken
	// The job's mutations need it running.
	h.waitJob(t, "j", "running", func(v node.JobView) bool { return v.State == "running" })
	draft := doc(secured, genStream("a", "a"), genStream("d", "d"))
	h.expect(t, 200, "PUT", "/configuration/draft", configBody(t, "yaml", draft))
	ran := h.action(t, "a", "restart")
	h.succeed(t, ran.OperationID)
	// Served texts have the literal api_token masked.
	masked := func(s string) string {
		return strings.Replace(s, "api_token: "+testToken, "api_token: "+config.Mask, 1)
	}
	servedText, servedDraft := masked(text), masked(draft)

	cases := map[string]routeCase{
		"GET /system":  {path: "/system", status: 200, check: wantField("node_id", testNodeID)},
		"GET /status":  {path: "/status", status: 200, check: wantField("node_id", testNodeID)},
		"GET /nodes":   {path: "/nodes", status: 200, check: wantItems(1)},
		"GET /node":    {path: "/node", status: 200, check: wantField("status", "online")},
		"GET /streams": {path: "/streams", status: 200, check: wantItems(3)},
		"GET /streams/{id}": {path: "/streams/a", status: 200, check: func(t *testing.T, r response) {
			s := decode[wire.Stream](t, r)
			if s.ID != "a" || r.Header.Get("ETag") != httpapi.ETag(s.Desired.Generation) || s.Authority != "node" {
				t.Errorf("stream %+v with ETag %q", s, r.Header.Get("ETag"))
			}
		}},
		"POST /streams/{id}/start":   {path: "/streams/b/start", status: 202, check: wantDesired("b", "running")},
		"POST /streams/{id}/stop":    {path: "/streams/c/stop", status: 202, check: wantDesired("c", "stopped")},
		"POST /streams/{id}/restart": {path: "/streams/a/restart", status: 202, check: wantDesired("a", "running")},
		"GET /jobs":                  {path: "/jobs", status: 200, check: wantItems(1)},
		"GET /jobs/{id}":             {path: "/jobs/j", status: 200, check: wantField("authority", "node")},
		"GET /jobs/{id}/plan":        {path: "/jobs/j/plan", status: 200, check: wantField("job_id", "j")},
		"GET /jobs/{id}/tap":         {path: "/jobs/j/tap?duration=1s", status: 200, check: wantEnd},
		"GET /streams/{id}/tap":      {path: "/streams/a/tap?duration=1s", status: 200, check: wantEnd},
		"GET /jobs/{id}/checkpoints": {path: "/jobs/j/checkpoints", status: 200, check: wantItems(0)},
		"GET /jobs/{id}/savepoints":  {path: "/jobs/j/savepoints", status: 200, check: wantItems(0)},
		// Queued in this order on the job, one after the other.
		"POST /jobs/{id}/checkpoints": {path: "/jobs/j/checkpoints", status: 202, check: wantAccepted("job_checkpoint")},
		"POST /jobs/{id}/savepoints":  {path: "/jobs/j/savepoints", status: 202, check: wantAccepted("job_savepoint")},
		"POST /jobs/{id}/start":       {path: "/jobs/j/start", status: 202, check: wantAccepted("job_start")},
		"POST /jobs/{id}/stop":        {path: "/jobs/j/stop", body: `{"savepoint": true}`, status: 202, check: wantAccepted("job_stop")},
		"POST /jobs/{id}/restart":     {path: "/jobs/j/restart", status: 202, check: wantAccepted("job_restart")},
		"GET /operations":             {path: "/operations", status: 200, check: wantItems(1)},
		"GET /operations/{id}":        {path: "/operations/" + ran.OperationID, status: 200, check: wantField("operation_id", ran.OperationID)},
		"DELETE /operations/{id}":     {path: "/operations/" + ran.OperationID, status: 409, check: wantCode("operation_not_cancellable")},
		"GET /events":                 {path: "/events", status: 200, check: wantItems(1)},
		"GET /configuration":          {path: "/configuration", status: 200, check: wantField("content", servedText)},
		"GET /config":                 {path: "/config", status: 200, check: wantField("applied", true)},
		"POST /configuration/validate": {path: "/configuration/validate", body: configBody(t, "yaml", text),
			status: 200, check: wantField("valid", true)},
		"POST /config/validate": {path: "/config/validate", body: text, header: []string{"Content-Type", "application/yaml"},
			status: 200, check: wantField("valid", true)},
		"GET /configuration/draft": {path: "/configuration/draft", status: 200, check: wantField("content", servedDraft)},
		"PUT /configuration/draft": {path: "/configuration/draft", body: configBody(t, "yaml", draft), status: 200,
			check: func(t *testing.T, r response) {
				var v struct {
					Draft  struct{ Content string }
					Report struct{ Valid bool }
				}
				if err := json.Unmarshal(r.Body, &v); err != nil || v.Draft.Content != servedDraft || !v.Report.Valid {
					t.Errorf("draft answer %s (%v)", r, err)
				}
			}},
		"GET /configuration/diff":     {path: "/configuration/diff", status: 200, check: wantField("to", "draft")},
		"GET /configuration/versions": {path: "/configuration/versions", status: 200, check: wantItems(1)},
		"GET /config/versions":        {path: "/config/versions", status: 200, check: wantItems(1)},
		"POST /configuration/apply":   {path: "/configuration/apply", body: configBody(t, "yaml", text), status: 202, check: wantAccepted("configuration_apply")},
		"POST /config/apply": {path: "/config/apply", body: text, header: []string{"Content-Type", "text/yaml"},
			status: 202, check: wantAccepted("configuration_apply")},
		"POST /configuration/rollback/{id}": {path: "/configuration/rollback/v1", status: 202, check: wantAccepted("configuration_rollback")},
		"POST /config/rollback/{id}":        {path: "/config/rollback/v1", status: 202, check: wantAccepted("configuration_rollback")},
		"GET /components":                   {path: "/components", status: 200, check: wantItems(10)},
		"GET /components/{kind}/{name}":     {path: "/components/output/drop", status: 200, check: wantField("name", "drop")},
		"GET /schema":                       {path: "/schema", status: 200, check: wantField("type", "object")},
		"GET /metrics": {path: "/metrics", status: 200, check: func(t *testing.T, r response) {
			if !strings.Contains(string(r.Body), "svc_stream_received_total") {
				t.Errorf("metrics lack svc_stream_received_total:\n%.500s", r.Body)
			}
		}},
		"GET /health":       {path: "/health", status: 200, check: wantField("status", "healthy")},
		"GET /readiness":    {path: "/readiness", status: 200, check: wantField("status", "ready")},
		"GET /liveness":     {path: "/liveness", status: 200, check: wantField("status", "live")},
		"GET /ready":        {path: "/ready", status: 200, check: wantField("status", "ready")},
		"GET /live":         {path: "/live", status: 200, check: wantField("status", "live")},
		"GET /openapi.json": {path: "/openapi.json", status: 200, check: wantField("openapi", "3.1.0")},
	}
	routes := h.n.Handler(h.hopts).Routes()
	var keys []string
	for _, rt := range routes {
		keys = append(keys, rt.Method+" "+rt.Pattern)
	}
	for _, k := range keys {
		if _, ok := cases[k]; !ok {
			t.Errorf("route %s has no case in the table", k)
		}
	}
	for k := range cases {
		if !slices.Contains(keys, k) {
			t.Errorf("case %s is not a route", k)
		}
	}
	// Reads first, mutations after, each in table order.
	slices.SortStableFunc(keys, func(a, b string) int {
		ga, gb := strings.HasPrefix(a, "GET "), strings.HasPrefix(b, "GET ")
		switch {
		case ga && !gb:
			return -1
		case gb && !ga:
			return 1
		}
		return 0
	})
	for _, k := range keys {
		c, ok := cases[k]
		if !ok {
			continue
		}
		t.Run(k, func(t *testing.T) {
			method := strings.Fields(k)[0]
			r := h.do(t, method, c.path, c.body, c.header...)
			if r.Status != c.status {
				t.Fatalf("%s %s = %s, want %d", method, c.path, r, c.status)
			}
			if r.Header.Get("X-Correlation-ID") == "" {
				t.Errorf("no X-Correlation-ID")
			}
			c.check(t, r)
		})
	}
	h.drain(t)
}

// drain waits until no operation is pending or running.
func (h *harness) drain(t *testing.T) {
	t.Helper()
	eventually(t, "every operation finished", func() (bool, string) {
		for _, st := range []string{wire.OpPending, wire.OpDispatched} {
			p := decode[wire.Page[wire.Operation]](t, h.expect(t, 200, "GET", "/operations?state="+st, ""))
			if p.Total > 0 {
				return false, p.Items[0].Operation + " " + st
			}
		}
		return true, ""
	})
}

// TestAuth: with api_token set, every protected route answers 401 without
// the token and with a wrong one; public routes answer without it.
func TestAuth(t *testing.T) {
	h := newHarness(t, securedDoc())
	values := map[string]string{"id": "a", "kind": "input", "name": "generate"}
	routes := h.n.Handler(h.hopts).Routes()
	for _, rt := range routes {
		path := concrete(rt.Pattern, values)
		if rt.Pattern == "/operations/{id}" || rt.Pattern == "/configuration/rollback/{id}" || rt.Pattern == "/config/rollback/{id}" {
			path = concrete(rt.Pattern, map[string]string{"id": "v1"})
		}
		if strings.HasSuffix(rt.Pattern, "/tap") {
			path += "?duration=1s" // a tap answers until its duration passed
		}
		t.Run(rt.Method+" "+rt.Pattern, func(t *testing.T) {
			if rt.Public {
				h.expect(t, 200, rt.Method, path, "", "Authorization", "")
				h.expect(t, 200, rt.Method, path, "", "Authorization", "Bearer wrong")
				return
			}
			for _, auth := range []string{"", "Bearer wrong-token", "Bearer " + testToken + "x", "Basic " + testToken, testToken} {
				r := h.expect(t, 401, rt.Method, path, "", "Authorization", auth, "X-Correlation-ID", "auth-check")
				if p := problem(t, r, "unauthorized"); p.CorrelationID != "auth-check" {
					t.Errorf("correlation_id = %q", p.CorrelationID)
				}
				if !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("WWW-Authenticate = %q", r.Header.Get("WWW-Authenticate"))
				}
				if strings.Contains(string(r.Body), testToken) {
					t.Errorf("the answer holds the token: %s", r)
				}
			}
			if rt.Method == "GET" {
				if r := h.do(t, "GET", path, "", "Authorization", "bearer "+testToken); r.Status == 401 {
					t.Errorf("with the token: %s", r)
				}
			}
		})
	}
	// The probes and /metrics are the public routes, and nothing else is.
	var got []string
	for _, rt := range routes {
		if rt.Public {
			got = append(got, rt.Pattern)
		}
	}
	slices.Sort(got)
	want := []string{"/health", "/live", "/liveness", "/metrics", "/readiness", "/ready"}
	if !slices.Equal(got, want) {
		t.Errorf("public routes %v, want %v", got, want)
	}
}

// TestCORS: the allowed origin gets CORS headers, another gets none.
func TestCORS(t *testing.T) {
	h := newHarness(t, securedDoc())
	const allowed, other = "http://console.test", "http://evil.test"
	pre := h.expect(t, 204, "OPTIONS", "/streams/a/start", "",
		"Origin", allowed, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, idempotency-key")
	if got := pre.Header.Get("Access-Control-Allow-Origin"); got != allowed {
		t.Errorf("Access-Control-Allow-Origin = %q", got)
	}
	if m := pre.Header.Get("Access-Control-Allow-Methods"); !strings.Contains(m, "POST") {
		t.Errorf("Access-Control-Allow-Methods = %q", m)
	}
	for _, hd := range []string{"Authorization", "Idempotency-Key", "If-Match", "X-Correlation-ID"} {
		if !strings.Contains(pre.Header.Get("Access-Control-Allow-Headers"), hd) {
			t.Errorf("Access-Control-Allow-Headers %q lacks %s", pre.Header.Get("Access-Control-Allow-Headers"), hd)
		}
	}

	denied := h.expect(t, 403, "OPTIONS", "/streams/a/start", "", "Origin", other, "Access-Control-Request-Method", "POST")
	problem(t, denied, "forbidden")
	for k := range denied.Header {
		if strings.HasPrefix(k, "Access-Control-") {
			t.Errorf("denied preflight carries %s", k)
		}
	}

	h.token = testToken
	simple := h.expect(t, 200, "GET", "/streams", "", "Origin", allowed)
	if got := simple.Header.Get("Access-Control-Allow-Origin"); got != allowed {
		t.Errorf("simple GET Access-Control-Allow-Origin = %q", got)
	}
	if !strings.Contains(simple.Header.Get("Access-Control-Expose-Headers"), "ETag") {
		t.Errorf("Access-Control-Expose-Headers = %q", simple.Header.Get("Access-Control-Expose-Headers"))
	}
	foreign := h.expect(t, 200, "GET", "/streams", "", "Origin", other)
	if got := foreign.Header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("other origin got Access-Control-Allow-Origin %q", got)
	}
}

// wantEnd checks that a tap's event stream ended with its end event.
func wantEnd(t *testing.T, r response) {
	t.Helper()
	if !strings.Contains(string(r.Body), "event: end\n") {
		t.Errorf("the tap did not end:\n%.500s", r.Body)
	}
}
