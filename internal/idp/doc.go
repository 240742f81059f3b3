// Package idp verifies the bearer JWTs of an OpenID Provider and turns them
// into access principals: the Hub's operator sign-in through an identity
// provider (SVC_HUB_OIDC_ISSUER).
//
// Verification is github.com/coreos/go-oidc/v3's: discovery, the JWKS with
// key lookup by kid, one shared refresh on an unknown kid, signature, iss,
// aud, exp and nbf. This package adds only what go-oidc leaves to its
// caller: the accepted algorithms (RS256, ES256, EdDSA), a periodic JWKS
// refresh, a cache of verified tokens, and the claims that carry roles and
// scopes. It must not hand-write JWT parsing or signature checks.
package idp
