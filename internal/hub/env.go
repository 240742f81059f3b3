package hub

import (
	"strconv"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/idp"
)

// EnvVar documents one environment variable the Hub reads.
type EnvVar struct {
	Name    string
	Default string // "" when none
	Meaning string
}

// EnvVars lists every environment variable the Hub reads, in the order
// `flowplane hub --help` shows them. A variable added to settings.go must
// be added here (cmd/flowplane tests that every SVC_* constant of this
// package is listed).
func EnvVars() []EnvVar {
	return []EnvVar{
		{EnvAddress, DefaultAddress, "listen address"},
		{EnvStorage, "", "SQLite file or postgres:// URL of the durable state; required unless insecure local"},
		{EnvOperatorToken, "", "bearer token of the operator API; required unless insecure local; at least 16 characters"},
		{EnvNodeToken, "", "token Agents register with (the nodes' node_token); required unless insecure local; at least 16 characters, not the operator token"},
		{EnvTLSCert, "", "PEM certificate chain to serve HTTPS with (with " + EnvTLSKey + "); reloaded when the file changes"},
		{EnvTLSKey, "", "private key of " + EnvTLSCert + "; reloaded when the file changes"},
		{EnvClientCA, "", "PEM file of the CA of nodes' client certificates: the agent API then requires one whose URI SAN is spiffe://<domain>/node/<node_id> (needs " + EnvTLSCert + ")"},
		{EnvSessionTTLMax, shortDuration(DefaultSessionTTLMax), "longest Agent session the Hub grants; a longer agent_session_ttl_ms is clamped"},
		{EnvNodeGCAfter, shortDuration(DefaultNodeGCAfter), "forget a node unavailable this long that holds no desired state; 0 never"},
		{EnvMaxNodes, strconv.Itoa(DefaultMaxNodes), "registered nodes the Hub keeps; registering another is refused (503 capacity); 0 no limit"},
		{EnvRegisterRate, strconv.FormatFloat(DefaultRegisterRate, 'f', -1, 64), "registrations per second from one remote address; beyond it 429 capacity; 0 no limit"},
		{EnvRegisterBurst, strconv.Itoa(DefaultRegisterBurst), "registrations one remote address may make at once before " + EnvRegisterRate + " applies"},
		{EnvTokensFile, "", "file of named operator tokens, one a line: name=<name> role=viewer|operator|admin [scopes=<scope>,...] sha256=<hex> [expires=<RFC 3339>]; reloaded when it changes (flowplane hub token create prints lines)"},
		{EnvOIDCIssuer, "", "issuer URL of an OpenID Provider whose bearer JWTs the operator API accepts (https, or http on loopback; with " + EnvOIDCAudience + ")"},
		{EnvOIDCAudience, "", "audience the provider's tokens must carry in aud"},
		{EnvOIDCRolesClaim, idp.DefaultRolesClaim, "claim holding flowplane roles (viewer, operator, admin)"},
		{EnvOIDCGroupsClaim, idp.DefaultGroupsClaim, "claim read like the roles claim (groups named viewer, operator, admin)"},
		{EnvOIDCScopesClaim, idp.DefaultScopesClaim, "claim holding flowplane scopes (node:edge-*, job:etl-*, ...)"},
		{EnvOIDCSubjectClaim, idp.DefaultSubjectClaim, "claim used as the principal id, the actor of audit rows (sub, preferred_username, email...)"},
		{EnvOIDCClientID, "", "client id of the console's sign-in through the provider (authorization code with PKCE); unset: the console signs in with a pasted token only"},
		{EnvOIDCClientSecret, "", "client secret of " + EnvOIDCClientID + " for a confidential client; unset for a public client"},
		{EnvOIDCRedirectURL, "", "the console's callback registered with the provider, https://<hub>" + signInCallbackPath + "; unset: derived from each request's scheme and Host"},
		{EnvInsecureLocal, "", "1: local development on a loopback address; missing storage or tokens are allowed and logged"},
		{EnvAPIPrefix, APIPrefix, "prefix of the operator and agent APIs"},
		{EnvCORSOrigins, "", "comma-separated browser origins allowed to call the API"},
		{EnvIntentTTL, shortDuration(DefaultIntentTTL), "how long an accepted intent may wait to be carried out"},
		{EnvLeaseTTL, shortDuration(DefaultLeaseTTL), "leader lease of the Hubs sharing one database: renewed every second, lost after this; " + shortDuration(MinLeaseTTL) + " to " + shortDuration(MaxLeaseTTL)},
		{EnvAdvertiseURL, "", "URL other Hubs and operators reach this Hub at, shown as the leader's address in /system; unset: the listen address"},
	}
}

// shortDuration is d without trailing zero units: 24h, not 24h0m0s.
func shortDuration(d time.Duration) string {
	return strings.TrimSuffix(strings.TrimSuffix(d.String(), "0s"), "0m")
}
