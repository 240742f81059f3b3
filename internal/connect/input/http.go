package input

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/tracing"
)

func init() {
	authProp := func(desc string) map[string]any { return component.Prop("string", desc, nil) }
	component.Default.RegisterInput(component.Spec{
		Name: "http",
		Summary: "An HTTP server: each POST body becomes a batch. The request is answered 200 only once the " +
			"stream has accepted the batch (written to its WAL or delivered), and 503 when it failed or the " +
			"stream stopped, so clients retry. It cannot be split or replayed: a job cannot re-read after a " +
			"restore what it had accepted before.",
		Schema: component.ObjectSchema(withHTTPLimitProps(map[string]any{
			"address": component.Prop("string", "Listening address, host:port.", "127.0.0.1:8000"),
			"path": func() map[string]any {
				p := component.Prop("string", "Path that accepts POST requests; other methods on it are answered 405.", "/")
				p["pattern"] = `^/[^{}?#\s]*$`
				return p
			}(),
			"auth": func() map[string]any {
				p := component.ObjectSchema(map[string]any{
					"type": func() map[string]any {
						p := component.Prop("string", "`bearer` (Authorization: Bearer <token>) or `basic`.", nil)
						p["enum"] = []any{"bearer", "basic"}
						return p
					}(),
					"token":    authProp("Bearer token; required with type bearer."),
					"username": authProp("User name; required with type basic."),
					"password": authProp("Password; required with type basic."),
				}, "type")
				p["description"] = "Authentication required of clients: `{type: bearer, token: ...}` or " +
					"`{type: basic, username: ..., password: ...}`, compared in constant time; wrong or missing " +
					"credentials are answered 401. Absent: no authentication."
				p["allOf"] = []any{
					map[string]any{
						"if":   map[string]any{"properties": map[string]any{"type": map[string]any{"const": "bearer"}}},
						"then": map[string]any{"required": []string{"token"}},
					},
					map[string]any{
						"if":   map[string]any{"properties": map[string]any{"type": map[string]any{"const": "basic"}}},
						"then": map[string]any{"required": []string{"username", "password"}},
					},
				}
				return p
			}(),
			"max_body_bytes": func() map[string]any {
				p := component.Prop("integer", "Largest accepted body; larger ones are answered 413.", 1<<20)
				p["minimum"] = 1
				return p
			}(),
			"split_array": component.Prop("boolean", "When the body is a JSON array, emit one message per element "+
				"(all in one batch) instead of one message for the whole body.", false),
			"cors_enabled": component.Prop("boolean", "Allow cross-origin requests from any origin "+
				"(Access-Control-Allow-Origin: * and OPTIONS preflight).", false),
			"tls": func() map[string]any {
				p := component.ObjectSchema(map[string]any{
					"cert_file": component.Prop("string", "PEM certificate chain, server certificate first.", nil),
					"key_file":  component.Prop("string", "PEM private key of the certificate.", nil),
				}, "cert_file", "key_file")
				p["description"] = "`{cert_file, key_file}`: serve HTTPS with this PEM certificate chain and key, " +
					"loaded when the input is built (a pair that does not load is a configuration error) and " +
					"reloaded when either file changes, for new connections. Absent: plain HTTP. " +
					"Beyond loopback, set auth as well: without it --validate and start-up warn."
				return p
			}(),
		})),
		Example: `type: http
address: 127.0.0.1:0
path: /ingest
max_body_bytes: 1048576
split_array: true
`,
	}, NewHTTP)
}

var _ component.Input = (*HTTP)(nil)

// HTTPAuth is the authentication the http input requires of clients.
type HTTPAuth struct {
	Type     string `json:"type"`
	Token    string `json:"token"`
	Username string `json:"username"`
	Password string `json:"password"`
}

// HTTPTLS names the certificate the http input serves HTTPS with.
type HTTPTLS struct {
	CertFile string `json:"cert_file"`
	KeyFile  string `json:"key_file"`
}

// HTTPConfig is the configuration of the http input.
type HTTPConfig struct {
	Address      string    `json:"address"`
	Path         string    `json:"path"`
	Auth         *HTTPAuth `json:"auth"`
	MaxBodyBytes int64     `json:"max_body_bytes"`
	SplitArray   bool      `json:"split_array"`
	CORSEnabled  bool      `json:"cors_enabled"`
	HTTPLimits
	TLS *HTTPTLS `json:"tls"`
}

// HTTP is an HTTP server input. Each accepted request waits for the
// acknowledgement of its batch before it is answered, which makes the
// client the holder of unacknowledged data: a 503 tells it to send again.
type HTTP struct {
	conf HTTPConfig
	log  *slog.Logger
	// Digests of the expected credentials, compared in constant time.
	token, user, pass [sha256.Size]byte
	tls               *tls.Config // nil: plain HTTP

	reqs      chan *httpRequest // handler -> Read
	closed    chan struct{}     // closed by Close
	closeOnce sync.Once

	pending    chan struct{} // a token per request held (max_pending_requests)
	ackTimeout time.Duration

	mu     sync.Mutex // guards ln, srv, served
	ln     net.Listener
	srv    *http.Server
	served chan struct{} // closed when Serve returned
}

// httpRequest is one request's batch on its way to Read and the answer on
// its way back.
type httpRequest struct {
	batch message.Batch
	done  chan error // buffered(1): the acknowledgement
}

// NewHTTP builds an http input from its configuration. It does not bind:
// Connect does.
func NewHTTP(conf map[string]any, res component.Resources) (component.Input, error) {
	c := HTTPConfig{Address: "127.0.0.1:8000", Path: "/", MaxBodyBytes: 1 << 20}
	c.HTTPLimits = defaultHTTPLimits()
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	var errs []error
	if _, _, err := net.SplitHostPort(c.Address); err != nil {
		errs = append(errs, fmt.Errorf("address: %q is not host:port", c.Address))
	}
	if !strings.HasPrefix(c.Path, "/") || strings.ContainsAny(c.Path, "{}?# \t\r\n") {
		errs = append(errs, fmt.Errorf("path: %q must start with / and hold no {, }, ?, # or spaces", c.Path))
	}
	if c.MaxBodyBytes < 1 {
		errs = append(errs, errors.New("max_body_bytes: must be at least 1"))
	}
	ackTimeout, lerrs := c.HTTPLimits.check()
	errs = append(errs, lerrs...)
	h := &HTTP{conf: c, log: res.Logger, reqs: make(chan *httpRequest), closed: make(chan struct{}), ackTimeout: ackTimeout}
	if len(lerrs) == 0 {
		h.pending = make(chan struct{}, c.MaxPendingRequests)
	}
	if a := c.Auth; a != nil {
		switch a.Type {
		case "bearer":
			if a.Token == "" {
				errs = append(errs, errors.New("auth.token: required with type bearer"))
			}
			h.token = sha256.Sum256([]byte(a.Token))
		case "basic":
			if a.Username == "" || a.Password == "" {
				errs = append(errs, errors.New("auth: username and password are required with type basic"))
			}
			h.user, h.pass = sha256.Sum256([]byte(a.Username)), sha256.Sum256([]byte(a.Password))
		default:
			errs = append(errs, fmt.Errorf("auth.type: %q is not bearer or basic", a.Type))
		}
	}
	if t := c.TLS; t != nil {
		if t.CertFile == "" || t.KeyFile == "" {
			errs = append(errs, errors.New("tls: cert_file and key_file are both required"))
		} else if conf, err := httpapi.ServerTLS(t.CertFile, t.KeyFile, res.Logger); err != nil {
			errs = append(errs, err) // names the tls certificate or key
		} else {
			h.tls = conf
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return h, nil
}

// Connect binds the listening address and starts serving; an address in use
// is an error.
func (h *HTTP) Connect(context.Context) error {
	ln, err := net.Listen("tcp", h.conf.Address)
	if err != nil {
		// An address that cannot be bound is the configuration's problem
		// (taken, or not this host's): fail the stream rather than retry.
		return component.Permanent(fmt.Errorf("http input: %w", err))
	}
	pattern := h.conf.Path
	if strings.HasSuffix(pattern, "/") {
		pattern += "{$}" // the path exactly, not the subtree
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+pattern, h.wrap(h.ingest))
	if h.conf.CORSEnabled {
		mux.Handle("OPTIONS "+pattern, h.wrap(h.preflight))
	}
	srv, lim := httpapi.NewServer(ln, mux, httpapi.ServerOptions{
		ErrorLog:  slog.NewLogLogger(h.log.Handler(), slog.LevelWarn),
		TLSConfig: h.tls,
	})
	h.mu.Lock()
	h.ln, h.srv, h.served = lim, srv, make(chan struct{})
	h.mu.Unlock()
	go func() {
		defer close(h.served)
		if err := httpapi.Serve(srv, lim); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.log.Error("http input stopped serving", "error", err)
		}
	}()
	return nil
}

// Addr is the bound address, nil before Connect.
func (h *HTTP) Addr() net.Addr {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ln == nil {
		return nil
	}
	return h.ln.Addr()
}

// Read blocks until a request arrives, ctx ends or the input is closed.
func (h *HTTP) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	select {
	case req := <-h.reqs:
		return req.batch, req.ack, nil
	case <-ctx.Done():
		return message.Batch{}, nil, ctx.Err()
	case <-h.closed:
		return message.Batch{}, nil, errInputClosed
	}
}

func (req *httpRequest) ack(_ context.Context, err error) error {
	select {
	case req.done <- err:
	default: // acknowledged twice: the first answer stands
	}
	return nil
}

// Close stops accepting requests, answers those in flight 503 and shuts the
// server down (forcefully once ctx ends).
func (h *HTTP) Close(ctx context.Context) error {
	h.closeOnce.Do(func() { close(h.closed) })
	h.mu.Lock()
	srv, served := h.srv, h.served
	h.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, srv.Close())
	}
	<-served
	return err
}

// httpError is an answer other than 200; msg is safe to show the client.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

var (
	errUnauthorized = &httpError{http.StatusUnauthorized, "missing or wrong credentials"}
	errTooLarge     = &httpError{http.StatusRequestEntityTooLarge, "request body too large"}
	errUnavailable  = &httpError{http.StatusServiceUnavailable, "the stream did not accept the data; retry later"}
)

// wrap turns a handler that returns an error into an http.Handler: one
// place writes every error answer.
func (h *HTTP) wrap(fn func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.conf.CORSEnabled {
			w.Header().Set("Access-Control-Allow-Origin", "*")
		}
		err := fn(w, r)
		if err == nil {
			return
		}
		var he *httpError
		if !errors.As(err, &he) {
			he = &httpError{http.StatusInternalServerError, "internal error"}
		}
		if he.code == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", h.challenge())
		}
		setRetryAfter(w, he)
		http.Error(w, he.msg, he.code)
	})
}

func (h *HTTP) challenge() string {
	if h.conf.Auth != nil && h.conf.Auth.Type == "basic" {
		return `Basic realm="flowplane"`
	}
	return `Bearer realm="flowplane"`
}

// ingest hands the body to Read and answers once the batch's fate is known,
// or 503 once ack_timeout passed. At most max_pending_requests requests are
// held (from reading the body to the answer); one more is answered 503 at
// once.
func (h *HTTP) ingest(w http.ResponseWriter, r *http.Request) error {
	if !h.authorized(r) {
		return errUnauthorized
	}
	release, ok := h.hold()
	if !ok {
		return errBusy
	}
	defer release()
	if r.ContentLength > h.conf.MaxBodyBytes {
		return errTooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.conf.MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return errTooLarge
		}
		return &httpError{http.StatusBadRequest, "could not read the request body"}
	}
	b, err := h.batch(body)
	if err != nil {
		return err
	}
	withTraceContext(b, r.Header)
	if b.Len() == 0 {
		release()
		w.WriteHeader(http.StatusOK) // an empty array: nothing to accept
		return nil
	}
	req := &httpRequest{batch: b, done: make(chan error, 1)}
	timeout := time.NewTimer(h.ackTimeout)
	defer timeout.Stop()
	select {
	case h.reqs <- req:
	case <-h.closed:
		return errUnavailable
	case <-timeout.C:
		return errAckTimeout // the stream did not take the data: back-pressure
	case <-r.Context().Done():
		return nil // the client left before the stream took the data
	}
	select {
	case err = <-req.done:
	case <-h.closed:
		select { // an acknowledgement that already arrived still counts
		case err = <-req.done:
		default:
			return errUnavailable
		}
	case <-timeout.C:
		select {
		case err = <-req.done:
		default:
			return errAckTimeout
		}
	case <-r.Context().Done():
		return nil
	}
	if err != nil {
		return errUnavailable
	}
	release() // before the answer: a client answered may send again at once
	w.WriteHeader(http.StatusOK)
	return nil
}

// batch turns a body into a batch: one message, or one per element of a
// JSON array with split_array.
func (h *HTTP) batch(body []byte) (message.Batch, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if !h.conf.SplitArray || len(trimmed) == 0 || trimmed[0] != '[' {
		return message.Batch{Messages: []message.Message{h.message(body)}}, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(body, &elems); err != nil {
		return message.Batch{}, &httpError{http.StatusBadRequest, "body is not a valid JSON array"}
	}
	msgs := make([]message.Message, len(elems))
	for i, e := range elems {
		msgs[i] = h.message(e)
	}
	return message.Batch{Messages: msgs}, nil
}

// withTraceContext copies the request's W3C trace context (traceparent,
// tracestate) into the metadata of every message of b, where a traced
// stream takes its parent from and a job's source reads it.
func withTraceContext(b message.Batch, h http.Header) {
	tp := h.Get(tracing.TraceParent)
	if tp == "" {
		return
	}
	ts := h.Get(tracing.TraceState)
	for i := range b.Messages {
		b.Messages[i].SetMeta(tracing.TraceParent, tp)
		if ts != "" {
			b.Messages[i].SetMeta(tracing.TraceState, ts)
		}
	}
}

func (h *HTTP) message(b []byte) message.Message {
	m := message.New(b)
	m.Meta.Source = "http"
	return m
}

// authorized compares credentials in constant time (of their digests, so
// that the length of the secret does not leak either).
func (h *HTTP) authorized(r *http.Request) bool {
	a := h.conf.Auth
	if a == nil {
		return true
	}
	switch a.Type {
	case "bearer":
		v := r.Header.Get("Authorization")
		const scheme = "bearer "
		if len(v) <= len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
			return false
		}
		got := sha256.Sum256([]byte(v[len(scheme):]))
		return subtle.ConstantTimeCompare(got[:], h.token[:]) == 1
	case "basic":
		u, p, ok := r.BasicAuth()
		if !ok {
			return false
		}
		gu, gp := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
		return subtle.ConstantTimeCompare(gu[:], h.user[:])&subtle.ConstantTimeCompare(gp[:], h.pass[:]) == 1
	}
	return false
}

// preflight answers a CORS preflight request.
func (h *HTTP) preflight(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Access-Control-Allow-Methods", "POST, OPTIONS")
	w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
	w.WriteHeader(http.StatusNoContent)
	return nil
}
