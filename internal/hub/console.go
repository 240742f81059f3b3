package hub

import (
	"net/http"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/web/console"
)

// consoleRoutes serve the web console at console.Path and redirect "/"
// there. They are public: the console is static files, and every call it
// makes to the operator API carries the token the user enters.
func (h *Hub) consoleRoutes() []httpapi.Route {
	site := console.New(h.prefix)
	return []httpapi.Route{
		{Method: "GET", Pattern: "/{$}", Public: true, Handler: func(w http.ResponseWriter, r *http.Request) error {
			console.Header(w.Header())
			http.Redirect(w, r, console.Path, http.StatusFound)
			return nil
		}},
		{Method: "GET", Pattern: console.Path, Public: true, Handler: func(w http.ResponseWriter, r *http.Request) error {
			if !site.Serve(w, r) {
				return httpapi.NotFound(httpapi.CodeNotFound, "no console file at "+r.URL.Path)
			}
			return nil
		}},
	}
}
