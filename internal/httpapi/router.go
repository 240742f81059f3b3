package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/flowplane/flowplane/internal/access"
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
	// NoIdempotencyKey refuses Idempotency-Key on a mutation (400
	// invalid_header) instead of storing its response: for routes whose
	// answer holds a secret (the Agent's session token), which must never be
	// kept in an idempotency store.
	NoIdempotencyKey bool
	// Doc describes the route for the surface's OpenAPI document.
	Doc Doc
}

// Options configure a Router. The zero value is usable: no authentication,
// no cross-origin callers, 1 MiB bodies, an in-memory idempotency store.
type Options struct {
	// Logger receives 500 causes and panics, with the correlation id.
	// nil means slog.Default().
	Logger *slog.Logger
	// Auth authenticates every non-public route with one shared token
	// (BearerToken), whose holder has every role; nil lets every request
	// through as PrincipalAnonymous, also with every role.
	Auth Authenticator
	// Principals, when set, authenticates instead of Auth and resolves each
	// request to its principal with its own roles and scopes (the Hub's
	// named tokens and OIDC).
	Principals PrincipalAuthenticator
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
// malformed), CORS headers or a preflight answer (403 forbidden for a
// mutation from an origin not allowed), cross-origin protection (403 for a
// browser's cross-site mutation by Sec-Fetch-Site), the body cap, authentication of
// every path that is not a public route's, whether or not a route exists
// (so routes cannot be enumerated without a token), routing (404 not_found /
// 405 method_not_allowed problems), the Host check of routes no credential
// protects (DNS rebinding), the Content-Type of mutations with a body (415
// unsupported_media_type), Idempotency-Key handling of mutations, the
// handler.
type Router struct {
	mux     *http.ServeMux
	public  *http.ServeMux // the public routes' paths, all as GET
	routes  []Route
	methods []string // distinct methods of routes, for CORS preflights
	log     *slog.Logger
	auth    PrincipalAuthenticator
	origins map[string]bool
	maxBody int64
	idem    IdempotencyStore
	// cop refuses cross-origin browser mutations by Sec-Fetch-Site and
	// Origin; the allowed origins are trusted.
	cop *http.CrossOriginProtection
}

// NewRouter builds a Router over routes. Like http.ServeMux it panics on a
// malformed or conflicting route: route tables are code, not input.
func NewRouter(routes []Route, opts Options) *Router {
	rt := &Router{
		mux:     http.NewServeMux(),
		public:  http.NewServeMux(),
		routes:  slices.Clone(routes),
		log:     opts.Logger,
		auth:    opts.Principals,
		origins: make(map[string]bool, len(opts.AllowedOrigins)),
		maxBody: opts.MaxBodyBytes,
		idem:    opts.Idempotency,
		cop:     http.NewCrossOriginProtection(),
	}
	if rt.auth == nil {
		rt.auth = opts.Auth.single()
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
		// An origin AddTrustedOrigin refuses (a path, no scheme) is one no
		// browser sends: config.ValidOrigin refuses it in configuration.
		_ = rt.cop.AddTrustedOrigin(o)
	}
	for _, route := range routes {
		if route.Method == "" || strings.ContainsAny(route.Method, " \t") || route.Handler == nil {
			panic(fmt.Sprintf("httpapi: invalid route %q %q", route.Method, route.Pattern))
		}
		rt.mux.Handle(route.Method+" "+route.Pattern, rt.routeHandler(route))
		if route.Public {
			if _, p := rt.public.Handler(&http.Request{Method: http.MethodGet, URL: &url.URL{Path: route.Pattern}}); p != route.Pattern {
				rt.public.Handle("GET "+route.Pattern, http.NotFoundHandler())
			}
		}
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
	if err := rt.cop.Check(r); err != nil {
		// A browser's cross-site POST, PUT or DELETE (a form, a no-cors
		// fetch): refused before routing, with or without a token.
		writeProblem(w, r, Forbidden("cross-origin requests from this origin are not allowed").WithCause(err))
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
		// Authentication comes before routing: without a valid token an
		// unknown path answers 401 like a known one.
		if rt.auth != nil && !rt.publicPath(r) {
			if _, err := rt.auth(r); err != nil {
				WriteError(w, r, rt.log, err)
				return
			}
		}
		rt.noRoute(w, r, h)
		return
	}
	rt.mux.ServeHTTP(w, r)
}

// publicPath reports whether r's path is a public route's, whatever the
// method.
func (rt *Router) publicPath(r *http.Request) bool {
	probe := r.WithContext(r.Context())
	probe.Method = http.MethodGet
	_, pattern := rt.public.Handler(probe)
	return pattern != ""
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
		auth = route.Auth.node()
	}
	return Handler(rt.log, func(w http.ResponseWriter, r *http.Request) error {
		if auth == nil && !route.Public {
			if err := checkHost(r); err != nil {
				return err
			}
		}
		principal, err := authenticate(auth, r, route.Public)
		if err != nil {
			return err
		}
		r = r.WithContext(ContextWithCaller(r.Context(), principal))
		if !mutation {
			return route.Handler(w, r)
		}
		if err := checkMutationType(r); err != nil {
			return err
		}
		if route.NoIdempotencyKey {
			if len(r.Header.Values(HeaderIdempotencyKey)) > 0 {
				return BadRequest(CodeInvalidHeader, "this route takes no Idempotency-Key")
			}
			return route.Handler(w, r)
		}
		return rt.idempotent(w, r, route.Handler)
	})
}

// MutationMediaTypes are the Content-Types a mutation's body may carry.
// Handlers narrow it further (only configuration bodies take YAML or TOML).
// A mutation without a body needs no Content-Type: cross-site requests are
// refused by Origin and Sec-Fetch-Site (cors, CrossOriginProtection), not by
// media type.
var MutationMediaTypes = []string{MediaTypeJSON, "application/yaml", "text/yaml", "application/toml"}

// checkMutationType answers 415 unsupported_media_type when r carries a
// Content-Type outside MutationMediaTypes, or a body without a Content-Type.
// A bodiless request without one passes (curl -X POST).
func checkMutationType(r *http.Request) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		_, err := checkMediaType(ct, MutationMediaTypes)
		return err
	}
	empty, err := bodyEmpty(r)
	if err != nil {
		return bodyReadError(err)
	}
	if !empty {
		return UnsupportedMediaType(MutationMediaTypes...)
	}
	return nil
}

// bodyEmpty reports whether r has no body, reading at most one byte of a
// body of unknown length and putting it back.
func bodyEmpty(r *http.Request) (bool, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return true, nil
	}
	if r.ContentLength > 0 {
		return false, nil
	}
	var first [1]byte
	n, err := io.ReadFull(r.Body, first[:])
	if n == 0 {
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		return false, err
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(first[:n]), r.Body), r.Body}
	return false, nil
}

// checkHost refuses (403 forbidden) a request whose Host names neither
// loopback ("localhost", 127.0.0.0/8, ::1) nor the address the connection
// was accepted on. A route no credential protects is otherwise reachable by
// any web page through DNS rebinding: the page's own name resolves to the
// listener, and the browser sends that name as Host.
func checkHost(r *http.Request) error {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap()
		if ip.IsLoopback() {
			return nil
		}
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			if ap, err := netip.ParseAddrPort(la.String()); err == nil && ap.Addr().Unmap().WithZone("") == ip.WithZone("") {
				return nil
			}
		}
	}
	return Forbidden("the Host header must name this listener's address or loopback while no API token is set")
}

// authenticate returns r's principal. A public route never fails: an absent
// or wrong credential there is simply anonymous (with no role).
func authenticate(auth PrincipalAuthenticator, r *http.Request, public bool) (access.Principal, error) {
	if auth == nil {
		return anonymous, nil
	}
	p, err := auth(r)
	if err != nil {
		if public {
			return access.Principal{ID: PrincipalAnonymous, Kind: access.KindAnonymous}, nil
		}
		return access.Principal{}, err
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
