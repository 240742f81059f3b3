package idp

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"github.com/flowplane/flowplane/internal/access"
)

// Algorithms are the signature algorithms accepted; HS256 and none are
// not among them, so a token signed with a shared secret or unsigned is
// refused whatever its claims.
var Algorithms = []string{oidc.RS256, oidc.ES256, oidc.EdDSA}

// Defaults of Config.
const (
	DefaultRolesClaim    = "roles"
	DefaultGroupsClaim   = "groups"
	DefaultScopesClaim   = "flowplane_scopes"
	DefaultSubjectClaim  = "sub"
	DefaultRefreshPeriod = 15 * time.Minute
	// cacheSize bounds the verified-token cache.
	cacheSize = 4096
)

// Config says which provider to trust and how to read its tokens.
type Config struct {
	// Issuer is the provider's issuer URL; discovery is at
	// Issuer/.well-known/openid-configuration.
	Issuer string
	// Audience must be among a token's aud.
	Audience string
	// RolesClaim names the claim (a string or a list of strings) holding
	// roles, read as flowplane roles (viewer, operator, admin); other values
	// are ignored. GroupsClaim is read the same way (IdPs that put roles
	// into groups).
	RolesClaim, GroupsClaim string
	// ScopesClaim names the claim holding flowplane scopes (node:edge-*).
	ScopesClaim string
	// SubjectClaim names the claim used as the principal id (the actor):
	// sub by default; preferred_username or email reads better in audit.
	SubjectClaim string
	// RefreshPeriod is how often the JWKS is fetched again besides the
	// refresh an unknown kid causes; 0 means DefaultRefreshPeriod.
	RefreshPeriod time.Duration
	// Client fetches discovery and keys; nil means a client with a 10 s
	// timeout.
	Client *http.Client
	// Now is the clock of exp and nbf; nil means time.Now.
	Now func() time.Time
}

func (c *Config) defaults() {
	if c.RolesClaim == "" {
		c.RolesClaim = DefaultRolesClaim
	}
	if c.GroupsClaim == "" {
		c.GroupsClaim = DefaultGroupsClaim
	}
	if c.ScopesClaim == "" {
		c.ScopesClaim = DefaultScopesClaim
	}
	if c.SubjectClaim == "" {
		c.SubjectClaim = DefaultSubjectClaim
	}
	if c.RefreshPeriod <= 0 {
		c.RefreshPeriod = DefaultRefreshPeriod
	}
	if c.Client == nil {
		c.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// ErrUnavailable is returned while the provider's discovery document could
// not be read yet.
var ErrUnavailable = errors.New("the identity provider is not reachable")

// Verifier verifies bearer JWTs of one provider.
type Verifier struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex // guards verifier, keys, lastTry
	verifier *oidc.IDTokenVerifier
	keys     *oidc.RemoteKeySet
	endpoint oauth2.Endpoint // the provider's authorization and token endpoints
	lastTry  time.Time

	cacheMu sync.Mutex // guards cache
	cache   map[[sha256.Size]byte]access.Principal
}

// New returns a Verifier of cfg, logging to log (nil: slog.Default). Discovery is tried now and, when the
// provider is not reachable, again on use (at most every 5 s): the Hub
// starts without its identity provider, and JWTs are refused meanwhile.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Verifier, error) {
	if cfg.Issuer == "" || cfg.Audience == "" {
		return nil, errors.New("idp: an issuer and an audience are required")
	}
	cfg.defaults()
	if log == nil {
		log = slog.Default()
	}
	v := &Verifier{cfg: cfg, log: log, cache: map[[sha256.Size]byte]access.Principal{}}
	if _, err := v.discover(ctx); err != nil {
		log.Warn("identity provider not reachable yet; bearer JWTs are refused until it is", "issuer", cfg.Issuer, "err", err)
	}
	return v, nil
}

// discover returns the go-oidc verifier, reading the discovery document
// the first time.
func (v *Verifier) discover(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.verifier != nil {
		return v.verifier, nil
	}
	now := v.cfg.Now()
	if !v.lastTry.IsZero() && now.Sub(v.lastTry) < 5*time.Second {
		return nil, ErrUnavailable
	}
	v.lastTry = now
	ctx = oidc.ClientContext(ctx, v.cfg.Client)
	p, err := oidc.NewProvider(ctx, v.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	var meta struct {
		JWKS string `json:"jwks_uri"`
	}
	if err := p.Claims(&meta); err != nil || meta.JWKS == "" {
		return nil, fmt.Errorf("%w: the discovery document names no jwks_uri", ErrUnavailable)
	}
	// The key set outlives the request that discovered it.
	v.keys = oidc.NewRemoteKeySet(oidc.ClientContext(context.WithoutCancel(ctx), v.cfg.Client), meta.JWKS)
	v.endpoint = p.Endpoint()
	v.verifier = oidc.NewVerifier(v.cfg.Issuer, v.keys, &oidc.Config{
		ClientID: v.cfg.Audience, SupportedSigningAlgs: Algorithms, Now: v.cfg.Now,
	})
	return v.verifier, nil
}

// Principal verifies raw and returns its principal. A verified token is
// cached by its SHA-256 until it expires, so the signature is checked once.
func (v *Verifier) Principal(ctx context.Context, raw string) (access.Principal, error) {
	return v.PrincipalOf(ctx, raw, sha256.Sum256([]byte(raw)))
}

// PrincipalOf is Principal for a caller that has raw's SHA-256 already.
func (v *Verifier) PrincipalOf(ctx context.Context, raw string, sum [sha256.Size]byte) (access.Principal, error) {
	now := v.cfg.Now()
	v.cacheMu.Lock()
	p, ok := v.cache[sum]
	v.cacheMu.Unlock()
	if ok && !p.Expired(now) {
		return p, nil
	}
	ver, err := v.discover(ctx)
	if err != nil {
		return access.Principal{}, err
	}
	tok, err := ver.Verify(ctx, raw)
	if err != nil {
		return access.Principal{}, fmt.Errorf("the token is not valid: %w", err)
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return access.Principal{}, fmt.Errorf("the token's claims: %w", err)
	}
	p, err = v.principal(tok, claims)
	if err != nil {
		return access.Principal{}, err
	}
	v.cacheMu.Lock()
	if len(v.cache) >= cacheSize {
		for k, c := range v.cache {
			if c.Expired(now) || len(v.cache) >= cacheSize {
				delete(v.cache, k)
			}
		}
	}
	v.cache[sum] = p
	v.cacheMu.Unlock()
	return p, nil
}

// principal reads a verified token's claims.
func (v *Verifier) principal(tok *oidc.IDToken, claims map[string]any) (access.Principal, error) {
	id, _ := claims[v.cfg.SubjectClaim].(string)
	if id == "" {
		return access.Principal{}, fmt.Errorf("the token has no %s claim", v.cfg.SubjectClaim)
	}
	p := access.Principal{ID: id, Kind: access.KindOIDC, Expires: tok.Expiry}
	for _, claim := range []string{v.cfg.RolesClaim, v.cfg.GroupsClaim} {
		for _, s := range strings_(claims[claim]) {
			if r, err := access.ParseRole(s); err == nil && !containsRole(p.Roles, r) {
				p.Roles = append(p.Roles, r)
			}
		}
	}
	for _, s := range strings_(claims[v.cfg.ScopesClaim]) {
		sc, err := access.ParseScope(s)
		if err != nil {
			// A scope that does not parse would widen the principal if
			// dropped: refuse the token instead.
			return access.Principal{}, fmt.Errorf("claim %s: %w", v.cfg.ScopesClaim, err)
		}
		p.Scopes = append(p.Scopes, sc)
	}
	return p, nil
}

func containsRole(rs []access.Role, r access.Role) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// strings_ reads a claim that is a string, a space-separated string or a
// list of strings.
func strings_(v any) []string {
	switch v := v.(type) {
	case string:
		return strings.Fields(v)
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// Run refreshes the JWKS every RefreshPeriod until ctx ends. go-oidc
// refreshes only when a token names an unknown kid; a periodic refresh also
// drops keys the provider retired. A failed refresh keeps the keys in hand
// (go-oidc replaces its cache only on success).
func (v *Verifier) Run(ctx context.Context) {
	t := time.NewTicker(v.cfg.RefreshPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := v.Refresh(ctx); err != nil {
				v.log.Warn("identity provider keys not refreshed; keeping the keys in hand", "issuer", v.cfg.Issuer, "err", err)
			}
		}
	}
}

// Refresh fetches the provider's keys now. go-oidc's RemoteKeySet has no
// refresh call of its own: it refreshes when asked to verify a signature
// whose kid it does not hold, so Refresh asks it to verify a throwaway
// signature under a kid no provider uses, and reports whether the fetch
// (not the throwaway verification) failed.
func (v *Verifier) Refresh(ctx context.Context) error {
	if _, err := v.discover(ctx); err != nil {
		return err
	}
	v.mu.Lock()
	keys := v.keys
	v.mu.Unlock()
	probe, err := throwaway()
	if err != nil {
		return err
	}
	_, err = keys.VerifySignature(ctx, probe)
	if err != nil && strings.HasPrefix(err.Error(), "fetching keys") {
		return err
	}
	return nil
}

// throwaway is a JWS signed by a fresh Ed25519 key under a kid of its own.
func throwaway() (string, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: key},
		(&jose.SignerOptions{}).WithHeader(jose.HeaderKey("kid"), "flowplane-refresh-probe"))
	if err != nil {
		return "", err
	}
	payload, _ := json.Marshal(map[string]any{"probe": true})
	jws, err := s.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}
