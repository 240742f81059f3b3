package testop

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/google/uuid"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// Principal is one identity the provider issues tokens for.
type Principal struct {
	// Name is the token's sub, and the client id it signs in with.
	Name string
	// Secret is its client secret.
	Secret string
	// Roles go into the roles claim, Scopes into flowplane_scopes.
	Roles, Scopes []string
	// Password, when set, makes the principal a user too: it signs in
	// on the provider's login page (user name Name) in the authorization
	// code flow of PublicClient.
	Password string
}

// Options configure a Provider.
type Options struct {
	// Addr is the loopback address to listen on; "" means 127.0.0.1:0.
	Addr string
	// Audience is the aud of every token.
	Audience string
	// Principals may sign in.
	Principals []Principal
	// PublicClient is the id of the public client of the authorization
	// code flow (the Hub's console): PKCE S256 required, no secret, JWT
	// access tokens whose aud is the client id. "" means Audience, so that
	// its access tokens carry the Hub's audience.
	PublicClient string
	// RedirectURIs are PublicClient's registered redirect URIs; a loopback
	// http URI matches any port (RFC 8252). Empty means DefaultRedirectURIs.
	RedirectURIs []string
	// Logger receives the provider's own log; nil discards it.
	Logger *slog.Logger
}

// TokenLifetime is how long the access tokens of the authorization code
// flow live (zitadel's example storage issues them for 5 minutes).
const TokenLifetime = 5 * time.Minute

// DefaultRedirectURIs are the console's callback on loopback, any port.
var DefaultRedirectURIs = []string{"http://127.0.0.1/ui/auth/callback", "http://localhost/ui/auth/callback"}

// Provider is a running OpenID Provider.
type Provider struct {
	// Issuer is the provider's issuer URL (http://127.0.0.1:port).
	Issuer   string
	audience string
	store    *store
	srv      *http.Server
	done     chan error
	once     sync.Once
	closeErr error
}

// Start runs a Provider until Close.
func Start(o Options) (*Provider, error) {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, err
	}
	issuer := "http://" + ln.Addr().String()
	users := users{}
	pub := publicClient{id: o.PublicClient, redirects: o.RedirectURIs}
	if pub.id == "" {
		pub.id = o.Audience
	}
	if len(pub.redirects) == 0 {
		pub.redirects = DefaultRedirectURIs
	}
	st := &store{
		Storage:    storage.NewStorage(users),
		audience:   o.Audience,
		public:     pub,
		principals: map[string]Principal{},
	}
	for _, p := range o.Principals {
		st.principals[p.Name] = p
		if p.Password != "" {
			users[p.Name] = &storage.User{ID: p.Name, Username: p.Name, Password: p.Password, FirstName: p.Name,
				Email: p.Name + "@example.test", EmailVerified: true, PreferredLanguage: language.English}
		}
	}
	if err := st.rotate(jose.RS256); err != nil {
		ln.Close()
		return nil, err
	}
	var crypt [32]byte
	if _, err := rand.Read(crypt[:]); err != nil {
		ln.Close()
		return nil, err
	}
	provider, err := op.NewProvider(&op.Config{CryptoKey: crypt, CodeMethodS256: true, AuthMethodPost: true},
		st, op.StaticIssuer(issuer), op.WithAllowInsecure(), op.WithLogger(o.Logger))
	if err != nil {
		ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", provider)
	mux.Handle(loginPath, &login{st: st, issuer: issuer, callback: op.AuthCallbackURL(provider)})
	p := &Provider{Issuer: issuer, audience: o.Audience, store: st, done: make(chan error, 1),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() { p.done <- p.srv.Serve(ln) }()
	return p, nil
}

// Close stops the provider: its discovery and keys become unreachable.
// Closing again returns the first Close's error.
func (p *Provider) Close() error {
	p.once.Do(func() {
		p.closeErr = p.srv.Close()
		if serr := <-p.done; !errors.Is(serr, http.ErrServerClosed) && p.closeErr == nil {
			p.closeErr = serr
		}
	})
	return p.closeErr
}

// Token signs name in with the client-credentials grant and returns its
// JWT access token.
func (p *Provider) Token(ctx context.Context, name string) (string, error) {
	p.store.mu.Lock()
	pr, ok := p.store.principals[name]
	p.store.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("testop: no principal %q", name)
	}
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {pr.Name}, "client_secret": {pr.Secret}, "scope": {"openid"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Issuer+"/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("testop: token endpoint: %s: %s", res.Status, body)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(body, &tr); err != nil || tr.AccessToken == "" {
		return "", fmt.Errorf("testop: token endpoint answered %s", body)
	}
	return tr.AccessToken, nil
}

// Rotate makes a new signing key of alg (RS256, ES256 or EdDSA) the one
// tokens are signed with; earlier keys stay in the JWKS, so tokens already
// issued stay valid.
func (p *Provider) Rotate(alg jose.SignatureAlgorithm) error { return p.store.rotate(alg) }

// Sign signs claims with the current key, as the provider would: for
// tokens it will not mint (expired, not yet valid, another audience).
func (p *Provider) Sign(claims map[string]any) (string, error) {
	k, err := p.store.SigningKey(context.Background())
	if err != nil {
		return "", err
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.SignatureAlgorithm(), Key: k.Key()},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), k.ID()))
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	jws, err := s.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// Claims are the claims the provider puts in name's token, issued at now
// for ttl: a start for Sign.
func (p *Provider) Claims(name string, now time.Time, ttl time.Duration) map[string]any {
	p.store.mu.Lock()
	pr := p.store.principals[name]
	p.store.mu.Unlock()
	return map[string]any{"iss": p.Issuer, "sub": name, "aud": []string{p.audience}, "iat": now.Unix(),
		"nbf": now.Unix(), "exp": now.Add(ttl).Unix(), "roles": pr.Roles, "flowplane_scopes": pr.Scopes}
}

// store is the example in-memory storage of zitadel/oidc with the
// provider's principals as client-credentials clients, their claims, and
// rotating keys.
type store struct {
	*storage.Storage
	audience string
	public   publicClient

	mu         sync.Mutex // guards principals and keys
	principals map[string]Principal
	keys       []*key // the last is the signing key
}

var _ op.ClientCredentialsStorage = (*store)(nil)

type key struct {
	id   string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func (k *key) SignatureAlgorithm() jose.SignatureAlgorithm { return k.alg }
func (k *key) Algorithm() jose.SignatureAlgorithm          { return k.alg }
func (k *key) ID() string                                  { return k.id }
func (k *key) Use() string                                 { return "sig" }

// Key is the private key as a SigningKey, the public one as a Key: the
// provider asks for each through its own interface.
func (k *key) Key() any { return k.priv }

type publicKey struct{ *key }

func (k publicKey) Key() any { return k.priv.Public() }

func (s *store) rotate(alg jose.SignatureAlgorithm) error {
	var (
		priv crypto.Signer
		err  error
	)
	switch alg {
	case jose.RS256:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.EdDSA:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		return fmt.Errorf("testop: no keys of %s", alg)
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.keys = append(s.keys, &key{id: uuid.NewString(), alg: alg, priv: priv})
	s.mu.Unlock()
	return nil
}

func (s *store) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[len(s.keys)-1], nil
}

func (s *store) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA}, nil
}

func (s *store) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]op.Key, len(s.keys))
	for i, k := range s.keys {
		out[i] = publicKey{k}
	}
	return out, nil
}

func (s *store) ClientCredentials(_ context.Context, clientID, secret string) (op.Client, error) {
	s.mu.Lock()
	p, ok := s.principals[clientID]
	s.mu.Unlock()
	if !ok || p.Secret != secret {
		return nil, errors.New("wrong client or secret")
	}
	return client{id: clientID}, nil
}

func (s *store) ClientCredentialsTokenRequest(_ context.Context, clientID string, scopes []string) (op.TokenRequest, error) {
	return &oidc.JWTTokenRequest{Subject: clientID, Audience: []string{s.audience}, Scopes: scopes}, nil
}

func (s *store) GetPrivateClaimsFromScopes(_ context.Context, userID, _ string, _ []string) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.principals[userID]
	if !ok {
		return nil, nil
	}
	return map[string]any{"roles": p.Roles, "flowplane_scopes": p.Scopes}, nil
}

// client is a principal as a confidential client of the
// client-credentials grant, with JWT access tokens.
type client struct{ id string }

func (c client) GetID() string                       { return c.id }
func (c client) RedirectURIs() []string              { return nil }
func (c client) PostLogoutRedirectURIs() []string    { return nil }
func (c client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodPost }
func (c client) ResponseTypes() []oidc.ResponseType  { return nil }
func (c client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}
func (c client) LoginURL(string) string               { return "" }
func (c client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (c client) IDTokenLifetime() time.Duration       { return 5 * time.Minute }
func (c client) DevMode() bool                        { return false }
func (c client) IsScopeAllowed(string) bool           { return true }
func (c client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c client) ClockSkew() time.Duration             { return 0 }
func (c client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
