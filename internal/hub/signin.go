package hub

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/access"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/idp"
	"github.com/flowplane/flowplane/web/console"
)

// The console's sign-in through the identity provider (docs/console.md):
// GET /ui/auth/login redirects to the provider with PKCE, state and nonce;
// GET /ui/auth/callback redeems the code and sets the session cookie;
// POST /ui/auth/logout ends the session.
const (
	signInLoginPath    = console.Path + "auth/login"
	signInCallbackPath = console.Path + "auth/callback"
	signInLogoutPath   = console.Path + "auth/logout"
)

// Cookies of the sign-in. The session cookie is host-only with Path=/:
// the console (/ui/) and the API (/api/v1) share no narrower path. Secure,
// it takes the __Host- prefix, which the browser enforces (Secure, no
// Domain, Path=/). The flow cookie lives while one sign-in is under way,
// on the auth paths only; it is SameSite=Lax because the provider's
// redirect back is a cross-site navigation, which carries no Strict cookie.
const (
	sessionCookieName       = "flowplane_session"
	sessionCookieNameSecure = "__Host-flowplane_session"
	flowCookieName          = "flowplane_signin"
	flowCookiePath          = console.Path + "auth/"
)

// Bounds of the sign-in state, all in memory: a Hub restart ends every
// console session (the browser signs in again).
const (
	signInFlowTTL = 10 * time.Minute
	maxSignInFlow = 1024
	maxSessions   = 10000
)

// CodeSignInFailed answers a callback that is refused (state or nonce
// mismatch, no sign-in under way, a code the provider does not exchange).
const CodeSignInFailed = "sign_in_failed"

// signIn holds the console's sign-ins under way and its sessions; one
// owner, guarded by mu. Keys are SHA-256 digests of the cookie values.
type signIn struct {
	idp    *idp.Verifier
	client idp.Client // RedirectURL "" means derived per request
	secure bool       // cookies carry Secure
	now    func() time.Time

	mu       sync.Mutex
	flows    map[[sha256.Size]byte]flow
	sessions map[[sha256.Size]byte]access.Principal
}

type flow struct {
	idp.Pending
	redirect string
	expires  time.Time
}

func newSignIn(v *idp.Verifier, s Settings, tls bool, now func() time.Time) *signIn {
	o := s.OIDC
	// Plain HTTP on loopback (local development, the test provider) is the
	// one case a browser would not return a Secure cookie.
	secure := tls || !config.IsLoopback(s.Address) || strings.HasPrefix(o.RedirectURL, "https://")
	return &signIn{idp: v, client: idp.Client{ID: o.ClientID, Secret: o.ClientSecret, RedirectURL: o.RedirectURL},
		secure: secure, now: now, flows: map[[sha256.Size]byte]flow{}, sessions: map[[sha256.Size]byte]access.Principal{}}
}

func (s *signIn) sessionCookie() string {
	if s.secure {
		return sessionCookieNameSecure
	}
	return sessionCookieName
}

// routes are the sign-in's console routes. They are public: they are how
// a browser gets a credential.
func (s *signIn) routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: "GET", Pattern: signInLoginPath, Public: true, Handler: s.login},
		{Method: "GET", Pattern: signInCallbackPath, Public: true, Handler: s.callback},
		{Method: "POST", Pattern: signInLogoutPath, Public: true, NoIdempotencyKey: true, Handler: s.logout},
	}
}

// redirectURL is the callback the provider sends the browser back to.
func (s *signIn) redirectURL(r *http.Request) string {
	if s.client.RedirectURL != "" {
		return s.client.RedirectURL
	}
	return origin(r) + signInCallbackPath
}

// origin is the Hub's own origin as r reached it.
func origin(r *http.Request) string {
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

func (s *signIn) login(w http.ResponseWriter, r *http.Request) error {
	console.Header(w.Header())
	c := s.client
	c.RedirectURL = s.redirectURL(r)
	p := idp.NewPending()
	to, err := s.idp.AuthCodeURL(r.Context(), c, p)
	if err != nil {
		return httpapi.Unavailable(httpapi.CodeUnavailable, "the identity provider is not reachable; try again, or sign in with a token")
	}
	id := rand.Text()
	now := s.now()
	s.mu.Lock()
	if len(s.flows) >= maxSignInFlow {
		for k, f := range s.flows {
			if !now.Before(f.expires) {
				delete(s.flows, k)
			}
		}
	}
	full := len(s.flows) >= maxSignInFlow
	if !full {
		s.flows[sha256.Sum256([]byte(id))] = flow{Pending: p, redirect: c.RedirectURL, expires: now.Add(signInFlowTTL)}
	}
	s.mu.Unlock()
	if full {
		return httpapi.Unavailable(httpapi.CodeUnavailable, "too many sign-ins under way; try again in a minute")
	}
	http.SetCookie(w, &http.Cookie{Name: flowCookieName, Value: id, Path: flowCookiePath, MaxAge: int(signInFlowTTL / time.Second),
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, to, http.StatusFound)
	return nil
}

// takeFlow returns and forgets the sign-in of r's flow cookie: each is
// redeemed once, whatever the outcome.
func (s *signIn) takeFlow(r *http.Request) (flow, bool) {
	c, err := r.Cookie(flowCookieName)
	if err != nil || c.Value == "" {
		return flow{}, false
	}
	k := sha256.Sum256([]byte(c.Value))
	s.mu.Lock()
	f, ok := s.flows[k]
	delete(s.flows, k)
	s.mu.Unlock()
	return f, ok && s.now().Before(f.expires)
}

func (s *signIn) callback(w http.ResponseWriter, r *http.Request) error {
	console.Header(w.Header())
	w.Header().Set("Cache-Control", "no-store")
	http.SetCookie(w, &http.Cookie{Name: flowCookieName, Path: flowCookiePath, MaxAge: -1, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	f, ok := s.takeFlow(r)
	if !ok {
		return httpapi.BadRequest(CodeSignInFailed, "no sign-in is under way in this browser, or it took longer than 10 minutes: start again at "+signInLoginPath)
	}
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		return httpapi.BadRequest(CodeSignInFailed, "the identity provider refused the sign-in: "+printable(e))
	}
	c := s.client
	c.RedirectURL = f.redirect
	p, err := s.idp.Redeem(r.Context(), c, f.Pending, q.Get("state"), q.Get("code"))
	if err != nil {
		if errors.Is(err, idp.ErrUnavailable) {
			return httpapi.Unavailable(httpapi.CodeUnavailable, "the identity provider is not reachable; try again")
		}
		return httpapi.BadRequest(CodeSignInFailed, reason(err))
	}
	now := s.now()
	if p.Expires.IsZero() || !now.Before(p.Expires) {
		return httpapi.BadRequest(CodeSignInFailed, "the provider's access token has no expiry or expired already")
	}
	id := rand.Text() + rand.Text()
	s.mu.Lock()
	if len(s.sessions) >= maxSessions {
		for k, sp := range s.sessions {
			if sp.Expired(now) {
				delete(s.sessions, k)
			}
		}
	}
	full := len(s.sessions) >= maxSessions
	if !full {
		s.sessions[sha256.Sum256([]byte(id))] = p
	}
	s.mu.Unlock()
	if full {
		return httpapi.Unavailable(httpapi.CodeUnavailable, "too many console sessions; try again later")
	}
	// The session lives as long as the access token it came from.
	http.SetCookie(w, &http.Cookie{Name: s.sessionCookie(), Value: id, Path: "/", Expires: p.Expires,
		MaxAge: max(int(p.Expires.Sub(now)/time.Second), 1), HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, console.Path, http.StatusSeeOther)
	return nil
}

// printable keeps an error code from the query to what can be shown.
func printable(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	return strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			return c
		}
		return '?'
	}, s)
}

func (s *signIn) logout(w http.ResponseWriter, r *http.Request) error {
	console.Header(w.Header())
	if err := sameOriginCaller(r); err != nil {
		return err
	}
	if c, err := r.Cookie(s.sessionCookie()); err == nil {
		s.mu.Lock()
		delete(s.sessions, sha256.Sum256([]byte(c.Value)))
		s.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: s.sessionCookie(), Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// principal is the principal of r's session cookie; found is false when r
// carries none. A cookie is accepted only from the console's own origin:
// a request a browser marks as from another site or origin (Sec-Fetch-Site,
// Origin) is refused, and a write must show it is same-origin.
func (s *signIn) principal(r *http.Request) (p access.Principal, found bool, err error) {
	c, cerr := r.Cookie(s.sessionCookie())
	if cerr != nil || c.Value == "" {
		return access.Principal{}, false, nil
	}
	if err := sameOriginCaller(r); err != nil {
		return access.Principal{}, true, err
	}
	now := s.now()
	k := sha256.Sum256([]byte(c.Value))
	s.mu.Lock()
	p, ok := s.sessions[k]
	if ok && p.Expired(now) {
		delete(s.sessions, k)
		ok = false
	}
	s.mu.Unlock()
	if !ok {
		return access.Principal{}, true, httpapi.Unauthorized(httpapi.CodeUnauthorized, "the console session ended: sign in again")
	}
	return p, true, nil
}

// sameOriginCaller refuses (403) a cookie-authenticated request from
// another origin: Sec-Fetch-Site other than same-origin or none, an Origin
// other than the Hub's; a write (not GET, HEAD, OPTIONS) needs a positive
// sign, Sec-Fetch-Site: same-origin or the Hub's Origin.
func sameOriginCaller(r *http.Request) error {
	site := r.Header.Get("Sec-Fetch-Site")
	o := r.Header.Get("Origin")
	refuse := httpapi.Forbidden("the console session is accepted only from the console's own origin")
	if site != "" && site != "same-origin" && site != "none" {
		return refuse
	}
	if o != "" && !strings.EqualFold(o, origin(r)) {
		return refuse
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	if site == "same-origin" || o != "" {
		return nil
	}
	return refuse
}
