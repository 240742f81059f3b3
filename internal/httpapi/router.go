package httpapi

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
)

// Route is one row of a surface's route table. Method is an HTTP method
// (GET also answers HEAD); Pattern a ServeMux path pattern such as
// "/streams/{id}/start". Public routes (probes, metrics) skip authentication.
// Auth, when set, authenticates this route instead of the router's
// Options.Auth (the Hub's agent routes take node and session credentials,
// not the operator token).
type Route struct {
	Method  string
	Pattern string
	Handler HandlerFunc
	Public  bool
	Auth    Authenticator
}

// Options configure a Router. The zero value is usable: no authentication,
// no cross-origin callers, 1 MiB bodies, an in-memory idempotency store.
type Options struct {
	// Logger receives 500 causes and panics, with the correlation id.
	// nil means slog.Default().
	Logger *slog.Logger
	// Auth authenticates every non-public route; nil lets every request
	// through as PrincipalAnonymous. See BearerToken.
	Auth Authenticator
	// AllowedOrigins are the exact origins ("https://console.example:8443")
	// that get CORS headers. Empty denies every cross-origin call.
	AllowedOrigins []string
	// MaxBodyBytes caps every request body (node 1 MiB, Hub 4 MiB); 0 means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Idempotency keeps Idempotency-Key outcomes of POST, PUT, PATCH and
	// DELETE routes. nil means a NewMemoryStore with its defaults.
	Idempotency IdempotencyStore
}

// Router serves one API surface: one route table over an http.ServeMux,
// wrapped in the conventions every surface shares. Each request gets, in
// order: a correlation id (X-Correlation-ID, 400 invalid_header when
// malformed), CORS headers or a preflight answer, the body cap, routing
// (404 not_found / 405 method_not_allowed problems), authentication of
// non-public routes, Idempotency-Key handling of mutations, the handler.
type Router struct {
	mux     *http.ServeMux
	routes  []Route
	methods []string // distinct methods of routes, for CORS preflights
	log     *slog.Logger
	auth    Authenticator
	origins map[string]bool
	maxBody int64
	idem    IdempotencyStore
}

// NewRouter builds a Router over routes. Like http.ServeMux it panics on a
// malformed or conflicting route: route tables are code, not input.
func NewRouter(routes []Route, opts Options) *Router {
	rt := &Router{
		mux:     http.NewServeMux(),
		routes:  slices.Clone(routes),
		log:     opts.Logger,
		auth:    opts.Auth,
		origins: make(map[string]bool, len(opts.AllowedOrigins)),
		maxBody: opts.MaxBodyBytes,
		idem:    opts.Idempotency,
	}
	if rt.log == nil {
		rt.log = slog.Default()
	}
	if rt.maxBody <= 0 {
		rt.maxBody = DefaultMaxBodyBytes
	}
	if rt.idem == nil {
		rt.idem = NewMemoryStore(MemoryStoreOptions{})
	}
	for _, o := range opts.AllowedOrigins {
		rt.origins[strings.ToLower(o)] = true
	}
	for _, route := range routes {
		if route.Method == "" || strings.ContainsAny(route.Method, " \t") || route.Handler == nil {
			panic(fmt.Sprintf("httpapi: invalid route %q %q", route.Method, route.Pattern))
		}
		rt.mux.Handle(route.Method+" "+route.Pattern, rt.routeHandler(route))
		if !slices.Contains(rt.methods, route.Method) {
			rt.methods = append(rt.methods, route.Method)
		}
	}
	slices.Sort(rt.methods)
	return rt
}

// Routes returns the route table, in registration order, so tests can walk
// every route (for example to check that each non-public one answers 401).
func (rt *Router) Routes() []Route { return slices.Clone(rt.routes) }

// ServeHTTP implements http.Handler.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := correlationID(r.Header.Values(HeaderCorrelationID))
	w.Header().Set(HeaderCorrelationID, id)
	r = r.WithContext(ContextWithCorrelationID(r.Context(), id))
	if rt.cors(w, r) {
		return
	}
	if !ok {
		writeProblem(w, r, BadRequest(CodeInvalidHeader,
			"X-Correlation-ID must be 1 to 128 printable ASCII characters"))
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		if r.ContentLength > rt.maxBody {
			writeProblem(w, r, BodyTooLarge(rt.maxBody))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, rt.maxBody)
	}
	h, pattern := rt.mux.Handler(r)
	if pattern == "" {
		rt.noRoute(w, r, h)
		return
	}
	rt.mux.ServeHTTP(w, r)
}

// noRoute answers a request no pattern matched. ServeMux's own answer (plain
// text 404 or 405 with Allow, or a redirect to a cleaned path) is captured:
// 404 and 405 are rewritten as problems, anything else is passed on.
func (rt *Router) noRoute(w http.ResponseWriter, r *http.Request, h http.Handler) {
	c := &captureWriter{header: http.Header{}}
	h.ServeHTTP(c, r)
	switch c.status {
	case http.StatusNotFound:
		writeProblem(w, r, NotFound(CodeNotFound, "no route for "+r.URL.Path))
	case http.StatusMethodNotAllowed:
		writeProblem(w, r, MethodNotAllowed(strings.Split(c.header.Get("Allow"), ", ")))
	default:
		for k, v := range c.header {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(c.status)
		_, _ = w.Write(c.body.Bytes())
	}
}

func (rt *Router) routeHandler(route Route) http.Handler {
	mutation := isMutation(route.Method)
	auth := rt.auth
	if route.Auth != nil {
		auth = route.Auth
	}
	return Handler(rt.log, func(w http.ResponseWriter, r *http.Request) error {
		principal, err := authenticate(auth, r, route.Public)
		if err != nil {
			return err
		}
		r = r.WithContext(ContextWithPrincipal(r.Context(), principal))
		if mutation {
			return rt.idempotent(w, r, route.Handler)
		}
		return route.Handler(w, r)
	})
}

// authenticate returns r's principal. A public route never fails: an absent
// or wrong credential there is simply anonymous.
func authenticate(auth Authenticator, r *http.Request, public bool) (string, error) {
	if auth == nil {
		return PrincipalAnonymous, nil
	}
	p, err := auth(r)
	if err != nil {
		if public {
			return PrincipalAnonymous, nil
		}
		return "", err
	}
	return p, nil
}

func isMutation(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// captureWriter records a response in memory.
type captureWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *captureWriter) Header() http.Header { return c.header }

func (c *captureWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}

func (c *captureWriter) Write(b []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return c.body.Write(b)
}
