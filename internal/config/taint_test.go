package config_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/secretref"
)

// secretRunes make the secrets of the properties below: what escapes
// differently in Go and JSON, line breaks, non-ASCII. None is in filler or
// in config.Redacted, so a piece of a secret found in a result is a leak.
var secretRunes = []rune("Zq70159 \"'`\\\n\t\r<>&%+=?:;,{}$@#*|~éß€😀\u2028中")

// filler is the text around the pieces of secrets in a message.
var filler = rapid.StringOf(rapid.RuneFrom([]rune("XYW- ")))

func multiLineSecret() *rapid.Generator[string] {
	line := rapid.StringOfN(rapid.RuneFrom(secretRunes), 1, 24, -1)
	return rapid.Custom(func(t *rapid.T) string {
		return strings.Join(rapid.SliceOfN(line, 1, 4).Draw(t, "lines"), "\n")
	}).Filter(func(s string) bool { return utf8.RuneCountInString(s) >= config.MinSecretLen })
}

// pieces returns what must not show of s: every line of at least
// MinSecretLen characters and every MinFragmentLen-byte window (any longer
// substring holds one), raw, Go-quoted and JSON-escaped.
func pieces(s string) []string {
	var out []string
	forms := func(v string) []string {
		q := strconv.Quote(v)
		j, _ := json.Marshal(v)
		return []string{v, q[1 : len(q)-1], string(j[1 : len(j)-1])}
	}
	for _, line := range strings.FieldsFunc(s, func(c rune) bool { return c == '\n' || c == '\r' }) {
		if utf8.RuneCountInString(line) >= config.MinSecretLen {
			out = append(out, forms(line)...)
		}
	}
	for _, f := range forms(s) {
		for i := 0; i+config.MinFragmentLen <= len(f); i++ {
			out = append(out, f[i:i+config.MinFragmentLen])
		}
	}
	return out
}

// substring draws a part of s cut at rune boundaries.
func substring(t *rapid.T, s string, label string) string {
	rs := []rune(s)
	i := rapid.IntRange(0, len(rs)-1).Draw(t, label+" from")
	j := rapid.IntRange(i+1, len(rs)).Draw(t, label+" to")
	return string(rs[i:j])
}

// TestRedactorScrubsPiecesProperty: a message quoting any part of a
// multi-line secret (a line, a prefix, a middle part), raw, Go-quoted or
// JSON-escaped, between other text, keeps no line of it and no piece of
// MinFragmentLen bytes or more.
func TestRedactorScrubsPiecesProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		secret := multiLineSecret().Draw(t, "secret")
		red := config.NewRedactor(secret)
		var b strings.Builder
		for k := range rapid.IntRange(1, 4).Draw(t, "parts") {
			b.WriteString(filler.Draw(t, "filler"))
			part := substring(t, secret, "part "+strconv.Itoa(k))
			switch rapid.IntRange(0, 2).Draw(t, "form") {
			case 1:
				part = strconv.Quote(part)
			case 2:
				j, _ := json.Marshal(part)
				part = string(j)
			}
			b.WriteString(part)
		}
		b.WriteString(filler.Draw(t, "filler"))
		got := red.String(b.String())
		for _, p := range pieces(secret) {
			if strings.Contains(got, p) {
				t.Fatalf("%q holds %q of secret %q (message %q)", got, p, secret, b.String())
			}
		}
		if !utf8.ValidString(got) && utf8.ValidString(b.String()) {
			t.Fatalf("%q is not UTF-8", got)
		}
	})
}

// TestTaintedProblemsProperty: a multi-line secret from a file and one
// from the environment, landing in a number field, an expression and a
// duration, give problems naming the path and the reference, and no
// problem holds a line or a piece of either.
func TestTaintedProblemsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		fileSecret := multiLineSecret().Draw(t, "file secret")
		envSecret := multiLineSecret().Draw(t, "env secret")
		res := secretref.Resolver{
			LookupEnv: func(k string) (string, bool) { return envSecret, k == "COUNT" },
			ReadFile:  func(string) ([]byte, error) { return []byte(fileSecret), nil },
		}
		doc := []byte(`
streams:
  - input: {type: generate, context: "{}", interval: "${env:COUNT}", batch_size: "${file:/s}"}
    pipeline: {processors: [{type: filter, condition: "this.x > ${file:/s}"}, {type: mapping, expression: "this.x + ${env:COUNT}"}]}
    output: {type: drop}
`)
		cfg, err := config.Materialize(doc, config.YAML, component.Default, res)
		ps := config.Problems(err)
		if cfg != nil && err == nil {
			t.Fatalf("valid: %v", ps)
		}
		text := fmt.Sprint(ps)
		for _, secret := range []string{fileSecret, envSecret} {
			for _, p := range pieces(secret) {
				if strings.Contains(text, p) {
					t.Fatalf("problems hold %q of %q: %s", p, secret, text)
				}
			}
		}
		want := map[string]string{
			"streams[0].input.batch_size": "value of ${file:/s} is not valid",
			"streams[0].input.interval":   "value of ${env:COUNT} is not valid",
		}
		for _, p := range ps {
			if w, ok := want[p.Path]; ok && strings.HasPrefix(p.Message, w) {
				delete(want, p.Path)
			}
		}
		if len(want) > 0 {
			t.Fatalf("missing %v in %s", want, text)
		}
	})
}

// TestTaintedBuildProblems: a component's constructor quoting an
// expression it cannot compile (expr-lang shows the source line and a
// piece of a number) is rewritten by Config.Redact to the path of the
// field and its reference.
func TestTaintedBuildProblems(t *testing.T) {
	for _, tc := range []struct{ name, expr, ref, value string }{
		{"env value in an expression", "this.x + ${env:TOKEN}", "${env:TOKEN}", "57340bfe2a9c"},
		{"multi-line file in an expression", "this.x > ${file:/s}", "${file:/s}", "line one\nline two\nline three"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := secretref.Resolver{
				LookupEnv: func(k string) (string, bool) { return tc.value, k == "TOKEN" },
				ReadFile:  func(string) ([]byte, error) { return []byte(tc.value), nil },
			}
			doc := []byte("streams:\n  - input: {type: generate, context: \"{}\"}\n" +
				"    pipeline: {processors: [{type: filter, condition: \"" + tc.expr + "\"}]}\n    output: {type: drop}\n")
			cfg, err := config.Materialize(doc, config.YAML, component.Default, res)
			if err != nil {
				t.Fatal(err)
			}
			// What a constructor says about the expression, as expr-lang
			// writes it.
			raw := []config.Problem{{
				Path:    "streams[0].pipeline.processors[0]",
				Message: "condition: bad number syntax: \"57340b\" (1:10)\n | this.x + " + tc.value + "\n | .........^",
			}}
			got := cfg.Redact(raw)
			want := "streams[0].pipeline.processors[0].condition: value of " + tc.ref + " is not valid"
			if len(got) != 1 || !strings.HasPrefix(got[0].Error(), want) {
				t.Errorf("got %v, want %s...", got, want)
			}
			for _, line := range strings.Split(tc.value, "\n") {
				if strings.Contains(got[0].Message, line) || strings.Contains(got[0].Message, tc.value[:6]) {
					t.Errorf("%q leaks %q", got[0].Message, line)
				}
			}
		})
	}
}

// TestRedactorLeavesReferences: a piece of a secret that is also part of
// a reference named in a message ("secret" of a value holding it) does not
// make the reference unreadable; the same piece elsewhere is scrubbed.
func TestRedactorLeavesReferences(t *testing.T) {
	red := config.NewRedactor("node-local-secret-7c4e")
	for in, want := range map[string]string{
		"p: ${secret:NEITHER}: not set":        "p: ${secret:NEITHER}: not set",
		"${file:/run/secrets/x} and $${env:A}": "${file:/run/secrets/x} and $${env:A}",
		"value node-local- here":               "value [redacted] here",
		"${env:bad name} secret-7c":            "${env:bad name} [redacted]",
	} {
		if got := red.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}
