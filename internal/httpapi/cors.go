package httpapi

import (
	"net/http"
	"strings"
)

const (
	corsAllowHeaders  = "Authorization, Content-Type, If-Match, Idempotency-Key, X-Correlation-ID"
	corsExposeHeaders = "ETag, Location, X-Correlation-ID, Idempotent-Replayed"
	corsMaxAge        = "600"
)

// cors adds CORS headers for an allowed Origin and answers preflights; it
// reports whether the request has been answered. Requests without Origin
// (same-origin or not from a browser) are untouched. A disallowed origin gets
// no Access-Control-* header, and its preflight and its mutations (POST,
// PUT, PATCH, DELETE) a 403 forbidden problem.
func (rt *Router) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || sameOrigin(origin, r) {
		// Browsers send Origin on their same-origin POST, PUT and DELETE
		// too (the Hub's own console): those are not cross-origin.
		return false
	}
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	h := w.Header()
	if len(rt.origins) > 0 {
		// The answer depends on Origin whenever any origin may be allowed.
		h.Add("Vary", "Origin")
	}
	if !rt.origins[strings.ToLower(origin)] {
		// A mutation is refused, not only left without CORS headers: a
		// browser sends a "simple" cross-site POST without a preflight and
		// the handler would run before the browser hides the answer.
		if preflight || isMutation(r.Method) {
			writeProblem(w, r, Forbidden("cross-origin requests from this origin are not allowed"))
			return true
		}
		return false
	}
	h.Set("Access-Control-Allow-Origin", origin)
	if !preflight {
		h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		return false
	}
	h.Add("Vary", "Access-Control-Request-Method")
	h.Add("Vary", "Access-Control-Request-Headers")
	methods := rt.allowedMethods(r)
	if len(methods) == 0 {
		if rt.auth != nil {
			// A preflight carries no token: answering 404 here would
			// enumerate routes. The request itself gets its 401.
			methods = rt.methods
		} else {
			writeProblem(w, r, NotFound(CodeNotFound, "no route for "+r.URL.Path))
			return true
		}
	}
	h.Set("Access-Control-Allow-Methods", strings.Join(methods, ", "))
	h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusNoContent)
	return true
}

// allowedMethods returns the route-table methods that have a route for r's
// path.
func (rt *Router) allowedMethods(r *http.Request) []string {
	var out []string
	for _, m := range rt.methods {
		probe := r.WithContext(r.Context())
		probe.Method = m
		if _, pattern := rt.mux.Handler(probe); pattern != "" {
			out = append(out, m)
		}
	}
	return out
}

// sameOrigin reports whether origin is the origin r was sent to: its scheme
// (https when r came over TLS) and its Host. A page of another site that
// resolves to this listener (DNS rebinding) sends its own name as Host too,
// and so passes here; it still needs the token, which it cannot read from
// another origin's storage, and without a token checkHost refuses a Host
// that is neither loopback nor the listener's address.
func sameOrigin(origin string, r *http.Request) bool {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return r.Host != "" && strings.EqualFold(origin, scheme+r.Host)
}
