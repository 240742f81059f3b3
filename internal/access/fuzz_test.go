package access_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/access"
)

// FuzzParseScope: a scope from a token's claim or the tokens file either
// parses and writes back as itself, or is refused; deciding with it never
// panics.
func FuzzParseScope(f *testing.F) {
	for _, s := range []string{"node:edge-*", "stream:n1/orders", "job:etl-[a-c]*", "rollout:*", "node:", "stream:a", "job:[", "x:y", ":"} {
		f.Add(s, "edge-1", "orders")
	}
	f.Fuzz(func(t *testing.T, s, node, id string) {
		sc, err := access.ParseScope(s)
		if err != nil {
			return
		}
		again, err := access.ParseScope(sc.String())
		if err != nil || again != sc {
			t.Fatalf("%q parsed as %+v, written %q, read back %+v (%v)", s, sc, sc.String(), again, err)
		}
		p := access.Principal{ID: "p", Roles: []access.Role{access.Admin}, Scopes: []access.Scope{sc}}
		for _, res := range []access.Resource{{Node: node}, {Node: node, Stream: id}, {Job: id}, {Rollout: id}} {
			access.Allow(p, access.Read, res)
		}
	})
}

var hex64 = regexp.MustCompile(`[0-9a-fA-F]{64}`)

// FuzzParseTokens: a tokens file never panics the parser, and an error
// never repeats a digest from the file.
func FuzzParseTokens(f *testing.F) {
	digest := strings.Repeat("ab", 32)
	for _, s := range []string{
		"name=ci role=operator sha256=" + digest,
		"name=ci role=viewer scopes=job:etl-*,node:edge-1 sha256=" + digest + " expires=2027-01-01T00:00:00Z\n# c\n\nname=ci role=admin sha256=" + digest,
		"name=x role=root sha256=" + digest,
		"sha256=" + digest + "z name=a role=admin",
		"name=operator role=admin sha256=" + digest,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		_, err := access.ParseTokens([]byte(data))
		if err == nil {
			return
		}
		for _, d := range hex64.FindAllString(data, -1) {
			if strings.Contains(err.Error(), d) {
				t.Fatalf("the error repeats a digest: %v", err)
			}
		}
	})
}
