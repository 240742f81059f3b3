package node_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// TestPagination: every collection has the envelope, pages and bounds.
func TestPagination(t *testing.T) {
	v1 := doc(hcLocal, genStream("a", "a"), genStream("b", "b"), genStream("c", "c"))
	h := newHarness(t, v1)
	for _, id := range []string{"a", "b"} {
		h.succeed(t, h.action(t, id, "restart").OperationID)
	}
	h.succeed(t, decode[wire.Operation](t, h.expect(t, 202, "POST", "/configuration/apply", v1, "Content-Type", "application/yaml")).OperationID)

	for _, c := range []struct {
		path     string
		minTotal int
		key      string // a field that identifies an item
	}{
		{"/streams", 3, "id"}, {"/operations", 3, "operation_id"}, {"/events", 5, "id"}, {"/components", 10, "summary"},
		{"/configuration/versions", 2, "id"}, {"/nodes", 1, "node_id"},
	} {
		t.Run(c.path, func(t *testing.T) {
			def := decode[wire.Page[map[string]any]](t, h.expect(t, 200, "GET", c.path, ""))
			if def.Page != 1 || def.PageSize != 50 || def.Total < c.minTotal || len(def.Items) != min(def.Total, 50) {
				t.Fatalf("default page %d size %d total %d items %d", def.Page, def.PageSize, def.Total, len(def.Items))
			}
			one := decode[wire.Page[map[string]any]](t, h.expect(t, 200, "GET", c.path+"?page_size=1", ""))
			if one.Page != 1 || one.PageSize != 1 || len(one.Items) != 1 || one.Total != def.Total {
				t.Errorf("page_size=1: %+v", one)
			}
			if def.Total > 1 {
				two := decode[wire.Page[map[string]any]](t, h.expect(t, 200, "GET", c.path+"?page=2&page_size=1", ""))
				if two.Page != 2 || len(two.Items) != 1 || two.Items[0][c.key] != def.Items[1][c.key] || def.Items[1][c.key] == nil {
					t.Errorf("page 2 of 1 is not the second item: %+v", two)
				}
			}
			h.expect(t, 200, "GET", c.path+"?page_size=100", "")
			past := h.expect(t, 200, "GET", c.path+"?page=1000&page_size=100", "")
			if p := decode[wire.Page[map[string]any]](t, past); p.Total != def.Total || !bytes.Contains(past.Body, []byte(`"items":[]`)) {
				t.Errorf("past the end: %s", past)
			}
			for _, q := range []string{"page_size=0", "page_size=101", "page_size=-1", "page_size=x", "page=0", "page=-2", "page=x"} {
				problem(t, h.expect(t, 400, "GET", c.path+"?"+q, ""), "invalid_query")
			}
		})
	}
}

// TestListeners: which listener Listen binds and what it serves.
func TestListeners(t *testing.T) {
	stream := genStream("a", "a")
	t.Run("observability only", func(t *testing.T) {
		h := newHarness(t, doc(`health_check:
  enabled: false
  observability: {enabled: true, address: 127.0.0.1:0}
`, stream))
		if h.ln == nil || h.ln.Kind != "observability" {
			t.Fatalf("listener %+v", h.ln)
		}
		for _, p := range []string{"/metrics", "/ready", "/live"} {
			h.expect(t, 200, "GET", p, "")
		}
		for _, p := range []string{"/streams", "/status", "/health", "/readiness", "/liveness", "/system", "/configuration"} {
			problem(t, h.expect(t, 404, "GET", p, ""), "not_found")
		}
	})
	t.Run("none", func(t *testing.T) {
		h := newHarness(t, doc(`health_check:
  enabled: false
  observability: {enabled: false}
`, stream))
		if h.ln != nil {
			t.Fatalf("Listen bound %s with both servers disabled", h.ln.Addr())
		}
	})
	t.Run("control plane serves observability paths", func(t *testing.T) {
		h := newHarness(t, doc(`health_check:
  enabled: true
  address: 127.0.0.1:0
  observability: {enabled: true, address: 127.0.0.1:1, metrics_path: /prom, ready_path: /up, live_path: /alive}
`, stream))
		if h.ln == nil || h.ln.Kind != "control-plane" {
			t.Fatalf("listener %+v", h.ln)
		}
		for _, p := range []string{"/metrics", "/prom", "/up", "/alive", "/health", "/readiness", "/liveness", "/streams"} {
			h.expect(t, 200, "GET", p, "")
		}
	})
	t.Run("taken port", func(t *testing.T) {
		h := newHarness(t, doc(hcLocal, stream))
		hopts := h.hopts
		hopts.HealthCheck.Address = h.ln.Addr().String()
		if ln, err := h.n.Listen(hopts); err == nil {
			t.Errorf("Listen on a taken port bound %s", ln.Addr())
		}
	})
}

// TestProbes: an operator's stop is not a failure. A stream stopped
// through the API keeps the node ready and healthy (200); a stream that
// should run and fails makes it unready (503, named in not_ready) and
// unhealthy. Liveness stays 200 throughout.
func TestProbes(t *testing.T) {
	h := newHarness(t, doc(hcLocal, genStream("a", "a"), genStream("b", "b")))
	eventually(t, "ready", func() (bool, string) {
		r := h.do(t, "GET", "/readiness", "")
		return r.Status == 200, r.String()
	})
	h.succeed(t, h.action(t, "b", "stop").OperationID)
	type probeBody struct {
		Status   string   `json:"status"`
		NotReady []string `json:"not_ready"`
		Failed   []string `json:"failed"`
	}
	want := map[string]string{"/readiness": "ready", "/ready": "ready", "/health": "healthy"}
	for p, status := range want {
		r := h.expect(t, 200, "GET", p, "")
		if got := decode[probeBody](t, r); got.Status != status || len(got.NotReady) != 0 {
			t.Errorf("%s with a stream stopped on purpose = %s, want 200 %s", p, r, status)
		}
	}
	status := decode[struct {
		Ready   bool `json:"ready"`
		Streams struct{ Total, Running, Stopped int }
	}](t, h.expect(t, 200, "GET", "/status", ""))
	if !status.Ready || status.Streams.Total != 2 || status.Streams.Running != 1 || status.Streams.Stopped != 1 {
		t.Errorf("status %+v, want ready with 1 running, 1 stopped", status)
	}

	// A stream that should run and cannot (its input's file is missing).
	broken := `  - id: c
    input: {type: file, path: ` + filepath.Join(t.TempDir(), "missing.txt") + `}
    pipeline: {processors: []}
    output: {type: drop}
`
	applied := decode[wire.Operation](t, h.expect(t, 202, "POST", "/configuration/apply", configBody(t, "yaml", doc(hcLocal, genStream("a", "a"), genStream("b", "b"), broken))))
	h.waitOp(t, applied.OperationID)
	eventually(t, "c failed", func() (bool, string) {
		s := h.stream(t, "c")
		return s.Observed.State == "failed", s.Observed.State
	})
	for p, status := range map[string]string{"/readiness": "not_ready", "/ready": "not_ready", "/health": "unhealthy"} {
		r := h.expect(t, 503, "GET", p, "")
		if got := decode[probeBody](t, r); got.Status != status || len(got.NotReady) != 1 || got.NotReady[0] != "c" {
			t.Errorf("%s with a failed stream = %s, want 503 %s, not_ready [c]", p, r, status)
		}
	}
	for _, p := range []string{"/liveness", "/live"} {
		h.expect(t, 200, "GET", p, "")
	}
}

// TestNoHistory: without a configuration history the configuration routes
// answer 503 unavailable; validation still works.
func TestNoHistory(t *testing.T) {
	text := doc(hcLocal, genStream("a", "a"))
	h := newHarness(t, text, harnessOptions{noHistory: true})
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/configuration", ""}, {"GET", "/configuration/versions", ""}, {"GET", "/configuration/draft", ""},
		{"GET", "/configuration/diff", ""}, {"PUT", "/configuration/draft", configBody(t, "yaml", text)},
		{"POST", "/configuration/apply", configBody(t, "yaml", text)}, {"POST", "/configuration/rollback/v1", ""},
	} {
		problem(t, h.expect(t, 503, c.method, c.path, c.body), "unavailable")
	}
	h.expect(t, 200, "POST", "/configuration/validate", configBody(t, "yaml", text))
}

// TestPromtool runs `promtool check metrics` on the /metrics body.
func TestPromtool(t *testing.T) {
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not on PATH (install the prometheus package to run this check)")
	}
	h := newHarness(t, doc(hcLocal, genStream("a", "a")))
	eventually(t, "messages counted", func() (bool, string) {
		return h.stream(t, "a").Observed.Counters.Sent > 0, "none sent"
	})
	body := h.expect(t, 200, "GET", "/metrics", "").Body
	if !bytes.Contains(body, []byte(`svc_stream_sent_total{component="output",stream="a"}`)) {
		t.Errorf("metrics lack svc_stream_sent_total of stream a:\n%.1000s", body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, strings.TrimSpace(string(out)))
	}
}
