package config_test

import (
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/config"
)

func TestIsCredentialKey(t *testing.T) {
	for key, want := range map[string]bool{
		"node_token": true, "api_token": true, "token": true, "password": true, "Authorization": true,
		"Proxy-Authorization": true, "X-Api-Key": true, "x-auth-token": true, "client_secret": true, "Cookie": true,
		"username": false, "type": false, "address": false, "tokenizer": false, "key": false, "headers": false, "node_id": false,
	} {
		if got := config.IsCredentialKey(key); got != want {
			t.Errorf("IsCredentialKey(%q) = %v, want %v", key, got, want)
		}
	}
}

// TestMaskCredentials: literal credentials are masked where they are
// written, comments and layout kept; references are shown as written.
func TestMaskCredentials(t *testing.T) {
	tests := []struct {
		name   string
		format config.Format
		in     string
		want   string // "" means unchanged
	}{
		{name: "yaml", format: config.YAML,
			in: `# the node
health_check:
  node_token: tok-LITERAL-1   # comment stays
  api_token: "${secret:API}"
streams:
  - input: {type: http, address: "127.0.0.1:0", path: /x, auth: {type: basic, username: u, password: 'pa''ss-LITERAL'}}
    pipeline: {processors: []}
    output: {type: http, url: "http://h", headers: {Authorization: "Bearer tok-LITERAL-2", X-Trace: keep}}
`,
			want: `# the node
health_check:
  node_token: <masked>   # comment stays
  api_token: "${secret:API}"
streams:
  - input: {type: http, address: "127.0.0.1:0", path: /x, auth: {type: basic, username: u, password: '<masked>'}}
    pipeline: {processors: []}
    output: {type: http, url: "http://h", headers: {Authorization: "<masked>", X-Trace: keep}}
`},
		{name: "json escapes", format: config.JSON,
			in:   `{"health_check": {"node_token": "q\"uote-LITERAL"}, "streams": []}`,
			want: `{"health_check": {"node_token": "<masked>"}, "streams": []}`},
		{name: "toml", format: config.TOML,
			in:   "streams = []\n[health_check]\nnode_token = \"tok-LITERAL-3\"\napi_token = \"Bearer ${env:T}\"\n",
			want: "streams = []\n[health_check]\nnode_token = \"<masked>\"\napi_token = \"Bearer ${env:T}\"\n"},
		{name: "references only", format: config.YAML,
			in: "health_check: {node_token: \"${secret:NODE}\"}\nstreams: []\n"},
		{name: "no credentials", format: config.YAML,
			in: "streams: []\n"},
		{name: "escapes for plain letters: re-encoded", format: config.YAML,
			in:   "health_check:\n  node_token: \"tok-\\x4cITERAL\" # note\nstreams: []\n",
			want: "health_check:\n  node_token: <masked>\nstreams: []\n"},
		{name: "one-letter password: re-encoded", format: config.YAML,
			in:   "health_check: {api_token: a, address: \"a:1\"}\nstreams: []\n",
			want: "health_check:\n  address: a:1\n  api_token: <masked>\nstreams: []\n"},
		{name: "unparsable draft: lines masked", format: config.YAML,
			in:   "health_check:\n  node_token: tok-LITERAL-4\n  api_token: ${secret:X}\n  : [broken\n",
			want: "health_check:\n  node_token: <masked>\n  api_token: ${secret:X}\n  : [broken\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(config.MaskCredentials([]byte(tt.in), tt.format))
			want := tt.want
			if want == "" {
				want = tt.in
			}
			if got != want {
				t.Errorf("MaskCredentials =\n%s\nwant\n%s", got, want)
			}
			if strings.Contains(got, "LITERAL") {
				t.Errorf("a literal credential is served: %s", got)
			}
		})
	}
}
