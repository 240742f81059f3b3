package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/flowplane/flowplane/internal/access"
)

// Authenticator decides who sent r. It returns the principal, or an error
// that the Router answers (normally Unauthorized(...), so 401 with
// WWW-Authenticate: Bearer). It must not log credentials.
type Authenticator func(r *http.Request) (principal string, err error)

// PrincipalAuthenticator decides who sent r, with the roles and scopes the
// surface authorizes by (the Hub's operator API). Like an Authenticator it
// must not log credentials.
type PrincipalAuthenticator func(r *http.Request) (access.Principal, error)

// anonymous is the principal of every request when no authenticator is
// configured: no credential means the surface is open (insecure local).
var anonymous = access.Principal{ID: PrincipalAnonymous, Kind: access.KindAnonymous, Roles: []access.Role{access.Admin}}

// single is the principal of a single shared token (the node API's
// api_token): whoever holds it holds every power.
func (a Authenticator) single() PrincipalAuthenticator {
	if a == nil {
		return nil
	}
	return func(r *http.Request) (access.Principal, error) {
		id, err := a(r)
		if err != nil {
			return access.Principal{}, err
		}
		return access.Principal{ID: id, Kind: access.KindToken, Roles: []access.Role{access.Admin}}, nil
	}
}

// node is the principal of a route's own credential (the Hub's agent
// routes): an id and no role, so no operator permission.
func (a Authenticator) node() PrincipalAuthenticator {
	return func(r *http.Request) (access.Principal, error) {
		id, err := a(r)
		if err != nil {
			return access.Principal{}, err
		}
		return access.Principal{ID: id, Kind: access.KindNode}, nil
	}
}

// BearerToken returns an Authenticator accepting `Authorization: Bearer
// <token>` (scheme case-insensitive) as principal. With an empty token every
// request is PrincipalAnonymous. The comparison is constant-time over
// SHA-256 digests, so neither content nor length leaks through timing.
func BearerToken(token, principal string) Authenticator {
	if token == "" {
		return func(*http.Request) (string, error) { return PrincipalAnonymous, nil }
	}
	want := sha256.Sum256([]byte(token))
	return func(r *http.Request) (string, error) {
		got, ok := BearerCredential(r)
		if !ok {
			return "", Unauthorized(CodeUnauthorized, "a bearer token is required")
		}
		if !digestEqual(want, got) {
			return "", Unauthorized(CodeUnauthorized, "the bearer token is not valid")
		}
		return principal, nil
	}
}

// BearerCredential returns the token of r's `Authorization: Bearer <token>`
// header, for authenticators that look tokens up (Agent sessions).
func BearerCredential(r *http.Request) (string, bool) {
	vals := r.Header.Values("Authorization")
	if len(vals) != 1 {
		return "", false
	}
	scheme, tok, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// digestEqual compares got against a digest in constant time.
func digestEqual(want [sha256.Size]byte, got string) bool {
	g := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(want[:], g[:]) == 1
}
