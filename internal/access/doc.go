// Package access decides what an operator principal may do on the Hub.
//
// A Principal is who sent a request (a named token, the bootstrap token, an
// OIDC subject) with its roles, scopes and expiry. Allow is the one
// decision: a pure function of the principal, the permission a route needs
// and the resource it touches. Roles grant permissions (viewer, operator,
// admin); scopes narrow a principal to some nodes, streams, jobs or
// rollouts. The package also reads the named-token file (SVC_HUB_TOKENS_FILE).
//
// It must not know HTTP routes, the store or any identity provider: the Hub
// maps its routes to permissions, and authenticators build principals.
package access
