package hub

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
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

	"github.com/flowplane/flowplane/internal/access"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/eventlog"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/fleet"
	"github.com/flowplane/flowplane/internal/hub/history"
	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/idp"
	"github.com/flowplane/flowplane/web/console"
)

// APIPrefix is the default prefix of the operator API (health_check.api_prefix).
const APIPrefix = "/api/v1"

// DefaultIntentTTL is how long an accepted intent may wait for its node
// before it fails (node_unavailable or expired).
const DefaultIntentTTL = 24 * time.Hour

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
	// Limits bound dispatch; the zero value means reconcile.DefaultLimits().
	Limits reconcile.Limits
	// KeepAlive is the SSE keep-alive interval; 0 means 15 s.
	KeepAlive time.Duration
	// Registry is the component set of the fleet image, shown by
	// /components and /schema; nil means component.Default.
	Registry *component.Registry
	// Server bounds the listener's connections and timeouts; zero values
	// take httpapi's defaults (docs/api-conventions.md).
	Server httpapi.ServerOptions
	// LookupEnv reads the Hub's SVC_SECRET_<NAME> variables, from which it
	// pre-resolves ${secret:NAME} at dispatch; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// HubID names this Hub as a holder of the leader lease; "" means a
	// fresh id (NewID) per process.
	HubID string
	// HistoryStep is the step of the in-memory rate history (GET
	// .../history); 0 means 10 s. It keeps 360 steps.
	HistoryStep time.Duration
	// sharedLease makes the Hub treat its store as shared (tests: a SQLite
	// file plays a database other Hubs use).
	sharedLease bool
}

// Hub is the fleet's control-plane server: the durable store, the live
// fleet rebuilt from it (package fleet), the loops (reconciler, event pump,
// convergence worker), and the operator and agent APIs.
type Hub struct {
	opts Options
	log  *slog.Logger
	st   *store.Store
	// taps relays live taps between operators and Agents (tap.go).
	taps *tapRelay
	// history is the bounded rate history of the fleet, nodes, streams
	// and jobs; historyLoop feeds it.
	history *history.Recorder
	router  *httpapi.Router
	handler http.Handler
	// openapi builds the OpenAPI document of the route table once.
	openapi   func() ([]byte, error)
	metrics   *hubMetrics
	startedAt time.Time
	prefix    string
	limits    reconcile.Limits
	keepAlive time.Duration
	schema    map[string]any
	tls       *tls.Config // nil: plain HTTP
	// mutualTLS: SVC_HUB_CLIENT_CA is set and the agent API requires
	// client certificates naming the node.
	mutualTLS bool
	// auth resolves operator requests to principals; tokenFile, when
	// set, is the named tokens it reads (polled while serving).
	auth      *operatorAuth
	tokenFile *access.TokenFile
	oidc      *idp.Verifier // nil: no identity provider; refreshed while serving
	signIn    *signIn       // nil: the console signs in with tokens only
	// nodeTokenDigest is the SHA-256 of the node token in force, to which
	// every session is bound (sessionBinding).
	nodeTokenDigest [sha256.Size]byte

	fleet *fleet.Fleet
	// lead is this Hub's part in the leader lease: only the leader runs
	// the reconciler and the convergence worker.
	lead *leadership
	// admission: registration rate per address and SVC_HUB_MAX_NODES.
	admission *admission
	// nodeEvents is each node's budget of events (nodeEventRate).
	nodeEvents *buckets
	events     *eventlog.Log // live tail of the durable event log
	pumpMu     sync.Mutex    // serializes inserting into events: the store's event sink and the pump

	// peers is the work the other Hubs' change notes leave (peers.go).
	peers   *peerWork
	nudgec  chan struct{} // wakes the reconciler
	pumpc   chan struct{} // wakes the event pump
	conv    *convergeWork // the convergence worker's work and memory
	closing chan struct{} // closed when serving ends: event streams return
	once    sync.Once

	lastExpiryScan atomic.Int64
	lastPass       atomic.Int64
	storageDown    atomic.Bool

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
	if o.Registry == nil {
		o.Registry = component.Default
	}
	if o.Limits == (reconcile.Limits{}) {
		o.Limits = reconcile.DefaultLimits()
	}
	if err := o.Limits.Validate(); err != nil {
		return nil, err
	}
	if o.Settings.IntentTTL <= 0 {
		o.Settings.IntentTTL = DefaultIntentTTL
	}
	tlsConf, err := httpapi.ServerTLS(o.Settings.TLSCert, o.Settings.TLSKey, o.Logger)
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	if o.Settings.ClientCA != "" {
		if tlsConf == nil {
			return nil, fmt.Errorf("hub: %s needs %s and %s", EnvClientCA, EnvTLSCert, EnvTLSKey)
		}
		if err := requireClientCertificates(tlsConf, o.Settings.ClientCA); err != nil {
			return nil, fmt.Errorf("hub: %w", err)
		}
	}
	st, err := store.Open(ctx, o.Settings.Storage)
	if err != nil {
		return nil, fmt.Errorf("hub: open storage: %w", err)
	}
	h := &Hub{opts: o, log: o.Logger, st: st, startedAt: o.Now(), snapshot: st.Snapshot,
		prefix: o.Settings.prefix(), limits: o.Limits, keepAlive: o.KeepAlive, tls: tlsConf,
		fleet: fleet.New(o.Now), admission: newAdmission(o.Settings), nodeEvents: newBuckets(nodeEventRate, nodeEventBurst), peers: newPeerWork(), taps: newTapRelay(), nudgec: make(chan struct{}, 1), pumpc: make(chan struct{}, 1), conv: newConvergeWork(),
		history: history.New(history.DefaultSize, history.DefaultMaxSeries),
		closing: make(chan struct{}), mutualTLS: o.Settings.ClientCA != "", nodeTokenDigest: sha256.Sum256([]byte(o.Settings.NodeToken))}
	st.SetEventSink(h.committed)
	h.lead = newLeadership(o, st.Shared() || o.sharedLease)
	st.SetOrigin(h.lead.id)
	if !h.lead.shared {
		if err := h.takeLease(ctx); err != nil {
			_ = st.Close()
			return nil, fmt.Errorf("hub: take the leader lease: %w", err)
		}
	}
	h.metrics = newHubMetrics(h)
	h.schema = config.Schema(o.Registry)
	if err := h.setupAuth(ctx); err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("hub: %w", err)
	}
	var auth httpapi.PrincipalAuthenticator
	if h.auth.configured() {
		auth = h.auth.authenticate
	}
	h.router = httpapi.NewRouter(h.routes(), httpapi.Options{
		Logger:         o.Logger,
		Principals:     auth,
		AllowedOrigins: o.Settings.CORSOrigins,
		MaxBodyBytes:   MaxBodyBytes,
		Idempotency:    durableIdempotency{st: st, now: o.Now},
	})
	h.handler = h.gate(h.router)
	return h, nil
}

// restore reads the durable state and, when it is whole, rebuilds the
// in-memory indexes (nodes, command queues, attempts in flight, the event
// tail, convergence) and opens the API.
func (h *Hub) restore(ctx context.Context) {
	err := h.rebuild(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.restoreErr = err
		h.log.Error("hub: restore failed; serving 503 recovering", "err", err)
		return
	}
	h.restoreErr = nil
	h.ready.Store(true)
	snap := h.restored
	h.log.Info("hub: state restored", "nodes", len(snap.Nodes), "resources", len(snap.Resources),
		"pending_outbox", len(snap.PendingOutbox), "active_attempts", len(snap.ActiveAttempts),
		"last_event_id", snap.LastEventID)
}

func (h *Hub) rebuild(ctx context.Context) error {
	snap, err := h.snapshot(ctx)
	if err != nil {
		return err
	}
	// The live event log continues the durable ids; its tail is the
	// retained rows.
	oldest, _, err := h.st.EventIDs(ctx)
	if err != nil {
		return err
	}
	h.pumpMu.Lock()
	h.events = eventlog.New(eventlog.Options{Capacity: store.MaxEvents, Now: h.opts.Now, LastID: max(oldest-1, 0)})
	h.pumpMu.Unlock()
	if err := h.pump(ctx); err != nil {
		return err
	}
	leading, epoch := h.lead.isLeading()
	if leading {
		ctx = store.WithEpoch(ctx, epoch)
	}
	if err := h.restoreFleet(ctx, snap, leading); err != nil {
		return err
	}
	h.mu.Lock()
	h.restored = snap
	h.mu.Unlock()
	return nil
}

// rebuildFleet rebuilds the fleet view from the store, for a Hub that
// starts leading (withFlights) or stands by.
func (h *Hub) rebuildFleet(ctx context.Context, withFlights bool) error {
	snap, err := h.snapshot(ctx)
	if err != nil {
		return err
	}
	return h.restoreFleet(ctx, snap, withFlights)
}

// restoreFleet rebuilds the nodes, the command queues and attempts in
// flight and the convergence memory from snap and the store. withFlights
// is for a leader: a standby keeps no attempts in flight and records no
// convergence events. Commands carry the epoch of ctx (store.WithEpoch).
func (h *Hub) restoreFleet(ctx context.Context, snap store.Snapshot, withFlights bool) error {
	active, err := h.st.ActiveCommands(ctx)
	if err != nil {
		return err
	}
	if !withFlights {
		active = nil
	}
	observed, err := h.st.AllObservedStreams(ctx)
	if err != nil {
		return err
	}
	pending := make([]string, len(snap.PendingOutbox))
	for i, e := range snap.PendingOutbox {
		pending[i] = e.NodeID
	}
	epoch, _ := store.EpochFrom(ctx)
	flights, err := h.flightsOf(ctx, active, epoch)
	if err != nil {
		return err
	}
	if h.ready.Load() {
		h.fleet.Reload(snap.Nodes, observed, pending, flights)
	} else {
		h.fleet.Restore(snap.Nodes, observed, pending, flights)
	}
	if err := h.primeConvergence(ctx, withFlights); err != nil {
		return err
	}
	return nil
}

// flightsOf builds the commands of attempts in flight as the store holds
// them, at leader epoch epoch.
func (h *Hub) flightsOf(ctx context.Context, active []store.ActiveCommand, epoch int64) ([]fleet.Flight, error) {
	var kinds, ops, jobIDs []string
	for _, c := range active {
		kinds, ops, jobIDs = append(kinds, c.Intent.Kind), append(ops, c.Intent.Operation), append(jobIDs, c.Intent.ResourceID)
	}
	splits, err := h.splitsOf(ctx, kinds, ops, jobIDs)
	if err != nil {
		return nil, err
	}
	var flights []fleet.Flight
	for _, c := range active {
		cmd := commandFromIntent(c.Intent, splitFor(splits, c.Intent.ResourceID), c.Attempt.ID, c.Attempt.ExpiresAt)
		cmd.Epoch = epoch
		if configKind(c.Intent.Kind) && h.configCommand(ctx, &cmd) != nil {
			// Not sendable any more (the Hub lost a secret across the
			// restart): the attempt times out and the retry fails it.
			continue
		}
		flights = append(flights, fleet.Flight{Command: cmd, State: c.Attempt.State, DispatchedAt: c.Attempt.CreatedAt, ExpiresAt: c.Attempt.ExpiresAt})
	}
	return flights, nil
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

// Serve serves on ln until ctx ends, then shuts down gracefully. It closes
// ln. While it serves, the event pump runs, and while the Hub leads, the
// reconciler and the convergence worker (leader.go).
func (h *Hub) Serve(ctx context.Context, ln net.Listener) error {
	loops, stopLoops := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if h.ready.Load() {
		// The reconciler and the convergence worker run only while this Hub
		// leads (leader.go); the lease loop starts and stops them.
		run := []func(context.Context){h.pumpLoop, h.historyLoop}
		if h.lead.shared {
			run = append(run, h.leaseLoop)
		}
		if h.st.Shared() {
			// Agents and operators may call the other Hubs too.
			run = append(run, h.watchPeers, h.peerLoop)
		}
		if h.tokenFile != nil {
			run = append(run, func(ctx context.Context) { h.tokenFile.Poll(ctx, tokensPollInterval) })
		}
		if h.oidc != nil {
			run = append(run, h.oidc.Run)
		}
		for _, loop := range run {
			wg.Add(1)
			go func() { defer wg.Done(); loop(loops) }()
		}
		if !h.lead.shared {
			// The term taken at open (takeLease) lasts until the process ends.
			h.startLeading(loops)
		}
	}
	defer func() {
		stopLoops()
		wg.Wait()
		if !h.lead.shared {
			h.stopLeaderLoops() // the term goes on if Serve runs again
		}
	}()
	so := h.opts.Server
	so.ErrorLog = slog.NewLogLogger(h.log.Handler(), slog.LevelWarn)
	so.TLSConfig = h.tls
	srv, lim := httpapi.NewServer(ln, h.handler, so)
	// Parked long-polls (fleet.Fleet.Poll) go back to the server through pl, above
	// the connection caps, which keep counting them while parked.
	pl := fleet.NewListener(lim)
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		lim.ConnState(c, st)
		pl.ConnState(c, st)
	}
	h.log.Info("hub: listening", "address", ln.Addr().String(), "tls", h.tls != nil)
	h.fleet.ParkOn(pl)
	errc := make(chan error, 1)
	go func() { errc <- httpapi.Serve(srv, pl) }()
	select {
	case err := <-errc:
		return fmt.Errorf("hub: serve: %w", err)
	case <-ctx.Done():
	}
	h.once.Do(func() { close(h.closing) })
	h.fleet.Shutdown()
	pl.CloseReturned()
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

// gate answers 503 recovering on every route but the probes and the
// console's files until the state is restored (the console then says the
// Hub is restoring).
func (h *Hub) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.ready.Load() || r.URL.Path == "/liveness" || r.URL.Path == "/readiness" || strings.HasPrefix(r.URL.Path, console.Path) {
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
