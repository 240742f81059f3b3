package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/store"
)

// APIPrefix is the default prefix of the operator API (health_check.api_prefix).
const APIPrefix = "/api/v1"

// MaxBodyBytes caps a Hub API request body (API.md).
const MaxBodyBytes = 4 << 20

// shutdownGrace bounds how long Run waits for requests in flight at shutdown.
const shutdownGrace = 10 * time.Second

// Options configure a Hub. Only Settings is required.
type Options struct {
	Settings Settings
	// Logger receives start-up, restore and 500 causes; nil means slog.Default().
	Logger *slog.Logger
	// Now is the Hub's clock; nil means time.Now.
	Now func() time.Time
	// NewID makes intent ids; nil means UUIDv7 strings.
	NewID func() string
	// Version is the build version shown by GET /system.
	Version string
}

// Hub is the fleet's control-plane server: the durable store, the state
// restored from it, and the operator API over HTTP.
type Hub struct {
	opts      Options
	log       *slog.Logger
	st        *store.Store
	router    *httpapi.Router
	handler   http.Handler
	registry  *prometheus.Registry
	accepted  prometheus.Counter
	startedAt time.Time

	// snapshot reads the restore state; tests replace it to control restore.
	snapshot func(context.Context) (store.Snapshot, error)

	ready      atomic.Bool
	mu         sync.Mutex
	restoreErr error
	restored   store.Snapshot
}

// New opens the store named by o.Settings.Storage ("" is a volatile
// database) and restores the Hub's state from it before anything is served.
// A store that cannot be opened is an error; a restore that fails is logged
// and leaves the Hub answering 503 recovering (never a partial view).
func New(ctx context.Context, o Options) (*Hub, error) {
	h, err := open(ctx, o)
	if err != nil {
		return nil, err
	}
	h.restore(ctx)
	return h, nil
}

// open builds the Hub over its opened store without restoring it.
func open(ctx context.Context, o Options) (*Hub, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewID == nil {
		o.NewID = newUUIDv7
	}
	st, err := store.Open(ctx, o.Settings.Storage)
	if err != nil {
		return nil, fmt.Errorf("hub: open storage: %w", err)
	}
	h := &Hub{opts: o, log: o.Logger, st: st, startedAt: o.Now(), snapshot: st.Snapshot}
	h.registry = prometheus.NewRegistry()
	h.accepted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "svc_hub_intents_accepted_total",
		Help: "Desired-state intents durably accepted since the Hub started.",
	})
	h.registry.MustRegister(h.accepted, collectors.NewGoCollector())
	var auth httpapi.Authenticator
	if o.Settings.OperatorToken != "" {
		auth = httpapi.BearerToken(o.Settings.OperatorToken, "operator")
	}
	h.router = httpapi.NewRouter(h.routes(), httpapi.Options{
		Logger:       o.Logger,
		Auth:         auth,
		MaxBodyBytes: MaxBodyBytes,
		Idempotency:  st.Idempotency(o.Now),
	})
	h.handler = h.gate(h.router)
	return h, nil
}

// restore reads the durable state and, when it is whole, opens the API.
func (h *Hub) restore(ctx context.Context) {
	snap, err := h.snapshot(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.restoreErr = err
		h.log.Error("hub: restore failed; serving 503 recovering", "err", err)
		return
	}
	h.restored = snap
	h.restoreErr = nil
	h.ready.Store(true)
	h.log.Info("hub: state restored", "nodes", len(snap.Nodes), "resources", len(snap.Resources),
		"pending_outbox", len(snap.PendingOutbox), "active_attempts", len(snap.ActiveAttempts),
		"last_event_id", snap.LastEventID)
}

// Ready reports whether the state was restored and the API is open.
func (h *Hub) Ready() bool { return h.ready.Load() }

// Handler returns the Hub's HTTP handler: the operator API, the probes and
// /metrics, behind the recovery gate.
func (h *Hub) Handler() http.Handler { return h.handler }

// Routes returns the operator route table, for tests and documentation.
func (h *Hub) Routes() []httpapi.Route { return h.router.Routes() }

// Run binds o.Settings.Address and serves until ctx ends, then shuts down
// gracefully. It does not close the store: call Close after Run returns.
func (h *Hub) Run(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", h.opts.Settings.Address)
	if err != nil {
		return fmt.Errorf("hub: listen: %w", err)
	}
	return h.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends, then shuts down gracefully. It closes ln.
func (h *Hub) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           h.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(h.log.Handler(), slog.LevelWarn),
	}
	h.log.Info("hub: listening", "address", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("hub: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("hub: shutdown: %w", err)
	}
	return nil
}

// Close closes the store. Requests served afterwards answer 503.
func (h *Hub) Close() error { return h.st.Close() }

// gate answers 503 recovering on every route but the probes until the
// state is restored.
func (h *Hub) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.ready.Load() || r.URL.Path == "/liveness" || r.URL.Path == "/readiness" {
			next.ServeHTTP(w, r)
			return
		}
		id := r.Header.Get(httpapi.HeaderCorrelationID)
		if !validCorrelationID(id) {
			id = httpapi.NewCorrelationID()
		}
		w.Header().Set(httpapi.HeaderCorrelationID, id)
		r = r.WithContext(httpapi.ContextWithCorrelationID(r.Context(), id))
		e := httpapi.Unavailable(CodeRecovering, "the Hub is restoring its durable state")
		e.Header = http.Header{"Retry-After": {"1"}}
		httpapi.WriteError(w, r, h.log, e)
	})
}

func validCorrelationID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	return !strings.ContainsFunc(id, func(c rune) bool { return c < 0x21 || c > 0x7e })
}

func newUUIDv7() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}
