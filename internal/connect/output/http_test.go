package output

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
)

// received is what the test server saw of one request.
type received struct {
	Method, Path, ContentType, Source, Body string
}

// recorder is an endpoint answering with the codes in plan (then 200) and
// recording every request.
type recorder struct {
	mu   sync.Mutex // guards plan, got
	plan []int
	got  []received
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.got = append(r.got, received{req.Method, req.URL.Path, req.Header.Get("Content-Type"), req.Header.Get("X-Source"), string(body)})
	code := http.StatusOK
	if len(r.plan) > 0 {
		code, r.plan = r.plan[0], r.plan[1:]
	}
	r.mu.Unlock()
	w.WriteHeader(code)
}

func (r *recorder) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func serve(t *testing.T, plan ...int) (*recorder, string) {
	t.Helper()
	rec := &recorder{plan: plan}
	srv := httptest.NewServer(rec) // 127.0.0.1:0
	t.Cleanup(srv.Close)
	return rec, srv.URL
}

func buildHTTP(t *testing.T, conf map[string]any) *HTTP {
	t.Helper()
	o := build(t, "http", conf).(*HTTP)
	o.backoff = func(int) time.Duration { return 0 }
	t.Cleanup(func() { _ = o.Close(t.Context()) })
	return o
}

func TestHTTPExample(t *testing.T) {
	conf := componenttest.Example(t, component.Default, component.KindOutput, "http")
	rec, base := serve(t)
	conf["url"] = base + "/ingest" // the example's endpoint does not run in tests
	o := buildHTTP(t, conf)
	ctx := testCtx(t)
	if err := o.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := o.Write(ctx, batch(`{"a":1}`, `plain`)); err != nil {
		t.Fatal(err)
	}
	want := []received{{"POST", "/ingest", "application/json", "flowplane", `[{"a":1},"plain"]`}}
	if diff := cmp.Diff(want, rec.requests()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestHTTPPerMessage(t *testing.T) {
	rec, base := serve(t)
	o := buildHTTP(t, map[string]any{
		"url": base + "/p", "method": "PUT",
		"headers": map[string]any{"X-Source": "test", "Content-Type": "text/x-custom"},
	})
	if err := o.Write(testCtx(t), batch("a", "b")); err != nil {
		t.Fatal(err)
	}
	want := []received{
		{"PUT", "/p", "text/x-custom", "test", "a"},
		{"PUT", "/p", "text/x-custom", "test", "b"},
	}
	if diff := cmp.Diff(want, rec.requests()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestHTTPDefaultContentType(t *testing.T) {
	rec, base := serve(t)
	o := buildHTTP(t, map[string]any{"url": base})
	if err := o.Write(testCtx(t), batch(`{"a":1}`, "not json")); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rec.requests() {
		got = append(got, r.ContentType)
	}
	if diff := cmp.Diff([]string{"application/json", "application/octet-stream"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestHTTPRetries(t *testing.T) {
	tests := []struct {
		name         string
		plan         []int
		retries      int
		wantRequests int
		wantCode     int // 0: success
	}{
		{"503 then success", []int{503, 503}, 2, 3, 0},
		{"429 then success", []int{429}, 1, 2, 0},
		{"retries exhausted", []int{503, 503}, 1, 2, 503},
		{"no retries by default", []int{500}, 0, 1, 500},
		{"4xx not retried", []int{400}, 3, 1, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, base := serve(t, tt.plan...)
			o := buildHTTP(t, map[string]any{"url": base, "retry_count": float64(tt.retries)})
			err := o.Write(testCtx(t), batch("x"))
			if tt.wantCode == 0 && err != nil {
				t.Errorf("Write = %v, want success", err)
			}
			if tt.wantCode != 0 {
				se, ok := errors.AsType[*StatusError](err)
				if !ok || se.Code != tt.wantCode {
					t.Errorf("Write = %v, want status %d", err, tt.wantCode)
				}
			}
			if got := len(rec.requests()); got != tt.wantRequests {
				t.Errorf("%d requests, want %d", got, tt.wantRequests)
			}
		})
	}
}

// A refused connection is retried, then reported without the URL (which
// may carry a token).
func TestHTTPConnectionError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	o := buildHTTP(t, map[string]any{"url": base + "/?token=s3cret", "retry_count": float64(2)})
	err := o.Write(testCtx(t), batch("x"))
	if !errors.Is(err, ErrRequest) {
		t.Fatalf("Write = %v, want ErrRequest", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error %q shows the URL", err)
	}
}

func TestHTTPTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	o := buildHTTP(t, map[string]any{"url": srv.URL, "timeout_ms": float64(20)})
	if err := o.Write(testCtx(t), batch("x")); !errors.Is(err, ErrRequest) {
		t.Errorf("Write = %v, want ErrRequest after the timeout", err)
	}
}

func TestHTTPConfigErrors(t *testing.T) {
	for name, conf := range map[string]map[string]any{
		"missing url":    {},
		"relative url":   {"url": "/ingest"},
		"ftp url":        {"url": "ftp://host/x"},
		"bad method":     {"url": "http://h", "method": "TRACE"},
		"zero timeout":   {"url": "http://h", "timeout_ms": float64(0)},
		"negative tries": {"url": "http://h", "retry_count": float64(-1)},
		"bad body":       {"url": "http://h", "body": "ndjson"},
		"header number":  {"url": "http://h", "headers": map[string]any{"X": float64(1)}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := component.Default.NewOutput("http", conf, component.Resources{})
			if err == nil {
				t.Fatal("built without error")
			}
			if strings.Contains(err.Error(), "ftp://") {
				t.Errorf("error %q quotes the URL", err)
			}
		})
	}
}
