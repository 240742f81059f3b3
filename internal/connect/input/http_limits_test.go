package input

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
)

// post sends a request and returns its status, Retry-After and body; the
// body holds the error when there is no answer. It may run on any
// goroutine.
func post(ctx context.Context, url, body string) (int, string, string) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		return 0, "", err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
}

// TestHTTPPendingLimit checks that with max_pending_requests held, one more
// request is answered 503 with Retry-After at once, and that a place freed
// by an answer is taken again.
func TestHTTPPendingLimit(t *testing.T) {
	in := startHTTP(t, map[string]any{"max_pending_requests": 1.0, "ack_timeout": "1h"})
	ctx := testCtx(t)
	first := send(t, "POST", urlOf(in, "/"), strings.NewReader("one"), nil)
	_, ack, err := in.Read(ctx) // held: read, not yet acknowledged
	if err != nil {
		t.Fatal(err)
	}
	status, retry, body := post(ctx, urlOf(in, "/"), "two")
	if status != http.StatusServiceUnavailable || retry != "1" || !strings.Contains(body, "max_pending_requests") {
		t.Errorf("request beyond the limit: %d, Retry-After %q, body %q; want 503, \"1\", naming max_pending_requests", status, retry, body)
	}
	_ = ack(ctx, nil)
	if got := code(t, first); got != http.StatusOK {
		t.Fatalf("held request answered %d, want 200", got)
	}
	third := send(t, "POST", urlOf(in, "/"), strings.NewReader("three"), nil)
	b, ack, err := in.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := payloadsOf(t, b); len(got) != 1 || got[0] != "three" {
		t.Errorf("read %q, want [three]", got)
	}
	_ = ack(ctx, nil)
	if got := code(t, third); got != http.StatusOK {
		t.Errorf("request after a place was freed answered %d, want 200", got)
	}
}

// TestHTTPAckTimeout checks that a request whose batch is not taken, or
// taken and not acknowledged, within ack_timeout is answered 503 with
// Retry-After and a message saying so, and frees its place.
func TestHTTPAckTimeout(t *testing.T) {
	in := startHTTP(t, map[string]any{"max_pending_requests": 1.0, "ack_timeout": "200ms"})
	ctx := testCtx(t)
	check := func(what string, status int, retry, body string) {
		t.Helper()
		if status != http.StatusServiceUnavailable || retry != "1" || !strings.Contains(body, "ack_timeout") {
			t.Errorf("%s: %d, Retry-After %q, body %q; want 503, \"1\", naming ack_timeout", what, status, retry, body)
		}
	}
	// Nobody reads: the stream does not take the data.
	status, retry, body := post(ctx, urlOf(in, "/"), "never read")
	check("not read", status, retry, body)

	// Read but never acknowledged (the place is free again: limit 1).
	go func() { _, _, _ = in.Read(ctx) }() // takes the batch, never acknowledges it
	status, retry, body = post(ctx, urlOf(in, "/"), "never acknowledged")
	check("not acknowledged", status, retry, body)
}

func TestHTTPLimitConfigErrors(t *testing.T) {
	spec, _ := component.Default.Lookup(component.KindInput, "http")
	for name, conf := range map[string]map[string]any{
		"zero pending":     {"max_pending_requests": 0.0},
		"negative timeout": {"ack_timeout": "-1s"},
		"word timeout":     {"ack_timeout": "soon"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := component.Default.NewInput("http", conf, component.Resources{}); err == nil {
				t.Error("built without error")
			}
			if componenttest.Validate(spec, conf) == nil {
				t.Error("the schema accepts what the constructor rejects")
			}
		})
	}
}
