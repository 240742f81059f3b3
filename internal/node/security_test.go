package node_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/wire"
)

// TestCrossSiteMutationsRefused: a Node API without a token (the loopback
// default) does not run a mutation a web page sends: a foreign Origin or a
// cross-site Sec-Fetch-Site is 403, a mutation with another content type is
// 415, and a Host that names neither loopback nor the listener (DNS
// rebinding) is 403. A bodiless mutation without Content-Type (curl -X
// POST) is not cross-site and runs.
func TestCrossSiteMutationsRefused(t *testing.T) {
	h := newHarness(t, doc(hcLocal, genStream("a", "a")))
	body := configBody(t, "yaml", doc(hcLocal, genStream("a", "a"), genStream("b", "b")))
	h.expect(t, 202, "POST", "/configuration/apply", body)
	eventually(t, "v2 live", func() (bool, string) {
		r := h.do(t, "GET", "/configuration", "")
		return strings.Contains(string(r.Body), `"v2"`), r.String()
	})

	problem(t, h.expect(t, 403, "POST", "/configuration/rollback/v1", "",
		"Origin", "https://evil.example", "Content-Type", "text/plain"), "forbidden")
	problem(t, h.expect(t, 403, "POST", "/streams/a/stop", "", "Origin", "https://evil.example"), "forbidden")
	problem(t, h.expect(t, 415, "POST", "/configuration/rollback/v1", "", "Content-Type", "text/plain"), "unsupported_media_type")
	problem(t, h.expect(t, 403, "POST", "/streams/a/stop", "", "Sec-Fetch-Site", "cross-site", "Content-Type", ""), "forbidden")
	problem(t, h.expect(t, 403, "DELETE", "/operations/x", "", "Sec-Fetch-Site", "same-site", "Content-Type", ""), "forbidden")
	problem(t, h.expect(t, 415, "POST", "/streams/a/restart", "{}", "Content-Type", ""), "unsupported_media_type")
	problem(t, h.expect(t, 405, "PUT", "/streams/a/stop", "", "Content-Type", ""), "method_not_allowed")
	for _, c := range []struct{ method, path string }{{"POST", "/configuration/rollback/v1"}, {"GET", "/configuration"}} {
		if st := rawStatus(t, h.base, c.method, c.path, "evil.example:"+port(h.base)); st != 403 {
			t.Errorf("%s %s with a rebound Host: %d, want 403", c.method, c.path, st)
		}
	}
	if st := rawStatus(t, h.base, "GET", "/liveness", "evil.example"); st != 200 {
		t.Errorf("probe with any Host: %d", st)
	}
	if st := rawStatus(t, h.base, "GET", "/configuration", "localhost:"+port(h.base)); st != 200 {
		t.Errorf("GET with Host localhost: %d", st)
	}
	// Nothing ran: v2 is still live, stream a still runs.
	if r := h.expect(t, 200, "GET", "/configuration", ""); !strings.Contains(string(r.Body), `"v2"`) {
		t.Errorf("configuration after refused rollbacks: %s", r)
	}
	if s := decode[wire.Stream](t, h.expect(t, 200, "GET", "/streams/a", "")); s.Observed.State != "running" {
		t.Errorf("stream a after a refused stop: %+v", s.Observed)
	}
	// A bodiless DELETE without Content-Type reaches its handler.
	problem(t, h.expect(t, 404, "DELETE", "/operations/x", "", "Content-Type", ""), "operation_not_found")
	// The same rollback, sent as curl -X POST would, runs (waited for, so that
	// it does not write the history while the test's directory goes).
	op := decode[wire.Operation](t, h.expect(t, 202, "POST", "/configuration/rollback/v1", "", "Content-Type", ""))
	eventually(t, "the rollback finished", func() (bool, string) {
		cur := decode[wire.Operation](t, h.expect(t, 200, "GET", "/operations/"+op.OperationID, ""))
		return cur.State == "succeeded" || cur.State == "failed", cur.State
	})
}

// TestUnknownPathsNeedTheToken: with a token, a path that is no public
// route's answers 401 without it whether or not a route exists.
func TestUnknownPathsNeedTheToken(t *testing.T) {
	h := newHarness(t, securedDoc())
	for _, p := range []string{"/nope", "/streams/a/nope", "/api/v1/status", "/configuration/secret"} {
		problem(t, h.expect(t, 401, "GET", p, "", "Authorization", ""), "unauthorized")
		h.expect(t, 404, "GET", p, "", "Authorization", "Bearer "+testToken)
	}
	problem(t, h.expect(t, 401, "DELETE", "/streams", "", "Authorization", ""), "unauthorized")
	h.expect(t, 405, "DELETE", "/streams", "", "Authorization", "Bearer "+testToken)
	for _, p := range []string{"/health", "/liveness", "/readiness", "/metrics"} {
		h.expect(t, 200, "GET", p, "", "Authorization", "")
	}
}

// TestIdleConnectionsDoNotLockOutOperator: idle connections beyond the
// listener's caps are closed to make room; the operator and a probe are
// still answered.
func TestIdleConnectionsDoNotLockOutOperator(t *testing.T) {
	h := newHarness(t, securedDoc(), harnessOptions{server: httpapi.ServerOptions{MaxConns: 8, MaxConnsPerAddr: 4, CapLoopback: true}})
	addr := strings.TrimPrefix(h.base, "http://")
	for i := range 20 {
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
	h.client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	h.expect(t, 200, "GET", "/status", "", "Authorization", "Bearer "+testToken)
	h.expect(t, 200, "GET", "/readiness", "")
}

// rawStatus sends one request with the given Host header and returns the
// status.
func rawStatus(t *testing.T, base, method, path, host string) int {
	t.Helper()
	req, err := http.NewRequest(method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func port(base string) string {
	_, p, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	return p
}
