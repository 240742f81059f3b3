package node_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/wire"
)

type versionView struct {
	ID             string    `json:"id"`
	Format         string    `json:"format"`
	SHA256         string    `json:"sha256"`
	Source         string    `json:"source"`
	RolledBackFrom string    `json:"rolled_back_from"`
	CreatedAt      wire.Time `json:"created_at"`
	Applied        bool      `json:"applied"`
	Content        *string   `json:"content"`
}

type report struct {
	Valid  bool `json:"valid"`
	Errors []struct {
		Path    string `json:"path"`
		Message string `json:"message"`
	} `json:"errors"`
}

const tomlDoc = `[health_check]
enabled = false

[[streams]]
id = "t"
pipeline = { processors = [] }
input = { type = "generate", context = "{}", interval = "10ms" }
output = { type = "drop" }
`

// TestValidate: JSON and raw bodies, good and bad, answer a report.
func TestValidate(t *testing.T) {
	good := doc(hcLocal, genStream("a", "a"))
	h := newHarness(t, good)
	bad := doc(hcLocal, "  - id: x\n    input: {type: generate, context: x, interval: soon}\n    pipeline: {processors: []}\n    output: {type: drop}\n")
	tests := []struct {
		name, body, ctype string
		valid             bool
		path              string // of the first error
	}{
		{"json good", configBody(t, "yaml", good), "", true, ""},
		{"json format json", configBody(t, "json", `{"streams": []}`), "", true, ""},
		{"yaml good", good, "application/yaml", true, ""},
		{"text yaml good", good, "text/yaml", true, ""},
		{"toml good", tomlDoc, "application/toml", true, ""},
		{"json bad", configBody(t, "yaml", bad), "", false, "streams[0].input.interval"},
		{"yaml bad", bad, "application/yaml", false, "streams[0].input.interval"},
		{"yaml unparsable", "streams: [ {", "application/yaml", false, ""},
		{"unknown component", strings.Replace(good, "type: drop", "type: nope", 1), "application/yaml", false, "streams[0].output.type"},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			var header []string
			if c.ctype != "" {
				header = []string{"Content-Type", c.ctype}
			}
			rep := decode[report](t, h.expect(t, 200, "POST", "/configuration/validate", c.body, header...))
			if rep.Valid != c.valid || rep.Errors == nil || c.valid != (len(rep.Errors) == 0) {
				t.Fatalf("report %+v, want valid %v", rep, c.valid)
			}
			if c.path != "" && rep.Errors[0].Path != c.path {
				t.Errorf("first error %+v, want path %s", rep.Errors[0], c.path)
			}
		})
	}
	// Validation stores nothing.
	if vs := decode[wire.Page[versionView]](t, h.expect(t, 200, "GET", "/configuration/versions", "")); vs.Total != 1 {
		t.Errorf("%d versions after validating", vs.Total)
	}
}

// TestConfigurationLifecycle: draft, diff, apply (unchanged streams keep
// running), rollback, and an invalid apply that stores nothing.
func TestConfigurationLifecycle(t *testing.T) {
	v1 := doc(hcLocal, genStream("keep", "k"), genStream("change", "c1"), genStream("remove", "r"))
	v2 := doc(hcLocal, genStream("keep", "k"), genStream("change", "c2"), genStream("new", "n"))
	h := newHarness(t, v1)

	problem(t, h.expect(t, 404, "GET", "/configuration/draft", ""), "not_found")
	put := h.expect(t, 200, "PUT", "/configuration/draft", v2, "Content-Type", "application/yaml")
	if rep := decode[struct{ Report report }](t, put).Report; !rep.Valid {
		t.Fatalf("draft report %+v", rep)
	}
	draft := decode[struct {
		Format, Content, SHA256 string
		UpdatedAt               wire.Time `json:"updated_at"`
	}](t, h.expect(t, 200, "GET", "/configuration/draft", ""))
	if draft.Content != v2 || draft.Format != "yaml" || len(draft.SHA256) != 64 || draft.UpdatedAt.IsZero() {
		t.Errorf("draft %+v", draft)
	}

	diff := decode[node.DiffReport](t, h.expect(t, 200, "GET", "/configuration/diff", ""))
	wantSummary := node.StreamSummary{Added: []string{"new"}, Removed: []string{"remove"}, Changed: []string{"change"}, Unchanged: []string{"keep"}}
	if d := cmp.Diff(wantSummary, diff.Summary); d != "" || diff.From != "v1" || diff.To != "draft" {
		t.Errorf("diff %s -> %s summary (-want +got):\n%s", diff.From, diff.To, d)
	}
	for _, line := range []string{"--- v1", "+++ draft", "@@ ", `-    input: {type: generate, context: '{"s": "c1"}'`, "+  - id: new", "-  - id: remove"} {
		if !strings.Contains(diff.Unified, line) {
			t.Errorf("unified diff lacks %q:\n%s", line, diff.Unified)
		}
	}

	keepBefore := h.stream(t, "keep")
	lastEvent := decode[wire.Page[wire.Event]](t, h.expect(t, 200, "GET", "/events?page_size=1", "")).Items[0].ID
	ar := h.expect(t, 202, "POST", "/configuration/apply", configBody(t, "yaml", v2), "X-Correlation-ID", "corr-apply")
	apply := decode[wire.Operation](t, ar)
	if ar.Header.Get("Location") != "/operations/"+apply.OperationID || apply.Operation != node.OpApply || apply.ResourceID != node.ConfigResource {
		t.Fatalf("apply answer %s", ar)
	}
	done := h.succeed(t, apply.OperationID)
	res := decode[node.ApplyResult](t, response{Body: mustJSON(t, done.Result)})
	wantRes := node.ApplyResult{ConfigVersion: "v2", Added: []string{"new"}, Removed: []string{"remove"}, Changed: []string{"change"}, Unchanged: []string{"keep"}}
	if d := cmp.Diff(wantRes, res); d != "" {
		t.Errorf("apply result (-want +got):\n%s", d)
	}

	vs := decode[wire.Page[versionView]](t, h.expect(t, 200, "GET", "/configuration/versions", ""))
	if len(vs.Items) != 2 || vs.Items[0].ID != "v1" || vs.Items[0].Source != "file" || vs.Items[0].Applied ||
		vs.Items[1].ID != "v2" || vs.Items[1].Source != "api" || !vs.Items[1].Applied || vs.Items[1].Content != nil {
		t.Errorf("versions %+v", vs.Items)
	}
	cur := decode[versionView](t, h.expect(t, 200, "GET", "/configuration", ""))
	if cur.ID != "v2" || cur.Content == nil || *cur.Content != v2 || !cur.Applied {
		t.Errorf("configuration %+v", cur)
	}

	for _, id := range []string{"keep", "change", "new"} {
		s := h.waitInSync(t, id)
		if s.Desired.ConfigVersion != "v2" || s.Observed.ConfigVersion != "v2" || s.Observed.State != "running" {
			t.Errorf("%s after apply %+v", id, s)
		}
	}
	problem(t, h.expect(t, 404, "GET", "/streams/remove", ""), "stream_not_found")
	if ids := streamIDs(t, h); !slices.Equal(ids, []string{"keep", "change", "new"}) {
		t.Errorf("streams after apply %v", ids)
	}
	keepAfter := h.stream(t, "keep")
	if !keepAfter.Observed.StartedAt.Equal(keepBefore.Observed.StartedAt.Time) || keepAfter.Desired.Generation != keepBefore.Desired.Generation {
		t.Errorf("unchanged stream restarted: before %+v after %+v", keepBefore.Observed, keepAfter.Observed)
	}
	if d := h.stream(t, "change").Desired; d.Generation != 2 {
		t.Errorf("changed stream desired %+v, want generation 2", d)
	}
	since := func(id string) map[any]bool {
		p := decode[wire.Page[wire.Event]](t, h.expect(t, 200, "GET", "/events?kind=stream_state_changed&resource_id="+id+"&since_id="+itoa(lastEvent), ""))
		m := map[any]bool{}
		for _, ev := range p.Items {
			m[ev.Data["state"]] = true
		}
		return m
	}
	if st := since("keep"); len(st) != 0 {
		t.Errorf("unchanged stream changed state during the apply: %v", st)
	}
	if st := since("change"); !st["stopped"] || !st["running"] {
		t.Errorf("changed stream states during the apply: %v", st)
	}
	if st := since("remove"); !st["stopped"] {
		t.Errorf("removed stream states during the apply: %v", st)
	}

	rb := decode[wire.Operation](t, h.expect(t, 202, "POST", "/configuration/rollback/v1", ""))
	if rb.Operation != node.OpRollback {
		t.Errorf("rollback answer %+v", rb)
	}
	h.succeed(t, rb.OperationID)
	vs = decode[wire.Page[versionView]](t, h.expect(t, 200, "GET", "/configuration/versions", ""))
	if len(vs.Items) != 3 || vs.Items[2].ID != "v3" || vs.Items[2].Source != "rollback" || vs.Items[2].RolledBackFrom != "v1" ||
		!vs.Items[2].Applied || vs.Items[2].SHA256 != vs.Items[0].SHA256 || vs.Items[1].Applied {
		t.Errorf("versions after rollback %+v", vs.Items)
	}
	for _, id := range []string{"keep", "change", "remove"} {
		if s := h.waitInSync(t, id); s.Desired.ConfigVersion != "v3" {
			t.Errorf("%s after rollback %+v", id, s.Desired)
		}
	}
	if ids := streamIDs(t, h); !slices.Equal(ids, []string{"keep", "change", "remove"}) {
		t.Errorf("streams after rollback %v", ids)
	}
	if d := decode[node.DiffReport](t, h.expect(t, 200, "GET", "/configuration/diff?from=v1&to=v3", "")); d.Unified != "" || len(d.Summary.Unchanged) != 3 {
		t.Errorf("v1 -> v3 diff %+v", d)
	}

	bad := strings.Replace(v2, "type: drop", "type: nope", 1)
	p := problem(t, h.expect(t, 422, "POST", "/configuration/apply", bad, "Content-Type", "application/yaml"), "validation_failed")
	if errs, _ := p.Details["errors"].([]any); len(errs) == 0 || !strings.HasSuffix(errs[0].(map[string]any)["path"].(string), "output.type") {
		t.Errorf("422 details %v", p.Details)
	}
	if vs := decode[wire.Page[versionView]](t, h.expect(t, 200, "GET", "/configuration/versions", "")); vs.Total != 3 {
		t.Errorf("%d versions after an invalid apply, want 3", vs.Total)
	}
	if cur := decode[versionView](t, h.expect(t, 200, "GET", "/configuration", "")); cur.ID != "v3" {
		t.Errorf("applied %s after an invalid apply", cur.ID)
	}
	h.drain(t)
}

func streamIDs(t *testing.T, h *harness) []string {
	t.Helper()
	var ids []string
	for _, s := range decode[wire.Page[wire.Stream]](t, h.expect(t, 200, "GET", "/streams", "")).Items {
		ids = append(ids, s.ID)
	}
	return ids
}
