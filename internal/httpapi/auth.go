package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// Authenticator decides who sent r. It returns the principal, or an error
// that the Router answers (normally Unauthorized(...), so 401 with
// WWW-Authenticate: Bearer). It must not log credentials.
type Authenticator func(r *http.Request) (principal string, err error)

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
