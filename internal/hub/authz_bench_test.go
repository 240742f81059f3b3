package hub

import (
	"crypto/sha256"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/access"
	"github.com/flowplane/flowplane/internal/idp"
	"github.com/flowplane/flowplane/internal/idp/testop"
)

// BenchmarkOperatorAccess is what identity adds to an operator request:
// resolving the bearer token to its principal and the route's access
// decision, for the bootstrap token, a named token among 100, and an OIDC
// JWT already verified once (from the verifier's cache).
func BenchmarkOperatorAccess(b *testing.B) {
	tokens := make([]access.NamedToken, 100)
	for i := range tokens {
		_, sum, err := access.NewToken()
		if err != nil {
			b.Fatal(err)
		}
		tokens[i] = access.NamedToken{Name: "t", Role: access.Operator, SHA256: sum}
	}
	named, sum, _ := access.NewToken()
	tokens[50] = access.NamedToken{Name: "ci", Role: access.Operator, Scopes: []access.Scope{{Type: "node", Node: "edge-*"}}, SHA256: sum}
	op, err := testop.Start(testop.Options{Audience: testAudience, Principals: []testop.Principal{{Name: "ada", Secret: "s", Roles: []string{"operator"}}}})
	if err != nil {
		b.Fatal(err)
	}
	defer op.Close()
	v, err := idp.New(b.Context(), idp.Config{Issuer: op.Issuer, Audience: testAudience}, nil)
	if err != nil {
		b.Fatal(err)
	}
	jwt, err := op.Token(b.Context(), "ada")
	if err != nil {
		b.Fatal(err)
	}
	a := &operatorAuth{bootstrap: sha256.Sum256([]byte(testToken)), hasBootstrap: true, tokens: staticTokens(tokens), oidc: v, now: time.Now}
	h := &Hub{prefix: APIPrefix}
	res := h.resourceFunc("PUT", APIPrefix+"/nodes/{node_id}/streams/{id}/desired-state")
	for _, bc := range []struct{ name, token string }{{"bootstrap", testToken}, {"named", named}, {"oidc-cached", jwt}} {
		b.Run(bc.name, func(b *testing.B) {
			r := httptest.NewRequest("PUT", APIPrefix+"/nodes/edge-1/streams/orders/desired-state", nil)
			r.Header.Set("Authorization", "Bearer "+bc.token)
			r.SetPathValue("node_id", "edge-1")
			r.SetPathValue("id", "orders")
			for b.Loop() {
				p, err := a.authenticate(r)
				if err != nil {
					b.Fatal(err)
				}
				if ok, _ := access.Allow(p, access.StreamOperate, res(r)); !ok {
					b.Fatal("refused")
				}
			}
		})
	}
}

type staticTokens []access.NamedToken

func (s staticTokens) Tokens() []access.NamedToken { return s }
