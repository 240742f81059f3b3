// Package testop runs a real OpenID Provider (github.com/zitadel/oidc's
// certified pkg/op) in memory on loopback, for tests and for trying the
// Hub's sign-in without an identity provider of one's own
// (go run ./internal/idp/oidctest).
//
// Its principals sign in with the client-credentials grant and get JWT
// access tokens carrying their roles and flowplane scopes. Those with a
// password are users too: they log in on the provider's login page in the
// authorization code flow of its public client (the Hub's console; PKCE
// S256 required), which gets an ID token and a JWT access token. Its signing key
// rotates on demand (RS256, ES256 or EdDSA), the previous keys staying in
// its JWKS. It must never be linked into the flowplane binary.
package testop
