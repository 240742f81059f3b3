package idp_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/flowplane/flowplane/internal/access"
	"github.com/flowplane/flowplane/internal/idp"
	"github.com/flowplane/flowplane/internal/idp/testop"
)

// TestVerifierClaimsAndRefresh: roles come from the roles and groups
// claims, unknown values ignored; the id from the subject claim; Refresh
// reports an unreachable provider and keeps the keys in hand.
func TestVerifierClaimsAndRefresh(t *testing.T) {
	op, err := testop.Start(testop.Options{Audience: "aud", Principals: []testop.Principal{{Name: "ada", Secret: "s", Roles: []string{"viewer"}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { op.Close() })
	v, err := idp.New(t.Context(), idp.Config{Issuer: op.Issuer, Audience: "aud", SubjectClaim: "email"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	c := op.Claims("ada", time.Now(), time.Hour)
	c["email"], c["groups"], c["roles"] = "ada@example.com", []string{"admin", "staff"}, "viewer unknown"
	tok, err := op.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	p, err := v.Principal(t.Context(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != "ada@example.com" || p.Kind != access.KindOIDC || len(p.Roles) != 2 || p.Roles[0] != access.Viewer || p.Roles[1] != access.Admin {
		t.Fatalf("principal %+v", p)
	}
	delete(c, "email")
	if tok, _ = op.Sign(c); tok != "" {
		if _, err := v.Principal(t.Context(), tok); err == nil {
			t.Fatal("a token without the subject claim was accepted")
		}
	}
	if err := v.Refresh(t.Context()); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if err := op.Rotate(jose.ES256); err != nil {
		t.Fatal(err)
	}
	if err := op.Close(); err != nil {
		t.Fatal(err)
	}
	// go-oidc lets a key fetch join one still marked in flight, and the
	// mark of the fetch before Close is cleared by its own goroutine: the
	// first refresh after Close may still be that fetch's success.
	err = v.Refresh(t.Context())
	for i := 0; err == nil && i < 50; i++ {
		time.Sleep(20 * time.Millisecond)
		err = v.Refresh(t.Context())
	}
	if err == nil {
		t.Fatal("refresh against a closed provider reported no error")
	}
}
