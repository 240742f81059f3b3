package policy

import (
	"slices"
	"testing"

	"github.com/flowplane/flowplane/internal/config"
)

// TestDocument: which references Hub-delivered work may use, and that it
// may not carry a remote_policy section.
func TestDocument(t *testing.T) {
	rp := config.Default().RemotePolicy
	rp.Env, rp.Files, rp.Secrets = []string{"REGION"}, []string{"/etc/flowplane/ca.pem"}, []string{"LOCAL_OK"}
	listed := New(rp, t.TempDir())
	rp = config.Default().RemotePolicy
	rp.AllowLocalSecrets = true
	anyLocal := New(rp, t.TempDir())
	def := Default(t.TempDir())
	hub := map[string]string{"DBPASS": "v"}
	tests := []struct {
		name  string
		p     *Policy
		tree  any
		rules []string // the rules of the denials, in order
	}{
		{"hub secret", def, map[string]any{"a": "${secret:DBPASS}"}, nil},
		{"node-local secret", def, map[string]any{"a": "${secret:OTHER}"}, []string{RuleSecrets}},
		{"node-local secret listed", listed, map[string]any{"a": "${secret:LOCAL_OK}"}, nil},
		{"node-local secret, any allowed", anyLocal, map[string]any{"a": "x ${secret:ANY:-d}"}, nil},
		{"env", def, map[string]any{"a": []any{"${env:SVC_NODE_TOKEN}"}}, []string{RuleEnv}},
		{"env listed", listed, map[string]any{"a": "${env:REGION:-eu}"}, nil},
		{"env not listed", listed, map[string]any{"a": "${env:HOME}"}, []string{RuleEnv}},
		{"file", def, map[string]any{"a": "${file:/etc/passwd}"}, []string{RuleFiles}},
		{"file listed", listed, map[string]any{"a": "${file:/etc/flowplane/ca.pem}"}, nil},
		{"file listed, written differently", listed, map[string]any{"a": "${file:/etc/flowplane/../flowplane/ca.pem}"}, []string{RuleFiles}},
		{"escaped text", def, map[string]any{"a": "$${env:HOME}"}, nil},
		{"remote_policy section", def, map[string]any{"remote_policy": map[string]any{}, "streams": []any{}}, []string{RuleSection}},
		{"every one", def, map[string]any{"a": "${env:A}${file:/x}", "b": "${secret:C}"}, []string{RuleEnv, RuleFiles, RuleSecrets}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rules []string
			for _, d := range tt.p.Document(tt.tree, hub) {
				rules = append(rules, d.Rule)
				if d.Path == "" && d.Rule != RuleSection {
					t.Errorf("denial without a path: %v", d)
				}
			}
			if !slices.Equal(rules, tt.rules) {
				t.Errorf("rules = %v, want %v", rules, tt.rules)
			}
		})
	}
	ds := def.Document(map[string]any{"streams": []any{map[string]any{"input": map[string]any{"context": "${env:SVC_NODE_TOKEN}"}}}}, nil)
	if len(ds) != 1 || ds[0].Error() != "streams[0].input.context: ${env:SVC_NODE_TOKEN} reads the node's environment, which the node does not let the Hub's work read (remote_policy.env)" {
		t.Errorf("denial = %v", ds)
	}
}

// TestDefault: without a remote_policy section the state directory is the
// one file root and both kinds of command run.
func TestDefault(t *testing.T) {
	dir := t.TempDir()
	p := Default(dir)
	if !p.JobControl() || !p.ConfigControl() {
		t.Errorf("job control %v, config control %v; want both", p.JobControl(), p.ConfigControl())
	}
	if got := p.Roots(); !slices.Equal(got, []string{dir}) {
		t.Errorf("roots %v, want [%s]", got, dir)
	}
	rp := config.Default().RemotePolicy
	rp.FileRoots = []string{"/srv/a/", "/srv/b"}
	if got := New(rp, dir).Roots(); !slices.Equal(got, []string{"/srv/a", "/srv/b"}) {
		t.Errorf("roots %v, want the listed ones, cleaned", got)
	}
}
