package access_test

import (
	"bytes"
	"crypto/sha256"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/access"
)

func TestParseTokens(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	good := "# comment\n\nname=ci role=operator scopes=job:etl-*,node:edge-1 sha256=" + sum + " expires=2027-01-02T03:04:05Z\n" +
		"name=dash role=viewer sha256=" + strings.Repeat("cd", 32) + "\n"
	toks, err := access.ParseTokens([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 2 || toks[0].Name != "ci" || toks[0].Role != access.Operator || len(toks[0].Scopes) != 2 ||
		toks[0].Expires != time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC) || toks[1].Role != access.Viewer {
		t.Fatalf("parsed %+v", toks)
	}
	if line := toks[0].Line(); line != strings.SplitN(good, "\n", 4)[2] {
		t.Errorf("Line() = %q does not round-trip", line)
	}
	bad := []struct{ line, want string }{
		{"name=ci role=root sha256=" + sum, "unknown role"},
		{"name=ci role=admin", "sha256 is missing"},
		{"role=admin sha256=" + sum, "name is missing"},
		{"name=ci role=admin sha256=abcd", "64 hex digits"},
		{"name=operator role=admin sha256=" + sum, "reserved"},
		{"name=a/b role=admin sha256=" + sum, "letters, digits"},
		{"name=ci role=admin sha256=" + sum + " scopes=pod:x", "unknown type"},
		{"name=ci role=admin sha256=" + sum + " expires=tomorrow", "RFC 3339"},
		{"name=ci role=admin sha256=" + sum + " color=red", "unknown field"},
		{"name=ci role=admin name=cd sha256=" + sum, "twice"},
		{"name=ci role=admin sha256=" + sum + "\nname=ci role=viewer sha256=" + sum, "line 2: name \"ci\" is used twice"},
	}
	for _, b := range bad {
		_, err := access.ParseTokens([]byte(b.line))
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%q: err = %v, want %q", b.line, err, b.want)
		}
		if err != nil && strings.Contains(err.Error(), sum) {
			t.Errorf("%q: the error shows the digest", b.line)
		}
	}
}

func TestLookup(t *testing.T) {
	tok, sum, err := access.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != 2*access.TokenBytes {
		t.Fatalf("token of %d characters", len(tok))
	}
	toks := []access.NamedToken{{Name: "other", Role: access.Admin, SHA256: sha256.Sum256([]byte("x"))}, {Name: "ci", Role: access.Operator, SHA256: sum}}
	p, ok := access.Lookup(toks, sha256.Sum256([]byte(tok)))
	if !ok || p.ID != "ci" || p.Kind != access.KindToken || p.Roles[0] != access.Operator {
		t.Fatalf("Lookup = %+v, %v", p, ok)
	}
	if _, ok := access.Lookup(toks, sha256.Sum256([]byte(tok+"x"))); ok {
		t.Fatal("a wrong token was found")
	}
}

// TestTokenFileReload changes the file under a TokenFile: a good change is
// taken, a bad one keeps the last good tokens and logs the path.
func TestTokenFileReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	line := func(name string) string {
		return "name=" + name + " role=viewer sha256=" + strings.Repeat("ab", 32) + "\n"
	}
	write := func(s string, mod time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Now().Add(-time.Hour)
	write(line("first"), base)
	var logs bytes.Buffer
	f, err := access.LoadTokenFile(path, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	names := func() string {
		var ns []string
		for _, tk := range f.Tokens() {
			ns = append(ns, tk.Name)
		}
		return strings.Join(ns, ",")
	}
	if names() != "first" {
		t.Fatalf("tokens %q", names())
	}
	write(line("first")+line("second"), base.Add(time.Second))
	if err := access.ReloadForTest(f); err != nil || names() != "first,second" {
		t.Fatalf("after a good change: %q, %v", names(), err)
	}
	write("name=broken", base.Add(2*time.Second))
	err = access.ReloadForTest(f)
	if err == nil || !strings.Contains(err.Error(), path) || names() != "first,second" {
		t.Fatalf("after a bad change: %q, %v", names(), err)
	}
	if _, err := access.LoadTokenFile(path, slog.New(slog.NewTextHandler(&logs, nil))); err == nil {
		t.Fatal("a bad file loaded at start-up")
	}
	if strings.Contains(logs.String(), strings.Repeat("ab", 32)) {
		t.Fatal("a digest reached the log")
	}
}
