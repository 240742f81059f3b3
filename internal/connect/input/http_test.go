package input

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
)

// startHTTP builds and connects an http input on 127.0.0.1:0.
func startHTTP(t *testing.T, conf map[string]any) *HTTP {
	t.Helper()
	if conf["address"] == nil {
		conf["address"] = "127.0.0.1:0"
	}
	in := build(t, "http", conf).(*HTTP)
	if err := in.Connect(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(context.Background()) })
	return in
}

type answer struct {
	code   int
	header http.Header
	err    error
}

// send makes a request in the background; the answer arrives on the channel.
func send(t *testing.T, method, url string, body io.Reader, header map[string]string) <-chan answer {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	c := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			c <- answer{err: err}
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		c <- answer{code: resp.StatusCode, header: resp.Header}
	}()
	return c
}

func urlOf(in *HTTP, path string) string { return "http://" + in.Addr().String() + path }

func code(t *testing.T, c <-chan answer) int {
	t.Helper()
	a := <-c
	if a.err != nil {
		t.Fatal(a.err)
	}
	return a.code
}

func TestHTTPExample(t *testing.T) {
	conf := componenttest.Example(t, component.Default, component.KindInput, "http")
	in := startHTTP(t, conf)
	ctx := testCtx(t)
	c := send(t, "POST", urlOf(in, "/ingest"), strings.NewReader(`[{"a":1},{"a":2}]`), nil)
	b, ack, err := in.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{`{"a":1}`, `{"a":2}`}, payloadsOf(t, b)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	_ = ack(ctx, nil)
	if got := code(t, c); got != http.StatusOK {
		t.Errorf("status %d, want 200", got)
	}
}

// The answer reflects the acknowledgement: 200 only after ack(nil), 503
// after ack(err). An input answering before the ack would send 200 for both.
func TestHTTPAnswersAfterAck(t *testing.T) {
	tests := []struct {
		name   string
		ackErr error
		want   int
	}{
		{"accepted", nil, http.StatusOK},
		{"failed", errors.New("output down"), http.StatusServiceUnavailable},
	}
	in := startHTTP(t, map[string]any{"path": "/in"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			c := send(t, "POST", urlOf(in, "/in"), strings.NewReader("hello"), nil)
			b, ack, err := in.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"hello"}, payloadsOf(t, b)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			select {
			case a := <-c:
				t.Fatalf("answered %d before the acknowledgement", a.code)
			default:
			}
			_ = ack(ctx, tt.ackErr)
			if got := code(t, c); got != tt.want {
				t.Errorf("status %d, want %d", got, tt.want)
			}
		})
	}
}

func TestHTTPCloseAnswers503(t *testing.T) {
	in := startHTTP(t, map[string]any{})
	ctx := testCtx(t)
	c := send(t, "POST", urlOf(in, "/"), strings.NewReader("x"), nil)
	if _, _, err := in.Read(ctx); err != nil {
		t.Fatal(err)
	}
	if err := in.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := code(t, c); got != http.StatusServiceUnavailable {
		t.Errorf("in-flight request answered %d on Close, want 503", got)
	}
	if _, _, err := in.Read(ctx); !errors.Is(err, errInputClosed) {
		t.Errorf("Read after Close = %v", err)
	}
}

// Requests that never reach Read: answered by the handler itself.
func TestHTTPRejects(t *testing.T) {
	bearer := map[string]any{"type": "bearer", "token": "s3cret"}
	basic := map[string]any{"type": "basic", "username": "u", "password": "p"}
	tests := []struct {
		name   string
		conf   map[string]any
		method string
		path   string
		body   io.Reader
		header map[string]string
		want   int
	}{
		{"bearer missing", map[string]any{"auth": bearer}, "POST", "/", strings.NewReader("x"), nil, 401},
		{"bearer wrong", map[string]any{"auth": bearer}, "POST", "/", strings.NewReader("x"), map[string]string{"Authorization": "Bearer s3cre"}, 401},
		{"bearer wrong scheme", map[string]any{"auth": bearer}, "POST", "/", strings.NewReader("x"), map[string]string{"Authorization": "Basic s3cret"}, 401},
		{"basic missing", map[string]any{"auth": basic}, "POST", "/", strings.NewReader("x"), nil, 401},
		{"basic wrong password", map[string]any{"auth": basic}, "POST", "/", strings.NewReader("x"), map[string]string{"Authorization": "Basic dTpx"}, 401}, // u:q
		{"too large", map[string]any{"max_body_bytes": float64(4)}, "POST", "/", strings.NewReader("12345"), nil, 413},
		{"too large, chunked", map[string]any{"max_body_bytes": float64(4)}, "POST", "/", io.MultiReader(strings.NewReader("123"), strings.NewReader("45")), nil, 413},
		{"GET", map[string]any{"path": "/in"}, "GET", "/in", nil, nil, 405},
		{"PUT", map[string]any{"path": "/in"}, "PUT", "/in", strings.NewReader("x"), nil, 405},
		{"other path", map[string]any{"path": "/in"}, "POST", "/out", strings.NewReader("x"), nil, 404},
		{"subpath of /", map[string]any{}, "POST", "/a", strings.NewReader("x"), nil, 404},
		{"bad array", map[string]any{"split_array": true}, "POST", "/", strings.NewReader("[1,"), nil, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := startHTTP(t, tt.conf)
			a := <-send(t, tt.method, urlOf(in, tt.path), tt.body, tt.header)
			if a.err != nil {
				t.Fatal(a.err)
			}
			if a.code != tt.want {
				t.Errorf("status %d, want %d", a.code, tt.want)
			}
			if tt.want == 401 && a.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if tt.want == 405 && a.header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}
}

// Requests that reach Read: the batch built from each.
func TestHTTPBatches(t *testing.T) {
	tests := []struct {
		name   string
		conf   map[string]any
		body   string
		header map[string]string
		want   []string
	}{
		{"one message", map[string]any{}, `[1,2]`, nil, []string{`[1,2]`}},
		{"split", map[string]any{"split_array": true}, ` [{"a":1}, 2, "x"]`, nil, []string{`{"a":1}`, `2`, `"x"`}},
		{"split, not an array", map[string]any{"split_array": true}, `{"a":1}`, nil, []string{`{"a":1}`}},
		{"bearer", map[string]any{"auth": map[string]any{"type": "bearer", "token": "s3cret"}}, "x",
			map[string]string{"Authorization": "bearer s3cret"}, []string{"x"}},
		{"basic", map[string]any{"auth": map[string]any{"type": "basic", "username": "u", "password": "p"}}, "x",
			map[string]string{"Authorization": "Basic dTpw"}, []string{"x"}}, // u:p
		{"at the size limit", map[string]any{"max_body_bytes": float64(4)}, "1234", nil, []string{"1234"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := startHTTP(t, tt.conf)
			ctx := testCtx(t)
			c := send(t, "POST", urlOf(in, "/"), strings.NewReader(tt.body), tt.header)
			b, ack, err := in.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, payloadsOf(t, b)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			_ = ack(ctx, nil)
			if got := code(t, c); got != http.StatusOK {
				t.Errorf("status %d, want 200", got)
			}
		})
	}
}

func TestHTTPEmptyArray(t *testing.T) {
	in := startHTTP(t, map[string]any{"split_array": true})
	if got := code(t, send(t, "POST", urlOf(in, "/"), strings.NewReader("[]"), nil)); got != http.StatusOK {
		t.Errorf("status %d, want 200", got)
	}
}

func TestHTTPAddressInUse(t *testing.T) {
	first := startHTTP(t, map[string]any{})
	second := build(t, "http", map[string]any{"address": first.Addr().String()})
	if err := second.Connect(testCtx(t)); err == nil {
		t.Error("Connect on a taken address succeeded")
	}
	if err := second.Close(testCtx(t)); err != nil {
		t.Errorf("Close after a failed Connect: %v", err)
	}
}

func TestHTTPReadHonoursContext(t *testing.T) {
	in := startHTTP(t, map[string]any{})
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	if _, _, err := in.Read(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Read = %v, want context.Canceled", err)
	}
}

func TestHTTPConfigErrors(t *testing.T) {
	for name, conf := range map[string]map[string]any{
		"bad address":          {"address": "nowhere"},
		"relative path":        {"path": "in"},
		"path with wildcard":   {"path": "/{id}"},
		"zero body":            {"max_body_bytes": float64(0)},
		"bearer without token": {"auth": map[string]any{"type": "bearer"}},
		"basic without pass":   {"auth": map[string]any{"type": "basic", "username": "u"}},
		"unknown auth":         {"auth": map[string]any{"type": "digest"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := component.Default.NewInput("http", conf, component.Resources{}); err == nil {
				t.Error("built without error")
			}
			spec, _ := component.Default.Lookup(component.KindInput, "http")
			if name != "bad address" && componenttest.Validate(spec, conf) == nil {
				t.Error("the schema accepts what the constructor rejects")
			}
		})
	}
}
