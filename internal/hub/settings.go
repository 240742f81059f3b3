package hub

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flowplane/flowplane/internal/config"

	"github.com/flowplane/flowplane/web/console"
)

// DefaultAddress is where the Hub listens when SVC_HUB_ADDRESS is unset.
const DefaultAddress = "127.0.0.1:8090"

// Environment variables of the Hub (spec, "Authentication" rule 3).
const (
	EnvAddress       = "SVC_HUB_ADDRESS"
	EnvStorage       = "SVC_HUB_STORAGE"
	EnvOperatorToken = "SVC_OPERATOR_TOKEN"
	EnvNodeToken     = "SVC_NODE_TOKEN"
	EnvInsecureLocal = "SVC_HUB_INSECURE_LOCAL"
	// Not named by the spec; our own (docs/hub-api.md).
	EnvAPIPrefix   = "SVC_HUB_API_PREFIX"
	EnvCORSOrigins = "SVC_HUB_CORS_ORIGINS"
	EnvIntentTTL   = "SVC_HUB_INTENT_TTL"
	EnvTLSCert     = "SVC_HUB_TLS_CERT"
	EnvTLSKey      = "SVC_HUB_TLS_KEY"
	// Node identity (docs/node-identity.md).
	EnvSessionTTLMax = "SVC_HUB_SESSION_TTL_MAX"
	EnvClientCA      = "SVC_HUB_CLIENT_CA"
	EnvNodeGCAfter   = "SVC_HUB_NODE_GC_AFTER"
	// Admission (docs/node-identity.md "Admission and bounds").
	EnvMaxNodes      = "SVC_HUB_MAX_NODES"
	EnvRegisterRate  = "SVC_HUB_REGISTER_RATE"
	EnvRegisterBurst = "SVC_HUB_REGISTER_BURST"
	// Operator identity (docs/security.md).
	EnvTokensFile       = "SVC_HUB_TOKENS_FILE"
	EnvOIDCIssuer       = "SVC_HUB_OIDC_ISSUER"
	EnvOIDCAudience     = "SVC_HUB_OIDC_AUDIENCE"
	EnvOIDCRolesClaim   = "SVC_HUB_OIDC_ROLES_CLAIM"
	EnvOIDCGroupsClaim  = "SVC_HUB_OIDC_GROUPS_CLAIM"
	EnvOIDCScopesClaim  = "SVC_HUB_OIDC_SCOPES_CLAIM"
	EnvOIDCSubjectClaim = "SVC_HUB_OIDC_SUBJECT_CLAIM"
	// Console sign-in through the provider (docs/console.md).
	EnvOIDCClientID     = "SVC_HUB_OIDC_CLIENT_ID"
	EnvOIDCClientSecret = "SVC_HUB_OIDC_CLIENT_SECRET"
	EnvOIDCRedirectURL  = "SVC_HUB_OIDC_REDIRECT_URL"
	// Several Hubs on one database (docs/hub-api.md "High availability").
	EnvLeaseTTL     = "SVC_HUB_LEASE_TTL"
	EnvAdvertiseURL = "SVC_HUB_ADVERTISE_URL"
)

// Bounds of SVC_HUB_LEASE_TTL: a leader renews every leaseRenewInterval
// and steps down one interval before its lease lapses, so the TTL must
// leave room for a renewal or two.
const (
	DefaultLeaseTTL = 5 * time.Second
	MinLeaseTTL     = 3 * time.Second
	MaxLeaseTTL     = 5 * time.Minute
)

// Defaults of the node identity settings.
const (
	// DefaultSessionTTLMax caps an Agent session's lifetime: the spec's
	// agent_session_ttl_ms default.
	DefaultSessionTTLMax = time.Hour
	// DefaultNodeGCAfter is how long a node without desired state may stay
	// unavailable before the Hub forgets it.
	DefaultNodeGCAfter = 24 * time.Hour
)

// Defaults of admission: how many nodes the Hub keeps, and how fast one
// remote address may register (a token bucket per address).
const (
	DefaultMaxNodes      = 10000
	DefaultRegisterRate  = 2.0 // registrations per second per address
	DefaultRegisterBurst = 20
)

// MinTokenLength is the shortest operator or node token the Hub accepts.
const MinTokenLength = 16

// Settings are the Hub's start-up settings. Tokens come only from the
// environment, never from flags, so that they do not show in process lists.
type Settings struct {
	Address       string
	Storage       string // SQLite path or PostgreSQL URL; "" means volatile (insecure local only)
	OperatorToken string
	NodeToken     string
	InsecureLocal bool
	// APIPrefix is the operator and agent API prefix; "" means /api/v1.
	APIPrefix string
	// CORSOrigins are the browser origins allowed to call the API.
	CORSOrigins []string
	// IntentTTL is how long an intent may wait before it fails; 0 means
	// DefaultIntentTTL.
	IntentTTL time.Duration
	// TLSCert and TLSKey are the PEM certificate chain and key the Hub
	// serves HTTPS with, reloaded when the files change; both empty means
	// plain HTTP.
	TLSCert, TLSKey string
	// SessionTTLMax caps the session lifetime an Agent may ask for; 0
	// means DefaultSessionTTLMax.
	SessionTTLMax time.Duration
	// ClientCA is a PEM file of the CA that signs nodes' client
	// certificates; set, the agent API requires one naming the node id
	// (mutual TLS; needs TLSCert).
	ClientCA string
	// NodeGCAfter is how long a node without desired state may stay
	// unavailable before it is forgotten; 0 means DefaultNodeGCAfter,
	// negative never.
	NodeGCAfter time.Duration
	// MaxNodes is how many registered nodes the Hub keeps; a registration
	// of a new node beyond it is refused (capacity). 0 means
	// DefaultMaxNodes, negative no limit.
	MaxNodes int
	// RegisterRate and RegisterBurst are the token bucket of registrations
	// per remote address; 0 means the defaults, a negative rate no limit.
	RegisterRate  float64
	RegisterBurst int
	// TokensFile names the file of named operator tokens (name, role,
	// scopes, SHA-256, expiry), reloaded when it changes.
	TokensFile string
	// OIDC, when its Issuer is set, accepts the provider's bearer JWTs.
	OIDC OIDCSettings
	// LeaseTTL is how long the leader lease lasts unless renewed; 0 means
	// DefaultLeaseTTL.
	LeaseTTL time.Duration
	// AdvertiseURL is the URL other Hubs and operators reach this Hub at,
	// shown as the leader's address; "" means the listen address.
	AdvertiseURL string
}

func (s Settings) leaseTTL() time.Duration {
	if s.LeaseTTL <= 0 {
		return DefaultLeaseTTL
	}
	return s.LeaseTTL
}

func (s Settings) maxNodes() int {
	if s.MaxNodes == 0 {
		return DefaultMaxNodes
	}
	return s.MaxNodes
}

// registerLimit is the registration rate per address and its burst; a
// rate of 0 is no limit.
func (s Settings) registerLimit() (float64, int) {
	rate, burst := s.RegisterRate, s.RegisterBurst
	switch {
	case rate < 0:
		return 0, 0
	case rate == 0:
		rate = DefaultRegisterRate
	}
	if burst <= 0 {
		burst = DefaultRegisterBurst
	}
	return rate, burst
}

// OIDCSettings name the identity provider whose JWTs the operator API
// accepts, and the claims that carry roles, scopes and the actor.
type OIDCSettings struct {
	Issuer, Audience                                   string
	RolesClaim, GroupsClaim, ScopesClaim, SubjectClaim string
	// ClientID, when set, enables the console's sign-in through the
	// provider (authorization code with PKCE) as this client; ClientSecret
	// is empty for a public client. RedirectURL is the console's callback
	// registered with the provider; "" derives it from each request
	// (scheme and Host + /ui/auth/callback).
	ClientID, ClientSecret, RedirectURL string
}

func (s Settings) sessionTTLMax() time.Duration {
	if s.SessionTTLMax <= 0 {
		return DefaultSessionTTLMax
	}
	return s.SessionTTLMax
}

func (s Settings) nodeGCAfter() time.Duration {
	if s.NodeGCAfter == 0 {
		return DefaultNodeGCAfter
	}
	return max(s.NodeGCAfter, 0)
}

func (s Settings) prefix() string {
	if s.APIPrefix == "" {
		return APIPrefix
	}
	return s.APIPrefix
}

// ErrInsecure is returned when the fail-closed rules refuse to start.
var ErrInsecure = errors.New("refusing to start the Hub")

// SettingsFromEnv reads the settings and applies the fail-closed rules:
// without SVC_HUB_INSECURE_LOCAL=1 storage and both tokens are required
// whatever the address; with it only a loopback address is accepted, and
// what is missing is allowed but announced in the returned warnings (to be
// logged at error level). Tokens that are set are at least MinTokenLength
// characters and differ from each other; the TLS files go in pairs. Flag
// values, when non-empty, override the environment's address and storage.
func SettingsFromEnv(lookup func(string) (string, bool), flagAddress, flagStorage string) (Settings, []string, error) {
	get := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	s := Settings{
		Address:       get(EnvAddress),
		Storage:       get(EnvStorage),
		OperatorToken: get(EnvOperatorToken),
		NodeToken:     get(EnvNodeToken),
		TLSCert:       get(EnvTLSCert),
		TLSKey:        get(EnvTLSKey),
		ClientCA:      get(EnvClientCA),
		TokensFile:    get(EnvTokensFile),
		OIDC: OIDCSettings{Issuer: get(EnvOIDCIssuer), Audience: get(EnvOIDCAudience), RolesClaim: get(EnvOIDCRolesClaim),
			GroupsClaim: get(EnvOIDCGroupsClaim), ScopesClaim: get(EnvOIDCScopesClaim), SubjectClaim: get(EnvOIDCSubjectClaim),
			ClientID: get(EnvOIDCClientID), ClientSecret: get(EnvOIDCClientSecret), RedirectURL: get(EnvOIDCRedirectURL)},
	}
	if err := s.OIDC.validate(); err != nil {
		return s, nil, fmt.Errorf("%w: %v", ErrInsecure, err)
	}
	if (s.TLSCert == "") != (s.TLSKey == "") {
		return s, nil, fmt.Errorf("%w: %s and %s go together: set both to serve HTTPS, or neither", ErrInsecure, EnvTLSCert, EnvTLSKey)
	}
	if s.ClientCA != "" && s.TLSCert == "" {
		return s, nil, fmt.Errorf("%w: %s needs %s and %s: client certificates are asked for on a TLS listener only", ErrInsecure, EnvClientCA, EnvTLSCert, EnvTLSKey)
	}
	if v := get(EnvSessionTTLMax); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return s, nil, fmt.Errorf("%w: %s must be a duration of at least 1s (like 1h), got %q", ErrInsecure, EnvSessionTTLMax, v)
		}
		s.SessionTTLMax = d
	}
	if v := get(EnvNodeGCAfter); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return s, nil, fmt.Errorf("%w: %s must be a duration (like 24h), or 0 to never forget nodes, got %q", ErrInsecure, EnvNodeGCAfter, v)
		}
		s.NodeGCAfter = d
		if d == 0 {
			s.NodeGCAfter = -1
		}
	}
	if err := admissionFromEnv(get, &s); err != nil {
		return s, nil, err
	}
	if v := get(EnvAPIPrefix); v != "" {
		if !strings.HasPrefix(v, "/") || strings.HasSuffix(v, "/") || strings.ContainsAny(v, " {}?#") {
			return s, nil, fmt.Errorf("%w: %s must start with / and not end with / (like /api/v1), got %q", ErrInsecure, EnvAPIPrefix, v)
		}
		if v == strings.TrimSuffix(console.Path, "/") || strings.HasPrefix(v, console.Path) {
			return s, nil, fmt.Errorf("%w: %s must not be under %s, where the Hub serves its console, got %q", ErrInsecure, EnvAPIPrefix, console.Path, v)
		}
		s.APIPrefix = v
	}
	for _, o := range strings.Split(get(EnvCORSOrigins), ",") {
		if o = strings.TrimSpace(o); o != "" {
			if err := config.ValidOrigin(o); err != nil {
				return s, nil, fmt.Errorf("%w: %s: %v", ErrInsecure, EnvCORSOrigins, err)
			}
			s.CORSOrigins = append(s.CORSOrigins, o)
		}
	}
	if v := get(EnvIntentTTL); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return s, nil, fmt.Errorf("%w: %s must be a duration of at least 1s (like 24h), got %q", ErrInsecure, EnvIntentTTL, v)
		}
		s.IntentTTL = d
	}
	if v := get(EnvLeaseTTL); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < MinLeaseTTL || d > MaxLeaseTTL {
			return s, nil, fmt.Errorf("%w: %s must be a duration from %s to %s (like 5s), got %q", ErrInsecure, EnvLeaseTTL,
				shortDuration(MinLeaseTTL), shortDuration(MaxLeaseTTL), v)
		}
		s.LeaseTTL = d
	}
	if v := get(EnvAdvertiseURL); v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return s, nil, fmt.Errorf("%w: %s must be an http:// or https:// URL without credentials, query or fragment (the value is not repeated: it may hold a password)", ErrInsecure, EnvAdvertiseURL)
		}
		s.AdvertiseURL = strings.TrimSuffix(v, "/")
	}
	switch v := get(EnvInsecureLocal); v {
	case "", "0", "false":
	case "1", "true":
		s.InsecureLocal = true
	default:
		return s, nil, fmt.Errorf("%w: %s must be 1 or unset, got %q", ErrInsecure, EnvInsecureLocal, v)
	}
	if flagAddress != "" {
		s.Address = flagAddress
	}
	if flagStorage != "" {
		s.Storage = flagStorage
	}
	if s.Address == "" {
		s.Address = DefaultAddress
	}
	if _, _, err := net.SplitHostPort(s.Address); err != nil {
		return s, nil, fmt.Errorf("%w: %s %q is not host:port", ErrInsecure, EnvAddress, s.Address)
	}
	var missing []string
	if s.Storage == "" {
		missing = append(missing, EnvStorage+" (durable SQLite path or postgres:// URL)")
	}
	if s.OperatorToken == "" {
		missing = append(missing, EnvOperatorToken+" (operator API token)")
	}
	if s.NodeToken == "" {
		missing = append(missing, EnvNodeToken+" (Agent registration token)")
	}
	if !s.InsecureLocal && len(missing) > 0 {
		return s, nil, fmt.Errorf("%w: set %s, or %s=1 with a loopback %s for local development",
			ErrInsecure, strings.Join(missing, ", "), EnvInsecureLocal, EnvAddress)
	}
	// A token that is set must be worth having, insecure local or not.
	for _, t := range []struct{ env, v string }{{EnvOperatorToken, s.OperatorToken}, {EnvNodeToken, s.NodeToken}} {
		if t.v != "" && utf8.RuneCountInString(t.v) < MinTokenLength {
			return s, nil, fmt.Errorf("%w: %s must be at least %d characters (like the output of openssl rand -hex 32)", ErrInsecure, t.env, MinTokenLength)
		}
	}
	if s.OperatorToken != "" && s.OperatorToken == s.NodeToken {
		return s, nil, fmt.Errorf("%w: %s and %s must differ: a node's token would otherwise open the operator API", ErrInsecure, EnvOperatorToken, EnvNodeToken)
	}
	if !s.InsecureLocal {
		return s, nil, nil
	}
	if !config.IsLoopback(s.Address) {
		return s, nil, fmt.Errorf("%w: %s=1 accepts only a loopback %s, got %q", ErrInsecure, EnvInsecureLocal, EnvAddress, s.Address)
	}
	var warnings []string
	if s.Storage == "" {
		warnings = append(warnings, "no "+EnvStorage+": Hub state is volatile and lost at exit")
	}
	if s.OperatorToken == "" && s.TokensFile == "" && s.OIDC.Issuer == "" {
		warnings = append(warnings, "no "+EnvOperatorToken+": the operator API is open to anyone who can reach "+s.Address)
	}
	if s.NodeToken == "" {
		warnings = append(warnings, "no "+EnvNodeToken+": any process that can reach "+s.Address+" can register as a node")
	}
	return s, warnings, nil
}

// admissionFromEnv reads SVC_HUB_MAX_NODES, SVC_HUB_REGISTER_RATE and
// SVC_HUB_REGISTER_BURST into s. 0 switches a limit off.
func admissionFromEnv(get func(string) string, s *Settings) error {
	if v := get(EnvMaxNodes); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("%w: %s must be a whole number of nodes, or 0 for no limit, got %q", ErrInsecure, EnvMaxNodes, v)
		}
		s.MaxNodes = cmp.Or(n, -1)
	}
	if v := get(EnvRegisterRate); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r < 0 || math.IsInf(r, 0) || math.IsNaN(r) {
			return fmt.Errorf("%w: %s must be registrations per second per address (like 2 or 0.5), or 0 for no limit, got %q", ErrInsecure, EnvRegisterRate, v)
		}
		s.RegisterRate = cmp.Or(r, -1)
	}
	if v := get(EnvRegisterBurst); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("%w: %s must be a whole number of at least 1, got %q", ErrInsecure, EnvRegisterBurst, v)
		}
		s.RegisterBurst = n
	}
	return nil
}

// validate checks that issuer and audience go together and that the
// issuer is HTTPS, or HTTP on loopback (a test provider).
func (o OIDCSettings) validate() error {
	if o.ClientID == "" && (o.ClientSecret != "" || o.RedirectURL != "") {
		return fmt.Errorf("%s and %s need %s", EnvOIDCClientSecret, EnvOIDCRedirectURL, EnvOIDCClientID)
	}
	if o.ClientID != "" && o.Issuer == "" {
		return fmt.Errorf("%s needs %s and %s", EnvOIDCClientID, EnvOIDCIssuer, EnvOIDCAudience)
	}
	if o.RedirectURL != "" {
		u, err := url.Parse(o.RedirectURL)
		if err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && config.IsLoopback(u.Host))) || u.Path != signInCallbackPath {
			return fmt.Errorf("%s must be the console's callback, https://<hub>%s (http only on loopback), got %q", EnvOIDCRedirectURL, signInCallbackPath, o.RedirectURL)
		}
	}
	if o.Issuer == "" && o.Audience == "" {
		return nil
	}
	if o.Issuer == "" || o.Audience == "" {
		return fmt.Errorf("%s and %s go together", EnvOIDCIssuer, EnvOIDCAudience)
	}
	u, err := url.Parse(o.Issuer)
	if err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && config.IsLoopback(u.Host))) {
		return fmt.Errorf("%s must be an https URL (http only on loopback), got %q", EnvOIDCIssuer, o.Issuer)
	}
	return nil
}
