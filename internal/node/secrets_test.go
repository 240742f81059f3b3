package node_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/flowplane/flowplane/internal/wire"
)

const (
	secretVar   = "FLOWPLANE_NODE_API_TEST_SECRET"
	secretValue = "zq7-Secret-Value-4f1c9e-never-in-a-response"
	secretRef   = "${env:" + secretVar + "}"
)

// TestSecretsNeverLeak: a secret referenced by the configuration reaches
// the running component but no API response; the stored text keeps the
// reference.
func TestSecretsNeverLeak(t *testing.T) {
	t.Setenv(secretVar, secretValue)
	var mu sync.Mutex
	var seen []string // X-Api-Key values the sink received
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("X-Api-Key"))
		mu.Unlock()
	}))
	t.Cleanup(sink.Close)
	v1 := doc(hcLocal, genStream("a", "a"), httpStream("sink", sink.URL, secretRef))
	v2 := doc(hcLocal, genStream("a", "a"), httpStream("sink", sink.URL, "Bearer "+secretRef))
	h := newHarness(t, v1)

	var answers []response
	keep := func(r response) response { answers = append(answers, r); return r }
	badField := doc(hcLocal, "  - id: x\n    input: {type: generate, context: x, interval: '"+secretRef+"'}\n    pipeline: {processors: []}\n    output: {type: drop}\n")
	badComponent := doc(hcLocal, httpStream("sink", secretRef, secretRef))

	keep(h.expect(t, 200, "POST", "/configuration/validate", configBody(t, "yaml", v2)))
	if rep := decode[report](t, keep(h.expect(t, 200, "POST", "/configuration/validate", badField, "Content-Type", "application/yaml"))); rep.Valid {
		t.Errorf("a secret interval validated")
	}
	if rep := decode[report](t, keep(h.expect(t, 200, "POST", "/configuration/validate", badComponent, "Content-Type", "application/yaml"))); rep.Valid {
		t.Errorf("a secret URL validated")
	}
	keep(h.expect(t, 422, "POST", "/configuration/apply", badField, "Content-Type", "application/yaml"))
	keep(h.expect(t, 422, "POST", "/configuration/apply", badComponent, "Content-Type", "application/yaml"))
	keep(h.expect(t, 200, "PUT", "/configuration/draft", configBody(t, "yaml", v2)))
	keep(h.expect(t, 200, "GET", "/configuration/diff", ""))
	apply := decode[wire.Operation](t, keep(h.expect(t, 202, "POST", "/configuration/apply", configBody(t, "yaml", v2))))
	h.succeed(t, apply.OperationID)
	h.waitInSync(t, "sink")
	eventually(t, "the sink got the resolved header", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		for _, v := range seen {
			if v == "Bearer "+secretValue {
				return true, ""
			}
		}
		return false, strings.Join(seen[max(0, len(seen)-1):], "")
	})
	keep(h.expect(t, 200, "GET", "/configuration/diff?from=v1&to=v2", ""))

	// Every GET route, and the collections in full.
	values := map[string]string{"id": "sink", "kind": "output", "name": "http"}
	for _, rt := range h.n.Handler(h.hopts).Routes() {
		// The node runs no job here: GET /jobs stands for them.
		if rt.Method != "GET" || strings.HasPrefix(rt.Pattern, "/jobs/{id}") {
			continue
		}
		path := concrete(rt.Pattern, values)
		if rt.Pattern == "/operations/{id}" {
			path = "/operations/" + apply.OperationID
		}
		if strings.HasSuffix(rt.Pattern, "/tap") {
			path += "?duration=1s&stage=input" // what the stream carries, sampled, until the duration passed
		}
		keep(h.expect(t, 200, "GET", path, ""))
	}
	for _, path := range []string{"/events?page_size=100", "/operations?page_size=100", "/configuration/diff?from=v1&to=draft", "/streams/a"} {
		keep(h.expect(t, 200, "GET", path, ""))
	}
	for _, r := range answers {
		if strings.Contains(string(r.Body), secretValue) {
			t.Errorf("a response holds the secret: %.300s", r.Body)
		}
		for k, vs := range r.Header {
			if strings.Contains(strings.Join(vs, " "), secretValue) {
				t.Errorf("header %s holds the secret", k)
			}
		}
	}
	for _, path := range []string{"/configuration", "/configuration/draft"} {
		if c := string(h.expect(t, 200, "GET", path, "").Body); !strings.Contains(c, secretRef) {
			t.Errorf("%s lost the reference text: %.300s", path, c)
		}
	}
	if len(answers) < 30 {
		t.Errorf("only %d answers checked", len(answers))
	}
}

// TestSecretsInRuntimeErrors: a stream that fails at run time with an
// error quoting a resolved value (an address in use) shows its last error
// without the value.
func TestSecretsInRuntimeErrors(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taken.Close() })
	addr := taken.Addr().String()
	t.Setenv("FLOWPLANE_NODE_API_TEST_ADDR", addr)
	in := "  - id: in\n    input: {type: http, address: '${env:FLOWPLANE_NODE_API_TEST_ADDR}', path: /ingest}\n" +
		"    pipeline: {processors: []}\n    output: {type: drop}\n"
	h := newHarness(t, doc(hcLocal, genStream("a", "a"), in), harnessOptions{noWait: true})
	var s wire.Stream
	eventually(t, "stream in failed", func() (bool, string) {
		s = h.stream(t, "in")
		return s.Observed.State == "failed", s.Observed.State
	})
	if s.Observed.LastError == "" || s.Convergence != wire.ConvergenceDegraded {
		t.Errorf("failed stream %+v", s)
	}
	restart := h.action(t, "in", "restart")
	h.waitOp(t, restart.OperationID)
	for _, path := range []string{"/streams", "/streams/in", "/operations", "/operations/" + restart.OperationID, "/events?page_size=100", "/health", "/status", "/configuration"} {
		r := h.do(t, "GET", path, "")
		if strings.Contains(string(r.Body), addr) {
			t.Errorf("GET %s holds the resolved address: %.400s", path, r.Body)
		}
	}
}
