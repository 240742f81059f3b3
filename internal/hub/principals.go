package hub

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/flowplane/flowplane/internal/access"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/idp"
	"github.com/flowplane/flowplane/internal/wire"
)

// PrincipalOperator is the bootstrap principal, SVC_OPERATOR_TOKEN's.
const PrincipalOperator = "operator"

// tokensPollInterval is how often the tokens file's modification time is
// looked at.
const tokensPollInterval = time.Second

// actor is who a record is written in the name of: the actor and
// actor_kind of audit rows, events and operations.
type actor struct {
	id   string
	kind string // an access.Kind
}

// hubActor is the Hub acting on its own.
var hubActor = actor{id: actorHub, kind: string(access.KindHub)}

// actorOf is the actor of the request's principal (anonymous outside a
// router, as httpapi.Principal).
func actorOf(ctx context.Context) actor {
	p := httpapi.Caller(ctx)
	if p.ID == "" {
		return actor{id: httpapi.PrincipalAnonymous, kind: string(access.KindAnonymous)}
	}
	return actor{id: p.ID, kind: string(p.Kind)}
}

// bearerVerifier turns a bearer JWT into a principal (the OIDC verifier).
type bearerVerifier interface {
	PrincipalOf(ctx context.Context, rawToken string, sum [sha256.Size]byte) (access.Principal, error)
}

// operatorAuth resolves operator requests to principals: the bootstrap
// token, the named tokens of the tokens file, then the identity provider's
// JWTs. Agent credentials are never among them (agent routes carry their
// own authenticator, and the node token must differ from the operator's).
type operatorAuth struct {
	bootstrap    [sha256.Size]byte
	hasBootstrap bool
	tokens       interface{ Tokens() []access.NamedToken } // nil: no tokens file
	oidc         bearerVerifier                            // nil: no identity provider
	sessions     *signIn                                   // nil: no console sign-in through the provider
	now          func() time.Time
}

// configured reports whether any credential is: without one the operator
// API is open (insecure local).
func (a *operatorAuth) configured() bool {
	return a.hasBootstrap || a.tokens != nil || a.oidc != nil
}

func (a *operatorAuth) authenticate(r *http.Request) (access.Principal, error) {
	tok, ok := httpapi.BearerCredential(r)
	if !ok && a.sessions != nil && len(r.Header.Values("Authorization")) == 0 {
		// No Authorization at all: the console's session cookie, if any.
		if p, found, err := a.sessions.principal(r); found {
			return p, err
		}
	}
	if !ok {
		return access.Principal{}, httpapi.Unauthorized(httpapi.CodeUnauthorized, "a bearer token is required")
	}
	sum := sha256.Sum256([]byte(tok))
	if a.hasBootstrap && subtle.ConstantTimeCompare(a.bootstrap[:], sum[:]) == 1 {
		return access.Principal{ID: PrincipalOperator, Kind: access.KindToken, Roles: []access.Role{access.Admin}}, nil
	}
	// A JWT has two dots, a named token (hex) none: each is looked up
	// only where it can be.
	if a.oidc != nil && strings.Count(tok, ".") == 2 {
		p, err := a.oidc.PrincipalOf(r.Context(), tok, sum)
		if err != nil {
			if p, ok := a.named(sum); ok && !p.Expired(a.now()) {
				return p, nil
			}
			// The reason (expired, wrong audience...) is the client's to
			// know; it holds no secret.
			return access.Principal{}, httpapi.Unauthorized(httpapi.CodeUnauthorized, "the bearer JWT is not accepted: "+reason(err))
		}
		return p, nil
	}
	if p, ok := a.named(sum); ok {
		if p.Expired(a.now()) {
			return access.Principal{}, httpapi.Unauthorized(httpapi.CodeUnauthorized, "the bearer token expired")
		}
		return p, nil
	}
	return access.Principal{}, httpapi.Unauthorized(httpapi.CodeUnauthorized, "the bearer token is not valid")
}

// named looks a token's digest up in the tokens file.
func (a *operatorAuth) named(sum [sha256.Size]byte) (access.Principal, bool) {
	if a.tokens == nil {
		return access.Principal{}, false
	}
	return access.Lookup(a.tokens.Tokens(), sum)
}

// Whoami is the body of GET /auth/whoami: who the credential authenticates
// as. It never holds the credential.
type Whoami struct {
	Principal string        `json:"principal"`
	Kind      access.Kind   `json:"kind"`
	Roles     []access.Role `json:"roles"`
	// Scopes narrow the principal; empty means every resource.
	Scopes    []string   `json:"scopes"`
	ExpiresAt *wire.Time `json:"expires_at,omitempty"`
	// Permissions are what the roles grant, for clients (the console)
	// that show only what the principal may do.
	Permissions []access.Permission `json:"permissions"`
}

func whoami(p access.Principal) Whoami {
	w := Whoami{Principal: p.ID, Kind: p.Kind, Roles: p.Roles, Scopes: make([]string, len(p.Scopes)), Permissions: []access.Permission{}}
	if w.Roles == nil {
		w.Roles = []access.Role{}
	}
	for i, s := range p.Scopes {
		w.Scopes[i] = s.String()
	}
	if !p.Expires.IsZero() {
		at := wire.At(p.Expires)
		w.ExpiresAt = &at
	}
	for _, perm := range access.Permissions {
		if ok, _ := access.Allow(access.Principal{Roles: p.Roles}, perm, access.Resource{}); ok {
			w.Permissions = append(w.Permissions, perm)
		}
	}
	return w
}

func (h *Hub) getWhoami(w http.ResponseWriter, r *http.Request) error {
	return httpapi.WriteJSON(w, http.StatusOK, whoami(httpapi.Caller(r.Context())))
}

// setupAuth builds the operator authentication from the settings: the
// bootstrap token, the tokens file (read now: a bad one stops start-up).
func (h *Hub) setupAuth(ctx context.Context) error {
	s := h.opts.Settings
	h.auth = &operatorAuth{now: h.opts.Now}
	if s.OperatorToken != "" {
		h.auth.bootstrap, h.auth.hasBootstrap = sha256.Sum256([]byte(s.OperatorToken)), true
	}
	if s.TokensFile != "" {
		f, err := access.LoadTokenFile(s.TokensFile, h.log)
		if err != nil {
			return err
		}
		h.tokenFile, h.auth.tokens = f, f
	}
	if o := s.OIDC; o.Issuer != "" {
		v, err := idp.New(ctx, idp.Config{Issuer: o.Issuer, Audience: o.Audience, RolesClaim: o.RolesClaim, GroupsClaim: o.GroupsClaim,
			ScopesClaim: o.ScopesClaim, SubjectClaim: o.SubjectClaim, Now: h.opts.Now}, h.log)
		if err != nil {
			return err
		}
		h.oidc, h.auth.oidc = v, v
		if o.ClientID != "" {
			h.signIn = newSignIn(v, s, h.tls != nil, h.opts.Now)
			h.auth.sessions = h.signIn
		}
	}
	return nil
}

// reason is the client's message of a refused JWT: the provider being
// unreachable, or go-oidc's reason (expired, audience, issuer, algorithm),
// which names claims, never a token.
func reason(err error) string {
	if errors.Is(err, idp.ErrUnavailable) {
		return "the identity provider is not reachable"
	}
	var exp *oidc.TokenExpiredError
	if errors.As(err, &exp) {
		return "the token expired"
	}
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return msg
}
