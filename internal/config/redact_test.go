package config_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/secretref"
)

// TestRedactorForms: a value is scrubbed raw and in each escaped form a
// message may quote it in, also inside a longer quoted string.
func TestRedactorForms(t *testing.T) {
	// Each secret holds "K3y", which no escaping changes: finding it means a
	// form escaped redaction.
	for _, secret := range []string{"plain-K3y", `quo"te'd-K3y`, "new\nK3y", "tab\tK3y\\slash", "ünï-€-😀K3y", "a b&c=d/e?K3y", "<tag>K3y&amp;", "K3y\x7f\\"} {
		r := config.NewRedactor(secret)
		long := "/data/" + secret + "/out"
		jl, _ := json.Marshal(long)
		for _, msg := range []string{
			"open " + long + ": denied",
			fmt.Sprintf("got %q", long),
			fmt.Sprintf("got %+q", long),
			"json " + string(jl),
			"query ?p=" + url.QueryEscape(long),
			"path /" + url.PathEscape(long),
		} {
			if got := r.String(msg); strings.Contains(got, "K3y") {
				t.Errorf("%q: %q still holds it", secret, got)
			}
			got := r.String(msg)
			if !strings.Contains(got, config.Redacted) {
				t.Errorf("%q: nothing redacted in %q", secret, got)
			}
		}
	}
}

// TestRedactorRules: short values are left alone, the longest value wins
// where values overlap, values only accumulate.
func TestRedactorRules(t *testing.T) {
	r := config.NewRedactor("abc", "", "abcd")
	if got := r.String("abc abcd abcde"); got != "abc [redacted] [redacted]e" {
		t.Errorf("short values: %q", got)
	}
	r.Add("abcdef")
	if got := r.String("abcdef"); got != config.Redacted {
		t.Errorf("longest first: %q", got)
	}
	o := config.NewRedactor("other-value")
	r.Merge(o)
	if got := r.String("x other-value abcd"); got != "x [redacted] [redacted]" || r.Len() != 3 {
		t.Errorf("merged: %q (%d values)", got, r.Len())
	}
	var nilR *config.Redactor
	if nilR.String("abcd") != "abcd" || nilR.Len() != 0 {
		t.Errorf("a nil redactor redacts")
	}
	nilR.Add("x") // no panic
}

// TestProblemsRedactEmbeddedAndEscaped: a secret embedded in a longer value
// and one holding a quote and a newline (from a file) never appear in
// problems, though the schema check quotes the values it rejects: each
// problem at a string holding a reference names the path and the
// reference instead.
func TestProblemsRedactEmbeddedAndEscaped(t *testing.T) {
	const fileSecret = "multi\"line\nsecret"
	const envSecret = "emb3dded-S3CRET"
	const backslash = "tab\tends-in-backslash\\" // the schema's quote eats the escaping backslash
	files := map[string]string{"/s": fileSecret + "\n", "/b": backslash}
	res := secretref.Resolver{
		LookupEnv: func(k string) (string, bool) { return envSecret, k == "SVC_SECRET_PART" },
		ReadFile:  func(p string) ([]byte, error) { return []byte(files[p]), nil },
	}
	doc := []byte(`
logging: {level: "${file:/s}"}
streams:
  - id: "bad id ${secret:PART} here"
    input: {type: generate, context: "{}", interval: "x-${secret:PART}"}
    pipeline: {processors: []}
    output: {type: drop}
  - id: "id-${file:/b}"
    input: {type: generate, context: "{}"}
    pipeline: {processors: []}
    output: {type: drop}
`)
	_, err := config.Materialize(doc, config.YAML, component.Default, res)
	ps := config.Problems(err)
	if len(ps) < 2 {
		t.Fatalf("problems: %v", ps)
	}
	all := fmt.Sprint(ps)
	// Each secret has a core of letters that any escaping leaves as is:
	// finding it means some form of the secret escaped redaction.
	for _, core := range []string{"multi", "S3CRET", "ends-in-backslash"} {
		if strings.Contains(all, core) {
			t.Errorf("problems hold %q: %s", core, all)
		}
	}
	want := []config.Problem{
		{Path: "logging.level", Message: "value of ${file:/s} is not valid"},
		{Path: "streams[0].id", Message: "value of ${secret:PART} is not valid"},
		{Path: "streams[0].input.interval", Message: "value of ${secret:PART} is not valid"},
		{Path: "streams[1].id", Message: "value of ${file:/b} is not valid"},
	}
	if len(ps) != len(want) {
		t.Fatalf("problems: %v", ps)
	}
	for i, w := range want {
		if ps[i].Path != w.Path || !strings.HasPrefix(ps[i].Message, w.Message) {
			t.Errorf("problem %d = %v, want %v...", i, ps[i], w)
		}
	}
}

// TestLiteralCredentialsRedacted: a literal credential is as secret as a
// reference's value: a problem quoting it shows it redacted.
func TestLiteralCredentialsRedacted(t *testing.T) {
	const token = "literal-node-token-123"
	doc := []byte(`
health_check: {node_token: "` + token + `", hub_urls: ["` + token + `"]}
streams: []
`)
	_, err := config.Materialize(doc, config.YAML, component.Default, secretref.Resolver{})
	ps := config.Problems(err)
	if len(ps) == 0 || strings.Contains(fmt.Sprint(ps), token) {
		t.Errorf("problems: %v", ps)
	}
}
