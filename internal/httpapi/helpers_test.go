package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/wire"
)

// logBuffer collects log output written by server goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func newLogger() (*slog.Logger, *logBuffer) {
	lb := &logBuffer{}
	return slog.New(slog.NewJSONHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

// serve starts a Router on 127.0.0.1 and returns its base URL.
func serve(t *testing.T, routes []httpapi.Route, opts httpapi.Options) string {
	t.Helper()
	srv := httptest.NewServer(httpapi.NewRouter(routes, opts))
	t.Cleanup(srv.Close)
	return srv.URL
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// problem decodes the body as a problem envelope, failing on anything else.
func (r response) problem(t *testing.T) wire.Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json; body %s", ct, r.body)
	}
	var p wire.Problem
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("body is not a problem: %v: %s", err, r.body)
	}
	if p.CorrelationID == "" || p.CorrelationID != r.header.Get("X-Correlation-ID") {
		t.Fatalf("problem correlation_id %q, header %q", p.CorrelationID, r.header.Get("X-Correlation-ID"))
	}
	return p
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
	return http.ErrUseLastResponse
}}

// do sends one request. A nil body sends none; headers are name, value
// pairs. A mutation without a Content-Type header is sent as
// application/json, as the Router requires; "Content-Type", "" sends none.
func do(t *testing.T, method, url string, body io.Reader, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	switch ct, set := req.Header["Content-Type"]; {
	case set && len(ct) == 1 && ct[0] == "":
		req.Header.Del("Content-Type")
	case !set && method != "GET" && method != "HEAD" && method != "OPTIONS":
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func str(s string) io.Reader { return strings.NewReader(s) }

// ok is a handler answering 200 {"ok":true}.
func ok(w http.ResponseWriter, _ *http.Request) error {
	return httpapi.WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
