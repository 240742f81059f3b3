package config_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/secretref"
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
		{name: "number: re-encoded", format: config.JSON,
			in:   `{"streams": [], "health_check": {"api_token": 12345678}}`,
			want: "{\n  \"health_check\": {\n    \"api_token\": \"<masked>\"\n  },\n  \"streams\": []\n}\n"},
		{name: "an object under a credential key", format: config.YAML,
			in:   "streams: []\njobs: []\nx_credentials: {}\ncredentials: {user: LITERAL-u, key: LITERAL-k}\n",
			want: "streams: []\njobs: []\nx_credentials: {}\ncredentials: {user: <masked>, key: <masked>}\n"},
		{name: "unparsable toml: dotted keys", format: config.TOML,
			in:   "auth.token = \"LITERAL-t\"\nauth.password = \"${env:P}\"\n[[[\n",
			want: "auth.token = <masked>\nauth.password = \"${env:P}\"\n[[[\n"},
		{name: "unparsable json: one line", format: config.JSON,
			in:   `{"api_token": "${env:A}", "node_token": "LITERAL-n", `,
			want: `{"api_token": "${env:A}", "node_token": <masked>`},
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

// FuzzMaskCredentials: whatever a draft holds, a parsable one is served
// parsable, with every credential masked or a reference kept as written.
func FuzzMaskCredentials(f *testing.F) {
	f.Add([]byte("health_check: {node_token: abc, api_token: \"${env:X}\"}\nstreams: []\n# abc\n"), uint8(0))
	f.Add([]byte(`{"password": "a\"b", "headers": {"Authorization": "Bearer x"}}`), uint8(1))
	f.Add([]byte("token = 'it''s'\n[auth]\npassword = \"p\\u0041\"\n"), uint8(2))
	f.Add([]byte("token: |\n  line one\n  line two\ncredentials: {a: [1, x]}\n"), uint8(0))
	formats := []config.Format{config.YAML, config.JSON, config.TOML}
	f.Fuzz(func(t *testing.T, in []byte, fi uint8) {
		format := formats[int(fi)%len(formats)]
		tree, err := config.Tree(in, format)
		if err != nil {
			return
		}
		out := config.MaskCredentials(in, format)
		got, err := config.Tree(out, format)
		if err != nil {
			t.Fatalf("masked text does not parse: %v\n%s", err, out)
		}
		want := maskTree(tree, false)
		if !equalJSON(got, want) {
			t.Fatalf("masked text reads\n%v\nwant\n%v\nfrom\n%s", got, want, out)
		}
	})
}

// maskTree is the document as it must be served: every string or number
// under a credential key masked, unless it is empty or holds a reference.
func maskTree(v any, cred bool) any {
	switch t := v.(type) {
	case string:
		if cred && t != "" && !secretref.Contains(t) {
			return config.Mask
		}
	case float64:
		if cred {
			return config.Mask
		}
	case map[string]any:
		out := map[string]any{}
		for k, e := range t {
			out[k] = maskTree(e, cred || config.IsCredentialKey(k))
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = maskTree(e, cred)
		}
		return out
	}
	return v
}

func equalJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
