package access_test

import (
	"crypto/sha256"
	"testing"

	"github.com/flowplane/flowplane/internal/access"
)

// BenchmarkAllow is the decision every operator request makes, for a
// scoped principal (the costlier case: globs are matched).
func BenchmarkAllow(b *testing.B) {
	sc, err := access.ParseScopes([]string{"job:etl-*", "node:edge-*", "stream:core-1/orders"})
	if err != nil {
		b.Fatal(err)
	}
	p := access.Principal{ID: "ci", Kind: access.KindToken, Roles: []access.Role{access.Operator}, Scopes: sc}
	res := access.Resource{Node: "core-1", Stream: "orders"}
	for b.Loop() {
		if ok, _ := access.Allow(p, access.StreamOperate, res); !ok {
			b.Fatal("refused")
		}
	}
}

// BenchmarkAuthorize is a named token's whole cost per request: hashing
// the presented token, the constant-time lookup over 100 tokens, and Allow.
func BenchmarkAuthorize(b *testing.B) {
	toks := make([]access.NamedToken, 100)
	for i := range toks {
		_, sum, err := access.NewToken()
		if err != nil {
			b.Fatal(err)
		}
		toks[i] = access.NamedToken{Name: "t", Role: access.Operator, SHA256: sum}
	}
	tok, sum, _ := access.NewToken()
	toks[99] = access.NamedToken{Name: "ci", Role: access.Operator, SHA256: sum}
	res := access.Resource{Node: "core-1", Stream: "orders"}
	for b.Loop() {
		p, ok := access.Lookup(toks, sha256.Sum256([]byte(tok)))
		if !ok {
			b.Fatal("not found")
		}
		if ok, _ := access.Allow(p, access.StreamOperate, res); !ok {
			b.Fatal("refused")
		}
	}
}
