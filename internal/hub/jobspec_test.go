package hub

import (
	"net/http"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/wire"
)

// TestJobSpecReferencesInExpressions: a reference inside a map expression
// or an aggregate key is the node's to resolve. The Hub accepts a spec
// that is valid once resolved (with its plan, the references listed), and
// refuses with 422 naming the path one that no value can make valid;
// neither answers 500 (issue 29).
func TestJobSpecReferencesInExpressions(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	newJobAgent(t, th, "n1")
	spec := func(id, key, mapExpr string) string {
		s := testJobSpec(id, 1, 128)
		s = strings.Replace(s, `"key": "this.user"`, `"key": `+string(mustJSON(t, key)), 1)
		return strings.Replace(s, `{"id": "out", "kind": "sink"}`,
			`{"id": "m", "kind": "map", "config": {"expression": `+string(mustJSON(t, mapExpr))+`}}, {"id": "out", "kind": "sink"}`, 1)
	}
	withMap := func(s string) string {
		return strings.Replace(s, `{"from": "counts", "to": "out"}`, `{"from": "counts", "to": "m"}, {"from": "m", "to": "out"}`, 1)
	}
	for _, tc := range []struct {
		name, spec string
		status     int
		path       string // of the 422's problem
	}{
		{"secret in a map expression", withMap(spec("j1", "this.user", `merge(this, {"k": "${secret:API_KEY}"})`)), 200, ""},
		{"env number in a map expression", withMap(spec("j2", "this.user", `merge(this, {"w": this.n * ${env:FACTOR}})`)), 200, ""},
		{"env field in an aggregate key", withMap(spec("j3", "this.${env:KEY_FIELD}", "this")), 200, ""},
		{"secret in an aggregate key", withMap(spec("j4", `this.user + "${secret:SALT}"`, "this")), 200, ""},
		{"invalid whatever the value", withMap(spec("j5", "this.user", "this.n * * ${env:FACTOR}")), 422, "spec.operators[2].config.expression"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := th.do(t, "POST", APIPrefix+"/jobs/validate", `{"spec": `+tc.spec+`, "node_ids": ["n1"]}`, "Authorization", "Bearer "+testToken)
			if r.status != http.StatusOK {
				t.Fatalf("validate: %d %s", r.status, r.body)
			}
			v := decode[wire.JobValidateResponse](t, r)
			if tc.status == 200 {
				if len(v.Problems) > 0 || len(v.Plan) == 0 || len(v.SecretReferences) == 0 {
					t.Errorf("validate: %s", r.body)
				}
				// The plan shows keys as written, not the Hub's stand-ins.
				if strings.Contains(tc.spec, "KEY_FIELD") && !strings.Contains(string(v.Plan), `"key":"this.${env:KEY_FIELD}"`) {
					t.Errorf("plan %s", v.Plan)
				}
			} else if len(v.Problems) != 1 || v.Problems[0].Path != tc.path || v.Valid {
				t.Errorf("validate: problems %+v, want one at %s", v.Problems, tc.path)
			}
			r = th.do(t, "POST", APIPrefix+"/jobs", `{"spec": `+tc.spec+`, "desired_state": "stopped"}`, "Authorization", "Bearer "+testToken, "Content-Type", "application/json")
			want := tc.status
			if want == 200 {
				want = http.StatusAccepted
			}
			if r.status != want {
				t.Fatalf("POST /jobs: %d, want %d: %s", r.status, want, r.body)
			}
			if want == 422 && !strings.Contains(string(r.body), tc.path) {
				t.Errorf("the 422 does not name %s: %s", tc.path, r.body)
			}
		})
	}
}
