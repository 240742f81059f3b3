package main

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/access"
)

// TestHubTokenCreate: the printed line reads back as the Hub reads it and
// holds the printed token's digest, never the token.
func TestHubTokenCreate(t *testing.T) {
	code, out, errOut := runCLI(t, "hub", "token", "create", "--name", "ci", "--role", "operator", "--scope", "job:etl-*", "--scope", "node:edge-1", "--expires", "24h")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	tok, ok := strings.CutPrefix(lines[0], "token: ")
	if !ok || len(tok) < 2*32 {
		t.Fatalf("no token of 32 bytes: %q", out)
	}
	last := lines[len(lines)-1]
	if strings.Contains(last, tok) {
		t.Fatal("the line holds the token")
	}
	toks, err := access.ParseTokens([]byte(last))
	if err != nil || len(toks) != 1 {
		t.Fatalf("line %q: %v", last, err)
	}
	p, found := access.Lookup(toks, sha256.Sum256([]byte(tok)))
	if !found || p.ID != "ci" || p.Roles[0] != access.Operator || len(p.Scopes) != 2 || p.Expires.IsZero() {
		t.Fatalf("principal %+v, found %v", p, found)
	}
	for _, bad := range [][]string{
		{"hub", "token", "create", "--name", "ci", "--role", "boss"},
		{"hub", "token", "create", "--name", "operator", "--role", "admin"},
		{"hub", "token", "create", "--name", "ci", "--role", "admin", "--scope", "pod:x"},
		{"hub", "token", "delete"},
	} {
		if code, _, _ := runCLI(t, bad...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", bad, code, exitUsage)
		}
	}
}
