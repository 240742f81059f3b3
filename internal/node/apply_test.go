package node_test

import (
	"encoding/json"
	"testing"

	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/wire"
)

// TestApplyWithoutResending: a saved draft applies with {"draft": true}, a
// stored version with {"version": "v1"}, and a raw JSON configuration
// posted as application/json applies like the envelope and raw YAML do.
func TestApplyWithoutResending(t *testing.T) {
	v1 := doc(hcLocal, genStream("a", "a"))
	v2 := doc(hcLocal, genStream("a", "a"), genStream("b", "b"))
	h := newHarness(t, v1)

	// No draft yet.
	problem(t, h.expect(t, 404, "POST", "/configuration/apply", `{"draft": true}`), "not_found")

	h.expect(t, 200, "PUT", "/configuration/draft", v2, "Content-Type", "application/yaml")
	op := decode[wire.Operation](t, h.expect(t, 202, "POST", "/configuration/apply", `{"draft": true}`))
	if op.Operation != node.OpApply {
		t.Errorf("draft apply is a %s operation, want %s", op.Operation, node.OpApply)
	}
	h.succeed(t, op.OperationID)
	cur := decode[versionView](t, h.expect(t, 200, "GET", "/configuration", ""))
	if cur.ID != "v2" || cur.Source != "api" || cur.Content == nil || *cur.Content != v2 {
		t.Fatalf("after applying the draft: %+v", cur)
	}
	h.waitInSync(t, "b")

	// A stored version by id: v1's text comes back as v3.
	op = decode[wire.Operation](t, h.expect(t, 202, "POST", "/configuration/apply", `{"version": "v1"}`))
	h.succeed(t, op.OperationID)
	cur = decode[versionView](t, h.expect(t, 200, "GET", "/configuration", ""))
	if cur.ID != "v3" || cur.Source != "rollback" || cur.RolledBackFrom != "v1" || *cur.Content != v1 {
		t.Fatalf("after applying v1: %+v", cur)
	}
	problem(t, h.expect(t, 404, "POST", "/configuration/apply", `{"version": "v99"}`), "configuration_version_not_found")

	// A raw JSON configuration.
	raw := `{"logging": {"level": "error"}, "health_check": {"enabled": true, "address": "127.0.0.1:0"},
	  "streams": [{"id": "j", "input": {"type": "generate", "context": "{}", "interval": "10ms"},
	  "pipeline": {"processors": []}, "output": {"type": "drop"}}]}`
	op = decode[wire.Operation](t, h.expect(t, 202, "POST", "/configuration/apply", raw))
	h.succeed(t, op.OperationID)
	cur = decode[versionView](t, h.expect(t, 200, "GET", "/configuration", ""))
	if cur.ID != "v4" || cur.Format != "json" || *cur.Content != raw {
		t.Fatalf("after applying raw JSON: %+v", cur)
	}
	h.waitInSync(t, "j")

	// Raw JSON validates (and fails with paths) like any configuration.
	rep := decode[report](t, h.expect(t, 200, "POST", "/configuration/validate", `{"streams": [{"input": {"type": "nope"}}]}`))
	if rep.Valid || len(rep.Errors) == 0 || rep.Errors[0].Path == "" {
		t.Errorf("raw JSON validation report %+v, want problems with paths", rep)
	}
	// The envelope still works, and is still strict.
	h.expect(t, 200, "POST", "/configuration/validate", configBody(t, "yaml", v1))
	problem(t, h.expect(t, 400, "POST", "/configuration/validate", `{"format": "yaml", "content": "", "extra": 1}`), "invalid_json")

	// Bad references.
	for _, c := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"draft": true, "version": "v1"}`, 422, "validation_failed"},
		{`{"draft": false}`, 422, "validation_failed"},
		{`{"version": ""}`, 422, "validation_failed"},
		{`{"draft": "yes"}`, 400, "invalid_json"},
		{`{"draft": true, "streams": []}`, 400, "invalid_json"},
		{`[1, 2]`, 400, "invalid_json"},
		{`null`, 400, "invalid_json"},
	} {
		problem(t, h.expect(t, c.status, "POST", "/configuration/apply", c.body), c.code)
	}
	// Only apply takes a reference.
	for _, route := range []struct{ method, path string }{{"POST", "/configuration/validate"}, {"PUT", "/configuration/draft"}} {
		problem(t, h.expect(t, 400, route.method, route.path, `{"draft": true}`), "invalid_json")
	}
	vs := decode[wire.Page[versionView]](t, h.expect(t, 200, "GET", "/configuration/versions", ""))
	if vs.Total != 4 {
		b, _ := json.Marshal(vs.Items)
		t.Errorf("%d versions, want 4 (refused requests store nothing): %s", vs.Total, b)
	}
}
