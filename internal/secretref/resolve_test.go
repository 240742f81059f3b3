package secretref_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/secretref"
)

// Distinctive values that no error text may ever contain.
const (
	tokenValue  = "tok-VALUE-91x7"
	emptyValue  = ""
	secretValue = "pw-SECRET-55q2"
	fileValue   = "file-CONTENT-3k8"
	otherRef    = "${env:TOKEN}"
)

var leaks = []string{tokenValue, secretValue, fileValue}

type fixture struct {
	res   secretref.Resolver
	files map[string]string // name -> absolute path
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{}
	for name, content := range map[string]string{
		"plain":  fileValue,
		"nl":     fileValue + "\n",
		"nlnl":   fileValue + "\n\n",
		"crlf":   fileValue + "\r\n",
		"mixed":  fileValue + "\n\r\n\n",
		"cr":     fileValue + "\r",
		"inner":  "a\nb\n",
		"empty":  "",
		"refs":   "${env:TOKEN}\n",
		"lead":   "\n" + fileValue,
		"spaces": fileValue + " \n",
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		files[name] = p
	}
	files["missing"] = filepath.Join(dir, "missing")
	files["dir"] = dir
	unreadable := filepath.Join(dir, "unreadable")
	if err := os.WriteFile(unreadable, []byte(fileValue), 0o000); err != nil {
		t.Fatal(err)
	}
	files["unreadable"] = unreadable
	env := map[string]string{
		"TOKEN":              tokenValue,
		"EMPTY":              emptyValue,
		"NESTED":             otherRef,
		"lower_1":            "lower",
		"SVC_SECRET_DB":      secretValue,
		"SVC_SECRET_BLANK":   "",
		"SVC_SECRET_NESTED":  "${secret:DB}",
		"ESCAPED":            "$${env:TOKEN}",
		"DOLLAR":             "$",
		"SVC_SECRET_db_pass": secretValue,
	}
	res := secretref.Resolver{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	return fixture{res: res, files: files}
}

// wantErr is one expected *Error: path, reference, a sentinel and a fragment
// of the reason.
type wantErr struct {
	path, ref string
	is        error
	reason    string
}

func TestString(t *testing.T) {
	fx := newFixture(t)
	f := fx.files
	tests := []struct {
		name string
		in   string
		want string
		errs []wantErr
	}{
		{name: "no reference", in: "plain text", want: "plain text"},
		{name: "empty string", in: "", want: ""},
		{name: "lone dollars", in: "$ $$ a$b {x} $", want: "$ $$ a$b {x} $"},
		{name: "env", in: "${env:TOKEN}", want: tokenValue},
		{name: "env inside text", in: "Bearer ${env:TOKEN}!", want: "Bearer " + tokenValue + "!"},
		{name: "several per string", in: "${env:TOKEN}:${secret:DB}@${env:lower_1}", want: tokenValue + ":" + secretValue + "@lower"},
		{name: "adjacent", in: "${env:TOKEN}${env:TOKEN}", want: tokenValue + tokenValue},
		{name: "env set but empty", in: "[${env:EMPTY}]", want: "[]"},
		{name: "default when unset", in: "${env:NOPE:-fallback}", want: "fallback"},
		{name: "default when empty", in: "${env:EMPTY:-fallback}", want: "fallback"},
		{name: "default ignored when set", in: "${env:TOKEN:-fallback}", want: tokenValue},
		{name: "explicit empty default", in: "[${env:NOPE:-}]", want: "[]"},
		{name: "default with colons and dashes", in: "${env:NOPE:-http://x:-1/$y}", want: "http://x:-1/$y"},
		{name: "default with escape text is literal", in: "${env:NOPE:-$$}", want: "$$"},
		{name: "secret", in: "${secret:DB}", want: secretValue},
		{name: "secret lowercase name", in: "${secret:db_pass}", want: secretValue},
		{name: "secret default when unset", in: "${secret:NOPE:-dev}", want: "dev"},
		{name: "secret default when empty", in: "${secret:BLANK:-dev}", want: "dev"},
		{name: "secret set but empty", in: "[${secret:BLANK}]", want: "[]"},
		{name: "file", in: "${file:" + f["plain"] + "}", want: fileValue},
		{name: "file trailing newline", in: "${file:" + f["nl"] + "}", want: fileValue},
		{name: "file trailing newlines", in: "${file:" + f["nlnl"] + "}", want: fileValue},
		{name: "file trailing crlf", in: "${file:" + f["crlf"] + "}", want: fileValue},
		{name: "file mixed trailing newlines", in: "${file:" + f["mixed"] + "}", want: fileValue},
		{name: "file lone cr kept", in: "${file:" + f["cr"] + "}", want: fileValue + "\r"},
		{name: "file inner newlines kept", in: "${file:" + f["inner"] + "}", want: "a\nb"},
		{name: "file leading newline kept", in: "${file:" + f["lead"] + "}", want: "\n" + fileValue},
		{name: "file trailing space kept", in: "${file:" + f["spaces"] + "}", want: fileValue + " "},
		{name: "file empty", in: "<${file:" + f["empty"] + "}>", want: "<>"},
		{name: "file path takes no default", in: "${file:" + f["missing"] + ":-x}", errs: []wantErr{
			{"p", "${file:" + f["missing"] + ":-x}", fs.ErrNotExist, "cannot read file: no such file or directory"},
		}},
		{name: "escape", in: "$${env:TOKEN}", want: "${env:TOKEN}"},
		{name: "escape of unknown scheme", in: "$${vault:x}", want: "${vault:x}"},
		{name: "escape of bare", in: "a$${b", want: "a${b"},
		{name: "escape then reference", in: "$${env:X} ${env:TOKEN}", want: "${env:X} " + tokenValue},
		{name: "three dollars", in: "$$${env:TOKEN}", want: "$${env:TOKEN}"},
		{name: "four dollars", in: "$$$${x", want: "$$${x"},
		{name: "dollar before reference", in: "$ ${env:TOKEN}", want: "$ " + tokenValue},
		{name: "escape twice", in: "$${$${", want: "${${"},
		{name: "unknown scheme verbatim", in: "${vault:secret/x#k}", want: "${vault:secret/x#k}"},
		{name: "uppercase scheme verbatim", in: "${ENV:TOKEN}", want: "${ENV:TOKEN}"},
		{name: "space before scheme verbatim", in: "${ env:TOKEN}", want: "${ env:TOKEN}"},
		{name: "scheme without colon verbatim", in: "${env}", want: "${env}"},
		{name: "scheme prefix only verbatim", in: "${environment:X}", want: "${environment:X}"},
		{name: "bare verbatim", in: "${", want: "${"},
		{name: "empty braces verbatim", in: "${}", want: "${}"},
		{name: "shell style verbatim", in: "${HOME}/x", want: "${HOME}/x"},
		{name: "unterminated verbatim", in: "x ${env:TOKEN", want: "x ${env:TOKEN"},
		{name: "unterminated then escape", in: "${env:A $${", want: "${env:A ${"},
		{name: "reference inside unknown scheme", in: "${vault:${env:TOKEN}}", want: "${vault:" + tokenValue + "}"},
		{name: "no rescan of env value", in: "${env:NESTED}", want: otherRef},
		{name: "no rescan of secret value", in: "${secret:NESTED}", want: "${secret:DB}"},
		{name: "no unescape of value", in: "${env:ESCAPED}", want: "$${env:TOKEN}"},
		{name: "value dollar does not join an escape", in: "${env:DOLLAR}${env:TOKEN}", want: "$" + tokenValue},
		{name: "no rescan of default", in: "${env:NOPE:-$}{env:TOKEN}", want: "${env:TOKEN}"},
		{name: "escape inside default is nesting", in: "${env:NOPE:-$${x}", errs: []wantErr{{"p", "${env:NOPE:-$${x}", secretref.ErrNested, "do not nest"}}},
		{name: "no rescan of file", in: "${file:" + f["refs"] + "}", want: "${env:TOKEN}"},
		{name: "unset", in: "a ${env:NOPE} b", errs: []wantErr{
			{"p", "${env:NOPE}", secretref.ErrUnset, "environment variable NOPE is not set"},
		}},
		{name: "secret unset", in: "${secret:NOPE}", errs: []wantErr{
			{"p", "${secret:NOPE}", secretref.ErrUnset, "secret NOPE is not set (environment variable SVC_SECRET_NOPE)"},
		}},
		{name: "every failure reported", in: "${env:A}${env:TOKEN}${secret:B}${env:}", want: "${env:A}" + tokenValue + "${secret:B}${env:}", errs: []wantErr{
			{"p", "${env:A}", secretref.ErrUnset, "A is not set"},
			{"p", "${secret:B}", secretref.ErrUnset, "B is not set"},
			{"p", "${env:}", secretref.ErrEmptyName, "empty variable name"},
		}},
		{name: "empty env name", in: "${env:}", errs: []wantErr{{"p", "${env:}", secretref.ErrEmptyName, "empty variable name"}}},
		{name: "empty name with default", in: "${env::-x}", errs: []wantErr{{"p", "${env::-x}", secretref.ErrEmptyName, "empty"}}},
		{name: "empty secret name", in: "${secret:}", errs: []wantErr{{"p", "${secret:}", secretref.ErrEmptyName, "empty"}}},
		{name: "empty file path", in: "${file:}", errs: []wantErr{{"p", "${file:}", secretref.ErrEmptyName, "empty file path"}}},
		{name: "bad name", in: "${env:A B}", errs: []wantErr{{"p", "${env:A B}", secretref.ErrBadName, `invalid variable name "A B"`}}},
		{name: "name starting with digit", in: "${env:1A}", errs: []wantErr{{"p", "${env:1A}", secretref.ErrBadName, "invalid"}}},
		{name: "single colon is part of the name", in: "${env:A:b}", errs: []wantErr{{"p", "${env:A:b}", secretref.ErrBadName, "invalid"}}},
		{name: "nested in name", in: "${env:${env:TOKEN}}", errs: []wantErr{{"p", "${env:${env:TOKEN}", secretref.ErrNested, "do not nest"}}},
		{name: "nested in default", in: "${env:TOKEN:-${env:B}}", errs: []wantErr{{"p", "${env:TOKEN:-${env:B}", secretref.ErrNested, "do not nest"}}},
		{name: "nested in file path", in: "${file:/x/${env:TOKEN}}", errs: []wantErr{{"p", "${file:/x/${env:TOKEN}", secretref.ErrNested, "do not nest"}}},
		{name: "missing file", in: "${file:" + f["missing"] + "}", errs: []wantErr{
			{"p", "${file:" + f["missing"] + "}", secretref.ErrFile, "cannot read file: no such file or directory"},
		}},
		{name: "directory", in: "${file:" + f["dir"] + "}", errs: []wantErr{
			{"p", "${file:" + f["dir"] + "}", secretref.ErrFile, "cannot read file: is a directory"},
		}},
	}
	if os.Geteuid() != 0 { // root reads anything
		tests = append(tests, struct {
			name string
			in   string
			want string
			errs []wantErr
		}{name: "unreadable file", in: "${file:" + f["unreadable"] + "}", errs: []wantErr{
			{"p", "${file:" + f["unreadable"] + "}", fs.ErrPermission, "cannot read file: permission denied"},
		}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fx.res.String("p", tt.in)
			checkErrs(t, err, tt.errs)
			if tt.errs != nil && tt.want == "" {
				if got != tt.in {
					t.Errorf("on error got %q, want the input kept", got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// checkErrs asserts that err joins exactly the wanted *Error values, in
// order, and that no error text holds a secret value.
func checkErrs(t *testing.T, err error, want []wantErr) {
	t.Helper()
	if err != nil {
		for _, v := range leaks {
			if strings.Contains(err.Error(), v) {
				t.Errorf("error leaks value %q: %v", v, err)
			}
		}
	}
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want %d", len(want))
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %T is not joined", err)
	}
	errs := joined.Unwrap()
	if len(errs) != len(want) {
		t.Fatalf("%d errors, want %d: %v", len(errs), len(want), err)
	}
	for i, w := range want {
		var e *secretref.Error
		if !errors.As(errs[i], &e) {
			t.Fatalf("error %d is %T, want *secretref.Error", i, errs[i])
		}
		if e.Path != w.path || e.Ref != w.ref {
			t.Errorf("error %d: path %q ref %q, want %q %q", i, e.Path, e.Ref, w.path, w.ref)
		}
		if !errors.Is(e, w.is) {
			t.Errorf("error %d: %v is not %v", i, e, w.is)
		}
		prefix := w.ref + ": "
		if w.path != "" {
			prefix = w.path + ": " + prefix
		}
		if msg := e.Error(); !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, w.reason) {
			t.Errorf("error %d = %q, want prefix %q and reason containing %q", i, msg, prefix, w.reason)
		}
	}
}

// TestResolveTainted: every string holding a resolved value is reported
// with its path and the references that resolved there; strings holding
// only defaults, failures or no reference are not.
func TestResolveTainted(t *testing.T) {
	r := secretref.Resolver{LookupEnv: func(k string) (string, bool) {
		return map[string]string{"A": "a-value", "SVC_SECRET_B": "b-value"}[k], k == "A" || k == "SVC_SECRET_B"
	}}
	tree := map[string]any{
		"plain":   "no reference",
		"default": "${env:UNSET:-d}",
		"failing": "${env:UNSET}",
		"list":    []any{"x", "pre ${env:A} mid ${secret:B} ${env:UNSET:-d}"},
		"nested":  map[string]any{"k": "${secret:B}"},
		"headers": map[string]string{"X": "${env:A}"},
	}
	_, res, err := r.ResolveTainted(tree)
	if err == nil {
		t.Fatal("the failing reference did not fail")
	}
	want := []secretref.Tainted{
		{Path: "headers.X", Refs: []string{"${env:A}"}},
		{Path: "list[1]", Refs: []string{"${env:A}", "${secret:B}"}},
		{Path: "nested.k", Refs: []string{"${secret:B}"}},
	}
	if diff := cmp.Diff(want, res.Tainted); diff != "" {
		t.Errorf("tainted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a-value", "a-value", "b-value", "b-value"}, res.Values); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
}
