package secretref

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSecrets(t *testing.T) {
	env := map[string]string{"SVC_SECRET_DB": "s3cr3t", "SVC_SECRET_EMPTY": "", "TOKEN": "tok"}
	r := Resolver{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	tests := []struct {
		name    string
		tree    any
		want    map[string]string
		wantErr string
	}{
		{"none", map[string]any{"a": "plain", "b": 1}, map[string]string{}, ""},
		{"embedded and repeated", map[string]any{"dsn": "pg://u:${secret:DB}@h", "x": []any{"${secret:DB}"}}, map[string]string{"DB": "s3cr3t"}, ""},
		{"env and file stay for the node", map[string]any{"a": "${env:TOKEN}", "b": "${file:/nope}", "c": "${env:UNSET}"}, map[string]string{}, ""},
		{"default when unset", map[string]any{"a": "${secret:MISSING:-dflt}"}, map[string]string{}, ""},
		{"default when empty", map[string]any{"a": "${secret:EMPTY:-dflt}"}, map[string]string{}, ""},
		{"set empty without default", map[string]any{"a": "${secret:EMPTY}"}, map[string]string{"EMPTY": ""}, ""},
		{"escape", map[string]any{"a": "$${secret:DB}"}, map[string]string{}, ""},
		{"unresolved", map[string]any{"streams": []any{map[string]any{"pw": "${secret:MISSING}"}}}, nil, "streams[0].pw: ${secret:MISSING}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.Secrets(tt.tree)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrUnset) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				if got != nil {
					t.Fatalf("map = %v on error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Fatalf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestSecretsDeferring(t *testing.T) {
	env := map[string]string{"SVC_SECRET_DB": "s3cr3t"}
	r := Resolver{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	tree := map[string]any{
		"a": "pg://${secret:DB}@h",
		"b": []any{"${secret:NODE_ONLY}"},
		"c": "${secret:MISSING:-dflt}",
	}
	got, deferred, err := r.SecretsDeferring(tree)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"DB": "s3cr3t"}, got); d != "" {
		t.Errorf("secrets (-want +got)\n%s", d)
	}
	if len(deferred) != 1 || deferred[0].Path != "b[0]" || deferred[0].Ref != "${secret:NODE_ONLY}" || !errors.Is(deferred[0], ErrUnset) {
		t.Errorf("deferred %v", deferred)
	}
	// What cannot resolve anywhere still fails, with what did resolve.
	got, _, err = r.SecretsDeferring(map[string]any{"a": "${secret:DB}", "b": "${secret:bad-name}"})
	if err == nil || !errors.Is(err, ErrBadName) || !strings.Contains(err.Error(), "b: ${secret:bad-name}") || got["DB"] != "s3cr3t" {
		t.Errorf("bad name: %v, %v", got, err)
	}
}
