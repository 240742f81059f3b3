package node_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/wire"
)

// TestStatusCodes produces every status code of API.md the node can
// answer, each error as the problem envelope carrying the request's
// correlation id.
func TestStatusCodes(t *testing.T) {
	h := newHarness(t, doc(hcLocal, genStream("a", "a"), genStream("b", "b")))
	ran := h.action(t, "b", "restart")
	h.succeed(t, ran.OperationID)
	gen := h.stream(t, "a").Desired.Generation
	invalid := doc(hcLocal, "  - id: bad\n    input: {type: nope}\n    pipeline: {processors: []}\n    output: {type: drop}\n")

	type tc struct {
		name, method, path, body string
		header                   []string
		status                   int
		code                     string // for errors
		check                    func(t *testing.T, r response)
	}
	tests := []tc{
		{name: "200", method: "GET", path: "/streams", status: 200},
		{name: "202 with Location and ETag", method: "POST", path: "/streams/a/start", status: 202,
			check: func(t *testing.T, r response) {
				d := decode[wire.DesiredStateResponse](t, r)
				if want := fmt.Sprintf(`"generation-%d"`, d.Generation); r.Header.Get("ETag") != want || d.Generation != gen+1 {
					t.Errorf("ETag %q generation %d, want %s after %d", r.Header.Get("ETag"), d.Generation, want, gen)
				}
				if r.Header.Get("Location") != "/operations/"+d.OperationID {
					t.Errorf("Location = %q", r.Header.Get("Location"))
				}
			}},
		{name: "400 malformed json", method: "POST", path: "/configuration/validate", body: "{not json", status: 400, code: "invalid_json"},
		{name: "400 unknown field", method: "POST", path: "/configuration/validate", body: `{"format":"yaml","content":"","bogus":1}`,
			status: 400, code: "invalid_json", check: func(t *testing.T, r response) {
				if !strings.Contains(string(r.Body), "bogus") {
					t.Errorf("the message does not name the field: %s", r)
				}
			}},
		{name: "400 empty config body", method: "POST", path: "/configuration/apply", status: 400, code: "invalid_json"},
		{name: "400 page_size 0", method: "GET", path: "/streams?page_size=0", status: 400, code: "invalid_query"},
		{name: "400 page_size 101", method: "GET", path: "/operations?page_size=101", status: 400, code: "invalid_query"},
		{name: "400 page 0", method: "GET", path: "/components?page=0", status: 400, code: "invalid_query"},
		{name: "400 bad event filter", method: "GET", path: "/events?since_id=abc", status: 400, code: "invalid_query"},
		{name: "400 bad event since", method: "GET", path: "/events?since=yesterday", status: 400, code: "invalid_query"},
		{name: "400 bad X-Correlation-ID", method: "GET", path: "/streams", header: []string{"X-Correlation-ID", strings.Repeat("x", 129)},
			status: 400, code: "invalid_header"},
		{name: "400 bad If-Match", method: "POST", path: "/streams/a/stop", header: []string{"If-Match", "generation-1"}, status: 400, code: "invalid_header"},
		{name: "400 bad If-Match tag", method: "POST", path: "/streams/a/stop", header: []string{"If-Match", `"gen-01"`}, status: 400, code: "invalid_header"},
		{name: "400 long Idempotency-Key", method: "POST", path: "/streams/a/stop", header: []string{"Idempotency-Key", strings.Repeat("k", 256)},
			status: 400, code: "invalid_header"},
		{name: "404 no route", method: "GET", path: "/nope", status: 404, code: "not_found"},
		{name: "404 no draft", method: "GET", path: "/configuration/draft", status: 404, code: "not_found"},
		{name: "404 stream", method: "GET", path: "/streams/nope", status: 404, code: "stream_not_found"},
		{name: "404 stream action", method: "POST", path: "/streams/nope/restart", status: 404, code: "stream_not_found"},
		{name: "404 operation", method: "GET", path: "/operations/nope", status: 404, code: "operation_not_found"},
		{name: "404 cancel operation", method: "DELETE", path: "/operations/nope", status: 404, code: "operation_not_found"},
		{name: "404 component", method: "GET", path: "/components/input/nope", status: 404, code: "component_not_found"},
		{name: "404 component kind", method: "GET", path: "/components/bogus/generate", status: 404, code: "component_not_found"},
		{name: "404 rollback version", method: "POST", path: "/configuration/rollback/v99", status: 404, code: "configuration_version_not_found"},
		{name: "404 diff version", method: "GET", path: "/configuration/diff?from=v99&to=v1", status: 404, code: "configuration_version_not_found"},
		{name: "404 diff without draft", method: "GET", path: "/configuration/diff", status: 404, code: "configuration_version_not_found"},
		{name: "405", method: "DELETE", path: "/streams", status: 405, code: "method_not_allowed",
			check: func(t *testing.T, r response) {
				if !strings.Contains(r.Header.Get("Allow"), "GET") {
					t.Errorf("Allow = %q", r.Header.Get("Allow"))
				}
			}},
		{name: "405 draft", method: "PATCH", path: "/configuration/draft", status: 405, code: "method_not_allowed",
			check: func(t *testing.T, r response) {
				if a := r.Header.Get("Allow"); !strings.Contains(a, "GET") || !strings.Contains(a, "PUT") {
					t.Errorf("Allow = %q", a)
				}
			}},
		{name: "409 not cancellable", method: "DELETE", path: "/operations/" + ran.OperationID, status: 409, code: "operation_not_cancellable"},
		{name: "412", method: "POST", path: "/streams/a/stop", header: []string{"If-Match", `"generation-1000"`}, status: 412, code: "generation_conflict",
			check: func(t *testing.T, r response) {
				p := decode[wire.Problem](t, r)
				want := map[string]any{"expected_generation": 1000.0, "current_generation": float64(gen + 1),
					"resource": map[string]any{"node_id": testNodeID, "stream_id": "a"}}
				if d := cmp.Diff(want, p.Details); d != "" {
					t.Errorf("details (-want +got):\n%s", d)
				}
			}},
		{name: "413", method: "POST", path: "/configuration/validate", body: configBody(t, "yaml", strings.Repeat("#", 2<<20)),
			status: 413, code: "body_too_large"},
		{name: "415", method: "POST", path: "/configuration/validate", body: "streams: []", header: []string{"Content-Type", "text/plain"},
			status: 415, code: "unsupported_media_type"},
		{name: "415 action body", method: "POST", path: "/streams/a/restart", body: "now", header: []string{"Content-Type", "text/plain"},
			status: 415, code: "unsupported_media_type"},
		{name: "400 action body field", method: "POST", path: "/streams/a/restart", body: `{"state":"running"}`,
			status: 400, code: "invalid_json"},
		{name: "422", method: "POST", path: "/configuration/apply", body: configBody(t, "yaml", invalid), status: 422, code: "validation_failed",
			check: func(t *testing.T, r response) {
				p := decode[wire.Problem](t, r)
				errs, _ := p.Details["errors"].([]any)
				if len(errs) == 0 {
					t.Fatalf("no details.errors: %s", r)
				}
				first, _ := errs[0].(map[string]any)
				if path, _ := first["path"].(string); !strings.HasPrefix(path, "streams[0].input") {
					t.Errorf("details.errors[0] = %v, want a streams[0].input path", first)
				}
			}},
		{name: "422 format", method: "POST", path: "/configuration/validate", body: configBody(t, "xml", "<a/>"), status: 422, code: "validation_failed"},
	}
	for i, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			corr := fmt.Sprintf("status-%02d", i)
			header := append([]string{"X-Correlation-ID", corr}, c.header...)
			r := h.do(t, c.method, c.path, c.body, header...)
			if r.Status != c.status {
				t.Fatalf("%s %s = %s, want %d", c.method, c.path, r, c.status)
			}
			wantCorr := corr
			if c.name == "400 bad X-Correlation-ID" {
				wantCorr = "" // a generated one
			}
			if got := r.Header.Get("X-Correlation-ID"); got == "" || wantCorr != "" && got != wantCorr {
				t.Errorf("X-Correlation-ID = %q, want %q", got, wantCorr)
			}
			if c.code != "" {
				if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
					t.Errorf("problem Content-Type = %q", ct)
				}
				p := problem(t, r, c.code)
				if wantCorr != "" && p.CorrelationID != wantCorr {
					t.Errorf("correlation_id = %q, want %q", p.CorrelationID, wantCorr)
				}
			}
			if c.check != nil {
				c.check(t, r)
			}
		})
	}
	// The invalid apply created no version.
	vs := decode[wire.Page[map[string]any]](t, h.expect(t, 200, "GET", "/configuration/versions", ""))
	if vs.Total != 1 {
		t.Errorf("versions after a rejected apply: %d, want 1", vs.Total)
	}
	h.drain(t)
}

// TestBodyTooLargeChunked: a body over 1 MiB without Content-Length is cut
// while it is read, with the same problem.
func TestBodyTooLargeChunked(t *testing.T) {
	h := newHarness(t, doc(hcLocal, genStream("a", "a")))
	// A reader hides the length, so the client sends it chunked.
	r := h.doReader(t, "POST", "/configuration/validate", strings.NewReader(configBody(t, "yaml", strings.Repeat("#", 2<<20))))
	if r.Status != 413 {
		t.Fatalf("chunked 2 MiB body = %s, want 413", r)
	}
	problem(t, r, "body_too_large")
}

// TestStatusAndProbesIncludeJobs: /status counts jobs by state, and a job
// that failed (a sum over a string, with recovery fail) makes the node
// not ready and unhealthy, named by id.
func TestStatusAndProbesIncludeJobs(t *testing.T) {
	job := func(id, agg string) string {
		return `
  - id: ` + id + `
    version: 1
    operators:
      - {id: src, kind: source}
      - {id: counts, kind: aggregate, config: {key: this.k, aggregations: [` + agg + `]}}
      - {id: out, kind: sink}
    edges: [{from: src, to: counts}, {from: counts, to: out}]
    sources: [{operator_id: src, input_type: generate, config: {context: '{"k": 1, "s": "x"}', interval: 5ms}}]
    sinks: [{operator_id: out, output_type: drop}]
    state: {backend: embedded_kv, durability: ephemeral}
    recovery: fail
`
	}
	h := newHarness(t, doc("", genStream("s", `{"a": 1}`))+"jobs:"+job("good", "{name: n, function: count}")+
		job("bad", "{name: total, function: sum, expression: this.s}"))
	eventually(t, "the good job to run", func() (bool, string) {
		st := decode[node.Status](t, h.expect(t, 200, "GET", "/status", ""))
		return st.Jobs.Running == 1 && st.Jobs.Failed == 1 && st.Jobs.Total == 2, fmt.Sprintf("%+v", st.Jobs)
	})
	ready := decode[node.Probe](t, h.expect(t, 503, "GET", "/readiness", ""))
	if !slices.Contains(ready.NotReady, "bad") || slices.Contains(ready.NotReady, "good") {
		t.Errorf("readiness names %v, want the failed job only", ready.NotReady)
	}
	health := decode[node.Probe](t, h.expect(t, 503, "GET", "/health", ""))
	if !slices.Contains(health.Failed, "bad") {
		t.Errorf("health names %v as failed, want bad", health.Failed)
	}
}
