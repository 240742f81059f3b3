package testop

import (
	"context"
	"html/template"
	"net/http"
	"time"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// loginPath is the provider's login page of the authorization code flow.
const loginPath = "/login"

// users are the principals with a password, by name (their sub).
type users map[string]*storage.User

func (u users) GetUserByID(id string) *storage.User { return u[id] }
func (u users) GetUserByUsername(name string) *storage.User {
	return u[name]
}
func (u users) ExampleClientID() string { return "" }

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Test OpenID Provider: sign in</title></head>
<body><h1>Test OpenID Provider</h1>
<form method="post" action="/login">
<input type="hidden" name="id" value="{{.ID}}">
<label>User name <input id="username" name="username" autocomplete="username" required autofocus></label>
<label>Password <input id="password" name="password" type="password" autocomplete="current-password" required></label>
<button type="submit" id="submit">Sign in</button>
</form>
{{if .Error}}<p role="alert" id="error">{{.Error}}</p>{{end}}
</body></html>`))

// login is the provider's user sign-in: a form of user name and
// password, then back to the provider's authorization callback, which
// redirects to the client with the code.
type login struct {
	st       *store
	issuer   string
	callback func(context.Context, string) string
}

func (l *login) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	switch r.Method {
	case http.MethodGet:
		l.render(w, r.Form.Get("authRequestID"), "")
	case http.MethodPost:
		id := r.PostForm.Get("id")
		if err := l.st.CheckUsernamePassword(r.PostForm.Get("username"), r.PostForm.Get("password"), id); err != nil {
			l.render(w, id, "wrong user name or password")
			return
		}
		http.Redirect(w, r, l.callback(op.ContextWithIssuer(r.Context(), l.issuer), id), http.StatusFound)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (l *login) render(w http.ResponseWriter, id, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = loginPage.Execute(w, struct{ ID, Error string }{id, msg})
}

// publicClient is the public client of the authorization code flow: no
// secret, PKCE S256 required (CreateAuthRequest), JWT access tokens.
type publicClient struct {
	id        string
	redirects []string
}

func (c publicClient) GetID() string                       { return c.id }
func (c publicClient) RedirectURIs() []string              { return c.redirects }
func (c publicClient) PostLogoutRedirectURIs() []string    { return nil }
func (c publicClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeNative }
func (c publicClient) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodNone }
func (c publicClient) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c publicClient) GrantTypes() []oidc.GrantType        { return []oidc.GrantType{oidc.GrantTypeCode} }
func (c publicClient) LoginURL(id string) string           { return loginPath + "?authRequestID=" + id }
func (c publicClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (c publicClient) IDTokenLifetime() time.Duration      { return 5 * time.Minute }
func (c publicClient) DevMode() bool                       { return false }
func (c publicClient) IsScopeAllowed(string) bool          { return true }
func (c publicClient) IDTokenUserinfoClaimsAssertion() bool {
	return false
}
func (c publicClient) ClockSkew() time.Duration { return 0 }
func (c publicClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c publicClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// GetClientByClientID answers the public client, then the example
// storage's.
func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	if id == s.public.id {
		return s.public, nil
	}
	return s.Storage.GetClientByClientID(ctx, id)
}

// CreateAuthRequest refuses the public client's requests without an S256
// code challenge: the provider, like a careful real one, requires PKCE of
// public clients.
func (s *store) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, userID string) (op.AuthRequest, error) {
	if req.ClientID == s.public.id && (req.CodeChallenge == "" || req.CodeChallengeMethod != oidc.CodeChallengeMethodS256) {
		return nil, oidc.ErrInvalidRequest().WithDescription("a public client must send an S256 code_challenge (PKCE)")
	}
	return s.Storage.CreateAuthRequest(ctx, req, userID)
}
