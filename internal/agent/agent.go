package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/eventlog"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/policy"
	"github.com/flowplane/flowplane/internal/secretref"
	"github.com/flowplane/flowplane/internal/wire"
)

// Node is what the Agent needs of its node; *node.Node implements it.
type Node interface {
	System() node.System
	Streams() []wire.Stream
	ConfigVersion() string
	StreamAction(id, action string, req node.Request) (wire.Operation, wire.StreamDesired, error)
	AdoptHubDesire(id, state string, generation int64, actionID string) error
	WaitOperation(ctx context.Context, id string) (wire.Operation, error)
	// Configuration commands (node/hub.go).
	ValidateHub(doc node.Document, secrets map[string]string) (node.Report, error)
	ApplyHub(ctx context.Context, doc node.Document, secrets map[string]string, hubVersion string, req node.Request) (wire.ConfigApplyResult, error)
	ReapplyVersion(ctx context.Context, versionID string, req node.Request) (wire.ConfigApplyResult, error)
	DiffTexts(from, to wire.ConfigDiffSide) (node.DiffReport, error)
}

var _ Node = (*node.Node)(nil)

// Defaults of the Options' timings.
const (
	DefaultPollWait       = 25 * time.Second
	DefaultReportPeriod   = 5 * time.Second
	DefaultReportDebounce = 20 * time.Millisecond
	DefaultRequestTimeout = 10 * time.Second
	DefaultMinBackoff     = 100 * time.Millisecond
	DefaultMaxBackoff     = 10 * time.Second
)

// Options configure an Agent. HubURLs, NodeToken, NodeID, BootID, StateDir
// and Node are required.
type Options struct {
	HubURLs   []string
	NodeToken string
	NodeID    string
	// BootID is the node process's boot id (the one GET /system shows).
	BootID  string
	Version string
	// LeaseTTL and SessionTTL are agent_lease_ttl_ms and
	// agent_session_ttl_ms.
	LeaseTTL   time.Duration
	SessionTTL time.Duration
	// DataAddress is data_host:data_port, or empty without a data plane.
	// It and network_shuffle are advertised only when Engine has a data
	// plane (engine.Options.DataPlane): a node whose data plane is not
	// listening is never offered a split job.
	DataAddress string
	// DataFingerprint is advertised with DataAddress; New takes it from
	// the Engine's data plane (its certificate's fingerprint).
	DataFingerprint string
	// StateDir is the node's state directory; the Agent keeps its own
	// state under StateDir/agent.
	StateDir string
	Node     Node
	// Events, when set, wakes the reporter on every node event (stream
	// state changes, operations): reports follow changes within
	// ReportDebounce instead of ReportPeriod.
	Events *eventlog.Log
	Logger *slog.Logger
	// Now is the clock of session renewal and command expiry.
	Now func() time.Time
	// HTTPClient makes the calls to the Hub; nil means one that verifies
	// https:// Hubs against HubCAFile (the system roots when empty).
	HTTPClient *http.Client
	// HubCAFile is health_check.hub_ca_file; used only when HTTPClient is nil.
	HubCAFile string
	// HubClientCertFile and HubClientKeyFile are health_check's
	// hub_client_cert_file and hub_client_key_file: the client certificate
	// presented to a Hub that requires one (mutual TLS), reloaded when the
	// files change. Used only when HTTPClient is nil.
	HubClientCertFile, HubClientKeyFile string

	PollWait       time.Duration // long-poll wait of GET agent/commands (at most wire.MaxWaitMS)
	ReportPeriod   time.Duration // a report at least this often
	ReportDebounce time.Duration // a change is reported this long after it
	RequestTimeout time.Duration // bound of each call (long-polls add their wait)
	MinBackoff     time.Duration // jittered capped exponential backoff bounds
	MaxBackoff     time.Duration
	// Rand is the jitter source, in [0, 1); nil means math/rand.
	Rand func() float64
	// IdentityRetry is how often the Agent registers again after the Hub
	// refused its node credential (403 node_identity_mismatch); 0 means
	// DefaultIdentityRetry.
	IdentityRetry time.Duration

	// Engine, when set, runs the jobs the Hub places on the node: the
	// Agent then advertises job_control and executes job commands. The
	// job specs are materialized as the node's configuration is, with
	// Registry (nil: component.Default) and Resolver (the node's secret
	// resolver); Secrets, when set, is the node's log redactor, which the
	// secret values of Hub jobs join.
	Engine   *engine.Engine
	Registry *component.Registry
	Resolver secretref.Resolver
	Secrets  *config.Redactor
	// Policy is the node's remote policy: job specs meet it before they
	// materialize, and the capabilities it switches off are neither
	// advertised nor executed. nil checks nothing and switches nothing
	// off (tests); a node process always sets one.
	Policy *policy.Policy
}

// ConfigOptions are the Options a node's health_check section gives.
func ConfigOptions(hc config.HealthCheck) Options {
	o := Options{
		HubURLs: hc.HubURLs, NodeToken: hc.NodeToken, HubCAFile: hc.HubCAFile,
		HubClientCertFile: hc.HubClientCertFile, HubClientKeyFile: hc.HubClientKeyFile,
		LeaseTTL:   time.Duration(hc.AgentLeaseTTLMs) * time.Millisecond,
		SessionTTL: time.Duration(hc.AgentSessionTTLMs) * time.Millisecond,
	}
	if hc.DataPort > 0 && hc.DataHost != "" {
		o.DataAddress = net.JoinHostPort(hc.DataHost, strconv.Itoa(hc.DataPort))
	}
	return o
}

// Agent connects one node to its Hub. Create it with New, run it with Run.
type Agent struct {
	o    Options
	log  *slog.Logger
	st   *store
	c    *client
	x    *executor
	rep  *reporter
	jrep *jobReporter // nil without an Engine
	caps []string
	b    backoff
	// credential is the node credential (StateDir/agent/node_credential).
	credential string
}

// New returns an Agent over the node, with the state kept in
// StateDir/agent read back.
func New(o Options) (*Agent, error) {
	if len(o.HubURLs) == 0 || o.NodeToken == "" || o.NodeID == "" || o.BootID == "" || o.StateDir == "" || o.Node == nil {
		return nil, errors.New("agent: HubURLs, NodeToken, NodeID, BootID, StateDir and Node are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HTTPClient == nil {
		tlsConf, err := httpapi.ClientTLS(o.HubCAFile)
		if err != nil {
			return nil, fmt.Errorf("agent: health_check.hub_ca_file: %w", err)
		}
		if tlsConf, err = withClientCertificate(tlsConf, o.HubClientCertFile, o.HubClientKeyFile, o.Logger); err != nil {
			return nil, err
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 8 // poll, heartbeat, report and results run at once
		if tlsConf != nil {
			tr.TLSClientConfig = tlsConf
		}
		o.HTTPClient = &http.Client{Transport: tr}
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 15 * time.Second
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = time.Hour
	}
	defaults := []struct {
		d *time.Duration
		v time.Duration
	}{
		{&o.PollWait, DefaultPollWait}, {&o.ReportPeriod, DefaultReportPeriod}, {&o.ReportDebounce, DefaultReportDebounce},
		{&o.RequestTimeout, DefaultRequestTimeout}, {&o.IdentityRetry, DefaultIdentityRetry}, {&o.MinBackoff, DefaultMinBackoff}, {&o.MaxBackoff, DefaultMaxBackoff},
	}
	for _, d := range defaults {
		if *d.d <= 0 {
			*d.d = d.v
		}
	}
	o.PollWait = min(o.PollWait, wire.MaxWaitMS*time.Millisecond)
	log := o.Logger.With("component", "agent")
	bases := make([]string, len(o.HubURLs))
	for i, u := range o.HubURLs {
		b, err := hubBase(u)
		if err != nil {
			return nil, err
		}
		bases[i] = b
		if plainBeyondLoopback(u) {
			log.Warn("hub url is plain http:// beyond loopback: the node token and session tokens cross the network unencrypted; use https://", "hub_url", redactURL(u))
		}
	}
	st, err := openStore(filepath.Join(o.StateDir, "agent"), o.NodeID, log)
	if err != nil {
		return nil, err
	}
	cred, err := nodeCredential(filepath.Join(o.StateDir, "agent"))
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if o.Engine == nil || o.Engine.DataPlane() == nil {
		o.DataAddress = ""
	}
	o.DataFingerprint = ""
	if o.DataAddress != "" {
		o.DataFingerprint = o.Engine.DataPlane().Fingerprint()
	}
	a := &Agent{o: o, log: log, st: st, b: newBackoff(o.MinBackoff, o.MaxBackoff, o.Rand), credential: cred}
	a.caps = capabilities(o.Node.System().Capabilities, o.DataAddress, o.Engine != nil, o.Policy)
	if _, ok := o.Node.(Tapper); ok {
		a.caps = append(a.caps, wire.CapabilityTap)
	}
	a.c = &client{
		urls: o.HubURLs, bases: bases, nodeToken: o.NodeToken, httpc: o.HTTPClient, log: log, now: o.Now,
		backoff: a.b, timeout: o.RequestTimeout, ttl: o.SessionTTL, leaseTTL: o.LeaseTTL,
		registerBody: a.registerBody, regSem: make(chan struct{}, 1), identityRetry: o.IdentityRetry, epochs: &epochs{},
	}
	a.rep = newReporter(func() wire.Report { return snapshot(o.Node, a.x.desires(), a.x.configuration(), o.BootID) }, a.sendReport, o.ReportDebounce, o.ReportPeriod, a.b)
	a.x = &executor{
		node: o.Node, st: st, now: o.Now, log: log, wake: a.rep.wakeNow, inflight: map[string][]string{}, epochs: a.c.epochs,
		post:   func(ctx context.Context, id string, res wire.CommandResult) { postResult(ctx, a.c, a.b, log, id, res) },
		nodeID: o.NodeID, policy: o.Policy, jobTail: map[string]chan struct{}{}, triggers: map[string]taken{}, taking: map[string]int{},
		streamLedger: ledger[Desire]{table: st.streams, unposted: map[string]*held[Desire]{}, wake: a.rep.wakeNow,
			unwritten: "agent state not written; a restart may report an older generation", idKey: "resource_id"},
		jobLedger: ledger[JobDesire]{table: st.jobs, unposted: map[string]*held[JobDesire]{}, wakeAlways: true,
			unwritten: "agent state not written; a restart may start an older job desire", what: "job ", idKey: "job_id"},
	}
	a.c.onRegister = a.rep.forceSend
	if o.Engine != nil {
		if o.Registry == nil {
			o.Registry = component.Default
		}
		a.x.jobs = &jobControl{eng: o.Engine, reg: o.Registry, resolver: o.Resolver, secrets: o.Secrets}
		a.jrep = newJobReporter(a.x, o.BootID, a.sendJobObservations, o.ReportDebounce, o.ReportPeriod, a.b, o.Now)
		a.x.jobLedger.wake = a.jrep.wakeNow
		a.c.onRegister = func() {
			a.rep.forceSend()
			a.jrep.forceSend()
		}
	}
	return a, nil
}

// capabilities is what the Agent advertises: stream and configuration
// control, job control with a job engine, the component set (kind:name, as GET /system lists
// it) and, with a data address, the network shuffle. The remote policy
// may switch configuration and job control off.
func capabilities(components []string, dataAddress string, jobs bool, pol *policy.Policy) []string {
	caps := []string{wire.CapabilityStreamControl}
	if pol == nil || pol.ConfigControl() {
		caps = append(caps, wire.CapabilityConfigControl)
	}
	if jobs && (pol == nil || pol.JobControl()) {
		caps = append(caps, wire.CapabilityJobControl)
	}
	caps = append(caps, components...)
	if dataAddress != "" {
		caps = append(caps, wire.CapabilityNetworkShuffle)
	}
	return caps
}

func (a *Agent) registerBody() wire.RegisterRequest {
	return wire.RegisterRequest{
		NodeID: a.o.NodeID, BootID: a.o.BootID, Version: a.o.Version, ProtocolVersion: wire.ProtocolVersion,
		Capabilities: a.caps, DataAddress: a.o.DataAddress, DataFingerprint: a.o.DataFingerprint,
		LeaseTTLMS: a.o.LeaseTTL.Milliseconds(), SessionTTLMS: a.o.SessionTTL.Milliseconds(),
		NodeCredential: a.credential,
	}
}

// Stopped returns the streams the Hub last wanted stopped, as recorded
// before this process started. A node passes them to
// engine.ApplyStopped at start-up so that they never run.
func (a *Agent) Stopped() []string {
	var ids []string
	for id, d := range a.st.streams.all() {
		if d.State == node.DesiredStopped {
			ids = append(ids, id)
		}
	}
	return ids
}

// Status is the Agent's connection as GET /system shows it.
func (a *Agent) Status() node.AgentStatus {
	hubURL, connected, s, lastErr, lastErrAt := a.c.status()
	st := node.AgentStatus{HubURL: hubURL, Connected: connected, LastError: lastErr}
	if s.token != "" {
		st.SessionExpiresAt, st.RegisteredAt = wire.At(s.expiresAt), wire.At(s.registeredAt)
	}
	if !lastErrAt.IsZero() {
		st.LastErrorAt = wire.At(lastErrAt)
	}
	return st
}

// Run re-applies the recorded Hub desires to the node, then registers,
// heartbeats, reports and executes commands until ctx ends. Lost
// connectivity is retried forever and never touches the streams. It
// returns nil once ctx ended and its work stopped.
func (a *Agent) Run(ctx context.Context) error {
	a.log.Info("agent starting", "hubs", len(a.o.HubURLs), "hub_url", redactURL(a.o.HubURLs[0]), "node_id", a.o.NodeID)
	a.reapply(ctx)
	loops := []func(context.Context){a.heartbeats, a.rep.run, a.poll, a.watchEvents, a.pollTaps}
	if a.jrep != nil {
		changes, stop := a.o.Engine.JobChanges()
		defer stop()
		a.reapplyJobs(ctx)
		loops = append(loops, func(ctx context.Context) { a.jrep.run(ctx, changes) })
	}
	var wg sync.WaitGroup
	for _, loop := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop(ctx)
		}()
	}
	wg.Wait()
	a.x.tasks.Wait()
	a.o.HTTPClient.CloseIdleConnections()
	a.log.Info("agent stopped")
	return nil
}

// reapply carries out, through the node, each recorded desire the node
// does not hold. At boot every stream runs, save those held by
// engine.ApplyStopped (which the node itself still wants running): this
// stops, as node operations, the streams the Hub wants stopped, and starts
// a stream the Hub wants running that is stopped. A stream already as the
// Hub wants it takes the Hub's desire as it is. Either way the node shows
// the Hub's generation, under authority hub.
func (a *Agent) reapply(ctx context.Context) {
	desires := a.st.streams.all()
	for _, v := range a.o.Node.Streams() {
		d, ok := desires[v.ID]
		var action string
		switch {
		case !ok:
			continue
		case d.State == node.DesiredStopped && (v.Desired.State != node.DesiredStopped || v.Observed.State != "stopped"):
			action = node.OpStop
		case d.State == node.DesiredRunning && v.Observed.State == "stopped":
			action = node.OpStart
		default:
			if err := a.o.Node.AdoptHubDesire(v.ID, d.State, d.Generation, d.ActionID); err != nil {
				a.log.Error("could not take the Hub's desire", "stream", v.ID, "generation", d.Generation, "err", err)
			}
			continue
		}
		rec, _, err := a.o.Node.StreamAction(v.ID, action, node.Request{Actor: actor, CorrelationID: d.CommandID, HubGeneration: d.Generation})
		if err == nil {
			rec, err = a.o.Node.WaitOperation(ctx, rec.OperationID)
		}
		switch {
		case err != nil:
			a.log.Error("could not re-apply the Hub's desire", "stream", v.ID, "state", d.State, "err", err)
		case rec.State != wire.OpSucceeded:
			a.log.Error("could not re-apply the Hub's desire", "stream", v.ID, "state", d.State, "operation_state", rec.State)
		default:
			a.log.Info("re-applied the Hub's desire", "stream", v.ID, "state", d.State, "generation", d.Generation)
		}
	}
}

// reapplyJobs starts again, at boot, each Hub job whose recorded desire
// is running: from the newest artifact of either kind, fenced with its
// recorded generation, so that a node the job moved away from while it
// was down is refused by the fence (a newer generation took the store).
// A split job starts its share again on its recorded placement. Jobs the
// Hub wants stopped are not started.
func (a *Agent) reapplyJobs(ctx context.Context) {
	if a.o.Policy != nil && !a.o.Policy.JobControl() {
		if n := len(a.st.jobs.all()); n > 0 {
			a.log.Warn("not re-applying the Hub's jobs: remote_policy.job_control is false", "jobs", n)
		}
		return
	}
	for id, d := range a.st.jobs.all() {
		if d.State != jobDesiredRunning {
			continue
		}
		cfg, probs, _ := a.x.materializeJob(d.Spec)
		if len(probs) > 0 {
			a.log.Error("could not re-apply the Hub's job: its spec no longer materializes", "job_id", id, "generation", d.Generation, "problems", problemsMessage(probs))
			continue
		}
		h := engine.HubJob{Spec: cfg.Jobs[0], Path: specPath, Generation: d.Generation, Recovery: engine.RecoverNewest}
		a.x.jobs.redactSecret(d.DataSecret)
		err := d.applySplit(&h)
		if err == nil {
			err = a.o.Engine.StartHubJob(ctx, h)
		}
		if err != nil {
			a.log.Error("could not re-apply the Hub's job", "job_id", id, "generation", d.Generation, "err", a.x.jobs.redact(err.Error()))
			continue
		}
		a.log.Info("re-applied the Hub's job", "job_id", id, "generation", d.Generation, "recovery", engine.RecoverNewest, "split", len(h.TaskNodes) > 0)
	}
}

func (a *Agent) heartbeats(ctx context.Context) {
	failures := 0
	for {
		s, err := a.c.ensure(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			if !sleep(ctx, a.b.delay(failures)) {
				return
			}
			continue
		}
		if !sleep(ctx, s.heartbeat) {
			return
		}
		var resp wire.HeartbeatResponse
		err = a.c.call(ctx, http.MethodPost, "/agent/heartbeat", wire.HeartbeatRequest{BootID: a.o.BootID, Capabilities: a.caps, DataAddress: a.o.DataAddress, DataFingerprint: a.o.DataFingerprint}, &resp, 0)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !errors.Is(err, errNoSession):
			a.log.Warn("heartbeat failed", "err", err)
		default:
			failures = 0
			a.c.epochs.see(resp.Epoch)
		}
	}
}

func (a *Agent) sendReport(ctx context.Context, r wire.Report) error {
	err := a.c.call(ctx, http.MethodPost, "/agent/report", r, nil, 0)
	if err != nil && ctx.Err() == nil && !errors.Is(err, errNoSession) {
		a.log.Warn("report failed", "report_seq", r.ReportSeq, "err", err)
	}
	return err
}

// poll long-polls commands and hands each to the executor in order.
func (a *Agent) poll(ctx context.Context) {
	path := "/agent/commands?wait_ms=" + strconv.FormatInt(a.o.PollWait.Milliseconds(), 10)
	failures := 0
	for {
		var page wire.Page[wire.Command]
		err := a.c.call(ctx, http.MethodGet, path, nil, &page, a.o.PollWait)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			if !errors.Is(err, errNoSession) {
				a.log.Warn("command poll failed", "err", err)
			}
			if !sleep(ctx, a.b.delay(failures)) {
				return
			}
			continue
		}
		failures = 0
		for _, cmd := range page.Items {
			a.x.handle(ctx, cmd)
		}
	}
}

// watchEvents wakes the reporter on every node event.
func (a *Agent) watchEvents(ctx context.Context) {
	if a.o.Events == nil {
		return
	}
	sub := a.o.Events.Subscribe(ctx, eventlog.Live, eventlog.Filter{})
	for {
		if _, err := sub.Next(ctx); err != nil {
			return
		}
		a.rep.wake()
	}
}
