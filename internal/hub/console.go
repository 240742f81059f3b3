package hub

import (
	"net/http"
	"net/url"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/web/console"
)

// consoleRoutes serve the web console at console.Path and redirect "/"
// there. They are public: the console is static files, and every call it
// makes to the operator API carries the token the user enters or the
// session cookie of its sign-in through the identity provider (signIn,
// whose routes are here too).
func (h *Hub) consoleRoutes() []httpapi.Route {
	cfg := console.Config{APIPrefix: h.prefix}
	if h.signIn != nil {
		cfg.SignIn = &console.SignIn{Provider: providerName(h.opts.Settings.OIDC.Issuer), Login: signInLoginPath, Logout: signInLogoutPath}
	}
	site := console.New(cfg)
	routes := []httpapi.Route{
		{Method: "GET", Pattern: "/{$}", Public: true, Handler: func(w http.ResponseWriter, r *http.Request) error {
			console.Header(w.Header())
			http.Redirect(w, r, console.Path, http.StatusFound)
			return nil
		}},
		{Method: "GET", Pattern: console.Path, Public: true, Handler: func(w http.ResponseWriter, r *http.Request) error {
			if !site.Serve(w, r) && !site.NotFound(w, r) {
				return httpapi.NotFound(httpapi.CodeNotFound, "no console file at "+r.URL.Path)
			}
			return nil
		}},
	}
	if h.signIn != nil {
		routes = append(routes, h.signIn.routes()...)
	}
	return routes
}

// providerName is how the console names the identity provider on its
// sign-in button: the issuer's host.
func providerName(issuer string) string {
	if u, err := url.Parse(issuer); err == nil && u.Host != "" {
		return u.Host
	}
	return issuer
}
