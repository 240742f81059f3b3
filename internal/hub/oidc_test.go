package hub

import (
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/flowplane/flowplane/internal/access"
	"github.com/flowplane/flowplane/internal/idp/testop"
	"github.com/flowplane/flowplane/internal/wire"
)

const testAudience = "flowplane-hub"

// serveOIDC starts a test OpenID Provider and a Hub that trusts it.
func serveOIDC(t *testing.T) (*testHub, *testop.Provider) {
	t.Helper()
	op, err := testop.Start(testop.Options{Audience: testAudience, Principals: []testop.Principal{
		{Name: "vera", Secret: "vera-secret", Roles: []string{"viewer"}},
		{Name: "otto", Secret: "otto-secret", Roles: []string{"operator"}, Scopes: []string{"node:n1"}},
		{Name: "ada", Secret: "ada-secret", Roles: []string{"admin", "some-other-group"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { op.Close() })
	th := serveOptions(t, true, Options{
		Settings: Settings{Address: "127.0.0.1:0", Storage: dbPath(t), OperatorToken: testToken, NodeToken: nodeTokenFor(testToken),
			OIDC: OIDCSettings{Issuer: op.Issuer, Audience: testAudience}},
		Logger: slog.New(slog.DiscardHandler), Version: "test",
	})
	return th, op
}

func tokenOf(t *testing.T, op *testop.Provider, name string) string {
	t.Helper()
	tok, err := op.Token(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func withBearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

// TestOIDCPrincipals: the provider's viewer reads and changes nothing, its
// operator scoped to n1 acts on n1 only, its admin does everything; each
// is the actor of its audit rows, kind oidc, as of its operations and
// their events.
func TestOIDCPrincipals(t *testing.T) {
	th, op := serveOIDC(t)
	vera, otto, ada := tokenOf(t, op, "vera"), tokenOf(t, op, "otto"), tokenOf(t, op, "ada")
	w := decode[Whoami](t, th.do(t, "GET", APIPrefix+"/auth/whoami", "", withBearer(otto)...))
	if w.Principal != "otto" || w.Kind != access.KindOIDC || !slices.Equal(w.Roles, []access.Role{access.Operator}) ||
		!slices.Equal(w.Scopes, []string{"node:n1"}) || w.ExpiresAt == nil {
		t.Fatalf("whoami of otto: %+v", w)
	}
	if w := decode[Whoami](t, th.do(t, "GET", APIPrefix+"/auth/whoami", "", withBearer(ada)...)); !slices.Equal(w.Roles, []access.Role{access.Admin}) {
		t.Fatalf("whoami of ada: %+v", w)
	}
	body := `{"state":"running","config_version":"v1"}`
	for _, path := range []string{"/streams", "/nodes", "/operations", "/audit", "/jobs", "/rollouts", "/status"} {
		if r := th.do(t, "GET", APIPrefix+path, "", withBearer(vera)...); r.status != 200 {
			t.Errorf("viewer GET %s: %d %s", path, r.status, r.body)
		}
	}
	if r := th.do(t, "PUT", APIPrefix+"/nodes/n1/streams/s1/desired-state", body, withBearer(vera)...); r.status != 403 {
		t.Fatalf("viewer write: %d %s", r.status, r.body)
	}
	if r := th.do(t, "PUT", APIPrefix+"/nodes/n1/streams/s1/desired-state", body, withBearer(otto)...); r.status != 202 {
		t.Fatalf("operator in scope: %d %s", r.status, r.body)
	}
	if r := th.do(t, "PUT", APIPrefix+"/nodes/n2/streams/s1/desired-state", body, withBearer(otto)...); r.status != 403 {
		t.Fatalf("operator out of scope: %d %s", r.status, r.body)
	}
	if r := th.do(t, "PUT", APIPrefix+"/nodes/n2/streams/s1/desired-state", body, withBearer(ada)...); r.status != 202 {
		t.Fatalf("admin write: %d %s", r.status, r.body)
	}
	audit := decode[wire.Page[wire.AuditRecord]](t, th.do(t, "GET", APIPrefix+"/audit", "", bearer...))
	want := map[string]string{"vera": "rejected", "otto": "accepted", "ada": "accepted"}
	for actor, outcome := range want {
		if !slices.ContainsFunc(audit.Items, func(a wire.AuditRecord) bool {
			return a.Actor == actor && a.ActorKind == string(access.KindOIDC) && a.Outcome == outcome
		}) {
			t.Errorf("no %s audit row of %s: %+v", outcome, actor, audit.Items)
		}
	}
	ops := decode[wire.Page[wire.Operation]](t, th.do(t, "GET", APIPrefix+"/operations", "", bearer...))
	i := slices.IndexFunc(ops.Items, func(o wire.Operation) bool { return o.Actor == "otto" && o.NodeID == "n1" })
	if ops.Total != 2 || i < 0 || ops.Items[i].ActorKind != string(access.KindOIDC) {
		t.Fatalf("operations: %+v", ops)
	}
	evs := decode[wire.Page[wire.Event]](t, th.do(t, "GET", APIPrefix+"/events?operation_id="+ops.Items[i].OperationID, "", bearer...))
	if evs.Total == 0 || !slices.ContainsFunc(evs.Items, func(e wire.Event) bool {
		return e.Kind == wire.EventIntentAccepted && e.Actor == "otto" && e.ActorKind == string(access.KindOIDC)
	}) {
		t.Fatalf("events of otto's operation: %+v", evs)
	}
}

// TestOIDCKeyRotation: tokens of new keys (ES256, then EdDSA) verify
// after one refresh, tokens of the old keys still do; with the provider
// gone, known keys keep verifying and an unknown kid is refused.
func TestOIDCKeyRotation(t *testing.T) {
	th, op := serveOIDC(t)
	whoami := func(tok string) int {
		return th.do(t, "GET", APIPrefix+"/auth/whoami", "", withBearer(tok)...).status
	}
	first := tokenOf(t, op, "vera")
	if s := whoami(first); s != 200 {
		t.Fatalf("RS256 token: %d", s)
	}
	var toks []string
	for _, alg := range []jose.SignatureAlgorithm{jose.ES256, jose.EdDSA} {
		if err := op.Rotate(alg); err != nil {
			t.Fatal(err)
		}
		tok := tokenOf(t, op, "vera")
		if s := whoami(tok); s != 200 {
			t.Fatalf("%s token after rotation: %d", alg, s)
		}
		toks = append(toks, tok)
	}
	if s := whoami(first); s != 200 {
		t.Fatalf("the first token after rotation: %d", s)
	}
	// A token of a known key the Hub has not seen yet, minted before the
	// provider goes away.
	unseen, err := op.Sign(op.Claims("vera", time.Now(), time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Close(); err != nil {
		t.Fatal(err)
	}
	if s := whoami(unseen); s != 200 {
		t.Fatalf("a known key while the provider is unreachable: %d", s)
	}
	if err := op.Rotate(jose.RS256); err != nil {
		t.Fatal(err)
	}
	stranger, err := op.Sign(op.Claims("vera", time.Now(), time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	r := th.do(t, "GET", APIPrefix+"/auth/whoami", "", withBearer(stranger)...)
	if r.status != 401 || r.problem(t).Code != "unauthorized" {
		t.Fatalf("an unknown kid while the provider is unreachable: %d %s", r.status, r.body)
	}
	for _, tok := range toks {
		if s := whoami(tok); s != 200 {
			t.Fatalf("a cached token while the provider is unreachable: %d", s)
		}
	}
}

// TestOIDCRefusedTokens: tokens the provider would not mint are refused.
func TestOIDCRefusedTokens(t *testing.T) {
	th, op := serveOIDC(t)
	now := time.Now()
	claims := func(edit func(map[string]any)) map[string]any {
		c := op.Claims("ada", now, time.Hour)
		edit(c)
		return c
	}
	sign := func(c map[string]any) string {
		tok, err := op.Sign(c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	good := sign(claims(func(map[string]any) {}))
	if r := th.do(t, "GET", APIPrefix+"/auth/whoami", "", withBearer(good)...); r.status != 200 {
		t.Fatalf("a hand-signed good token: %d %s", r.status, r.body)
	}
	kid := strings.Split(good, ".")[0]
	var header map[string]any
	if b, err := base64.RawURLEncoding.DecodeString(kid); err != nil || json.Unmarshal(b, &header) != nil {
		t.Fatalf("header of %q", kid)
	}
	hs256, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("a-shared-secret-of-32-bytes-long")},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), header["kid"]))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims(func(map[string]any) {}))
	jws, err := hs256.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	hsTok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	none := b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + b64(payload) + "."
	cases := map[string]string{
		"expired": sign(claims(func(c map[string]any) {
			c["exp"], c["iat"], c["nbf"] = now.Add(-time.Hour).Unix(), now.Add(-2*time.Hour).Unix(), now.Add(-2*time.Hour).Unix()
		})),
		"not yet valid":   sign(claims(func(c map[string]any) { c["nbf"], c["exp"] = now.Add(time.Hour).Unix(), now.Add(2*time.Hour).Unix() })),
		"wrong issuer":    sign(claims(func(c map[string]any) { c["iss"] = "http://127.0.0.1:1" })),
		"wrong audience":  sign(claims(func(c map[string]any) { c["aud"] = []string{"another-service"} })),
		"alg none":        none,
		"HS256":           hsTok,
		"tampered":        good[:len(good)-4] + "AAAA",
		"bad scope claim": sign(claims(func(c map[string]any) { c["flowplane_scopes"] = []string{"pod:x"} })),
	}
	for name, tok := range cases {
		t.Run(name, func(t *testing.T) {
			r := th.do(t, "GET", APIPrefix+"/auth/whoami", "", withBearer(tok)...)
			if r.status != http.StatusUnauthorized || r.problem(t).Code != "unauthorized" {
				t.Fatalf("%d %s", r.status, r.body)
			}
			if strings.Contains(string(r.body), tok) {
				t.Fatal("the problem echoes the token")
			}
		})
	}
	// A token without a known role reads nothing.
	noRole := sign(claims(func(c map[string]any) { c["roles"] = []string{"guest"} }))
	if r := th.do(t, "GET", APIPrefix+"/nodes", "", withBearer(noRole)...); r.status != 403 {
		t.Fatalf("no role: %d %s", r.status, r.body)
	}
}
