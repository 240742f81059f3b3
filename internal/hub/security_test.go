package hub

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/wire"
)

var bearer = []string{"Authorization", "Bearer " + testToken}

// TestIdempotencyKeyScopedByResource: the same key on another resource is a
// new request; the same key and resource with another body is 409.
func TestIdempotencyKeyScopedByResource(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	hdr := append([]string{"Idempotency-Key", "k-1"}, bearer...)
	body := `{"state":"running","config_version":"v1"}`
	first := th.put(t, "n1", "s1", body, hdr...)
	other := th.do(t, "PUT", APIPrefix+"/nodes/n1/streams/s2/desired-state", body, hdr...)
	if other.status != 202 || other.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("same key on another resource: %d %q %s", other.status, other.header.Get("Idempotent-Replayed"), other.body)
	}
	if op := decode[wire.DesiredStateResponse](t, other); op.OperationID == first.OperationID {
		t.Fatalf("another resource got the first operation %s", op.OperationID)
	}
	// Another method on the same path is another resource too.
	if r := th.do(t, "POST", APIPrefix+"/nodes/n1/streams/s1/stop", "", hdr...); r.status != 202 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("same key, POST stop: %d %s", r.status, r.body)
	}
	if r := th.do(t, "PUT", APIPrefix+"/nodes/n1/streams/s1/desired-state", `{"state":"stopped","config_version":"v1"}`, hdr...); r.status != 409 || r.problem(t).Code != "idempotency_key_reused" {
		t.Fatalf("same key and resource, other body: %d %s", r.status, r.body)
	}
	if r := th.do(t, "PUT", APIPrefix+"/nodes/n1/streams/s1/desired-state", body, hdr...); r.status != 202 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %q", r.status, r.header.Get("Idempotent-Replayed"))
	}
}

// TestAgentRoutesTakeNoIdempotencyKey: an Idempotency-Key on agent/register
// is refused, so the session token in its answer is never stored.
func TestAgentRoutesTakeNoIdempotencyKey(t *testing.T) {
	path := dbPath(t)
	th := serve(t, path, testToken, true)
	reg := `{"node_id":"n1","boot_id":"b1","version":"test","protocol_version":` + fmt.Sprint(wire.ProtocolVersion) + `,"capabilities":["stream_control"],"node_credential":"` + credentialOf("n1") + `"}`
	r := th.do(t, "POST", APIPrefix+"/agent/register", reg, "Authorization", "Bearer "+nodeTokenFor(testToken), "Idempotency-Key", "reg-1")
	if r.status != 400 || r.problem(t).Code != "invalid_header" {
		t.Fatalf("register with a key: %d %s", r.status, r.body)
	}
	r = th.do(t, "POST", APIPrefix+"/agent/register", reg, "Authorization", "Bearer "+nodeTokenFor(testToken))
	if r.status != 200 {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	session := decode[wire.RegisterResponse](t, r).SessionToken
	if r := th.do(t, "POST", APIPrefix+"/agent/heartbeat", `{"boot_id":"b1"}`, "Authorization", "Bearer "+session, "Idempotency-Key", "hb-1"); r.status != 400 {
		t.Fatalf("heartbeat with a key: %d %s", r.status, r.body)
	}
	th.stop()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM idempotency WHERE instr(CAST(body AS TEXT), ?) > 0 OR principal LIKE 'node%'`, session).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d idempotency rows hold an agent answer", n)
	}
}

// TestPublicMetricsTextOnly: the open /metrics serves Prometheus text only;
// the JSON form and the node filter stay behind the token.
func TestPublicMetricsTextOnly(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	a := newTestAgent(th, "n1")
	a.register(t, nodeTokenFor(testToken), 15*time.Second)
	a.report(t)
	for _, q := range []string{"?format=json", "?node_id=n1", "?format=text&node_id=n1"} {
		r := th.do(t, "GET", "/metrics"+q, "")
		if r.status != 400 || r.problem(t).Code != "invalid_query" {
			t.Errorf("/metrics%s: %d %s", q, r.status, r.body)
		}
	}
	r := th.do(t, "GET", "/metrics", "", "Accept", "application/json")
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Errorf("/metrics with Accept JSON: %d %s", r.status, r.header.Get("Content-Type"))
	}
	if r := th.do(t, "GET", APIPrefix+"/metrics?format=json", ""); r.status != 401 {
		t.Errorf("%s/metrics without the token: %d", APIPrefix, r.status)
	}
	mj := decode[MetricsJSON](t, th.do(t, "GET", APIPrefix+"/metrics?format=json&node_id=n1", "", bearer...))
	if len(mj.Items) != 1 || mj.Items[0].NodeID != "n1" {
		t.Errorf("JSON metrics behind the token: %+v", mj)
	}
}

// TestPageIsBounded: a page number whose row offset would overflow is 400,
// not the first page.
func TestPageIsBounded(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	th.put(t, "n1", "s1", `{"state":"running","config_version":"v1"}`, bearer...)
	for _, path := range []string{"/events", "/operations", "/audit"} {
		r := th.do(t, "GET", APIPrefix+path+"?page=4611686018427387904", "", bearer...)
		if r.status != 400 || r.problem(t).Code != "invalid_query" {
			t.Errorf("%s: %d %s", path, r.status, r.body)
		}
	}
}

// TestUnknownAPIPathsNeedTheToken: with a token, every API path answers 401
// without it, whether or not a route exists; probes and /metrics stay open.
func TestUnknownAPIPathsNeedTheToken(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	for _, c := range []struct{ method, path string }{
		{"GET", APIPrefix + "/nope"},
		{"GET", APIPrefix + "/nodes/n1/secret"},
		{"DELETE", APIPrefix + "/nodes"},
		{"POST", APIPrefix + "/agent/nope"},
		{"GET", "/elsewhere"},
	} {
		r := th.do(t, c.method, c.path, "")
		if r.status != 401 || r.problem(t).Code != "unauthorized" || r.header.Get("WWW-Authenticate") != "Bearer" {
			t.Errorf("%s %s without the token: %d %s", c.method, c.path, r.status, r.body)
		}
		if r := th.do(t, c.method, c.path, "", bearer...); r.status != 404 && r.status != 405 {
			t.Errorf("%s %s with the token: %d %s", c.method, c.path, r.status, r.body)
		}
	}
	for _, p := range []string{"/liveness", "/readiness", "/health", "/metrics"} {
		if r := th.do(t, "GET", p, ""); r.status != 200 {
			t.Errorf("%s: %d", p, r.status)
		}
	}
}

// TestHubCrossSite: a mutation from a foreign Origin, or one a browser marks
// cross-site (Sec-Fetch-Site), is 403 even with the token; without a token a
// rebound Host is 403. curl's bodiless POST, without Content-Type, runs.
func TestHubCrossSite(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	body := `{"state":"running","config_version":"v1"}`
	r := th.do(t, "PUT", streamPath+"/desired-state", body, append([]string{"Origin", "https://evil.example"}, bearer...)...)
	if r.status != 403 || r.problem(t).Code != "forbidden" {
		t.Fatalf("foreign origin: %d %s", r.status, r.body)
	}
	if r := th.do(t, "POST", streamPath+"/stop", "", append([]string{"Content-Type", "text/plain"}, bearer...)...); r.status != 415 {
		t.Fatalf("bodiless text/plain POST: %d %s", r.status, r.body)
	}
	if r := th.do(t, "POST", streamPath+"/stop", "", append([]string{"Sec-Fetch-Site", "cross-site"}, bearer...)...); r.status != 403 || r.problem(t).Code != "forbidden" {
		t.Fatalf("cross-site (Sec-Fetch-Site) POST: %d %s", r.status, r.body)
	}
	if r := th.do(t, "POST", streamPath+"/stop", `{}`, append([]string{"Content-Type", ""}, bearer...)...); r.status != 415 {
		t.Fatalf("POST with a body and no Content-Type: %d %s", r.status, r.body)
	}
	if r := th.do(t, "POST", streamPath+"/stop", "", bearer...); r.status != 202 {
		t.Fatalf("bodiless POST without Content-Type (curl -X POST): %d %s", r.status, r.body)
	}

	open := serve(t, dbPath(t), "", true)
	req := open.request(t, context.Background(), "GET", APIPrefix+"/status", "")
	req.Host = "evil.example"
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 403 {
		t.Fatalf("rebound Host without a token: %d", res.StatusCode)
	}
	if r := open.do(t, "GET", APIPrefix+"/status", ""); r.status != 200 {
		t.Fatalf("loopback Host: %d %s", r.status, r.body)
	}
}

// TestIdleConnectionsDoNotLockOutOperator floods a real Hub listener (small
// caps) with idle connections: an SSE subscriber and an Agent long-poll that
// outlive the body timeout keep working, and an operator request and a
// probe are still answered.
func TestIdleConnectionsDoNotLockOutOperator(t *testing.T) {
	const perAddr, idle = 6, 30
	th := serveWith(t, dbPath(t), testToken, true, httpapi.ServerOptions{
		MaxConns: 12, MaxConnsPerAddr: perAddr, CapLoopback: true, BodyTimeout: 20 * time.Millisecond,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sse, err := http.DefaultClient.Do(th.request(t, ctx, "GET", APIPrefix+"/events/stream", "", bearer...))
	if err != nil {
		t.Fatal(err)
	}
	defer sse.Body.Close()
	sc := bufio.NewScanner(sse.Body)
	if !sc.Scan() || sc.Text() != "retry: 2000" {
		t.Fatalf("SSE first line %q", sc.Text())
	}

	a := newTestAgent(th, "n1")
	a.register(t, nodeTokenFor(testToken), 15*time.Second)
	polled := make(chan []wire.Command, 1)
	go func() { polled <- a.commandsNoFatal(10 * time.Second) }()

	addr := strings.TrimPrefix(th.base, "http://")
	for i := range idle {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if i%2 == 0 {
			fmt.Fprintf(c, "GET /liveness HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("idle conn %d: %v", i, err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}
	// A fresh connection each, as a new operator or prober would open.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	for _, p := range []string{"/readiness", APIPrefix + "/status"} {
		res, err := fresh.Do(th.request(t, ctx, "GET", p, "", bearer...))
		if err != nil {
			t.Fatalf("%s after the flood: %v", p, err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("%s after the flood: %d", p, res.StatusCode)
		}
	}
	res, err := fresh.Do(th.request(t, ctx, "PUT", streamPath+"/desired-state", `{"state":"running","config_version":"v1"}`, bearer...))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 202 {
		t.Fatalf("operator PUT after the flood: %d", res.StatusCode)
	}
	if cmds := <-polled; len(cmds) != 1 {
		t.Fatalf("the long-poll got %d commands, want the dispatched one", len(cmds))
	}
	for sc.Scan() {
		if sc.Text() == "event: "+wire.EventIntentAccepted {
			return
		}
	}
	t.Fatalf("the SSE stream ended without the intent_accepted event: %v", sc.Err())
}

// commandsNoFatal long-polls for commands from a goroutine other than the
// test's; it returns nil on any failure.
func (a *testAgent) commandsNoFatal(wait time.Duration) []wire.Command {
	req, err := http.NewRequest("GET", a.th.base+APIPrefix+"/agent/commands?wait_ms="+itoa(wait.Milliseconds()), nil)
	if err != nil {
		return nil
	}
	req.Header.Set("Authorization", "Bearer "+a.session)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer res.Body.Close()
	var page wire.Page[wire.Command]
	if res.StatusCode != 200 || json.NewDecoder(res.Body).Decode(&page) != nil {
		return nil
	}
	return page.Items
}
