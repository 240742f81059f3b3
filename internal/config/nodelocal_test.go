package config

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWithNodeLocal(t *testing.T) {
	local := []byte("health_check: {address: '127.0.0.1:9000', node_token: '${env:T}'}\nstreams: []\n")
	tests := []struct {
		name string
		doc  string
		f    Format
		want map[string]any
	}{
		{"taken from the file", "streams: [{id: a, x: '${secret:S}'}]\n", YAML,
			map[string]any{"streams": []any{map[string]any{"id": "a", "x": "${secret:S}"}}, "health_check": map[string]any{"address": "127.0.0.1:9000", "node_token": "${env:T}"}}},
		{"the document's own is replaced", `{"health_check": {"address": "0.0.0.0:1"}, "logging": {"level": "debug"}}`, JSON,
			map[string]any{"logging": map[string]any{"level": "debug"}, "health_check": map[string]any{"address": "127.0.0.1:9000", "node_token": "${env:T}"}}},
		{"empty document", "", YAML, map[string]any{"health_check": map[string]any{"address": "127.0.0.1:9000", "node_token": "${env:T}"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := WithNodeLocal([]byte(tt.doc), tt.f, local, YAML)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Fatalf("(-want +got)\n%s", d)
			}
		})
	}
	if _, err := WithNodeLocal([]byte("[1, 2]"), JSON, local, YAML); err == nil {
		t.Fatal("a list was accepted as a configuration")
	}
	b, err := WithNodeLocal([]byte("streams: []"), YAML, []byte("streams: []"), YAML)
	if err != nil || string(b) != `{"streams":[]}` {
		t.Fatalf("no local section: %s %v", b, err)
	}
}
