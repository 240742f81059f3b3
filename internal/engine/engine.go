package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"go.opentelemetry.io/otel/trace"

	"github.com/flowplane/flowplane/internal/kernel"
	"github.com/flowplane/flowplane/internal/sandbox"
	"github.com/flowplane/flowplane/internal/stream"
	"github.com/flowplane/flowplane/internal/tap"
)

// Options configure an engine.
type Options struct {
	Registry *component.Registry
	Logger   *slog.Logger
	// Metrics, when set, receives the svc_stream_* and svc_job_* metrics
	// of every stream and job.
	Metrics prometheus.Registerer
	// StateDir holds the node's durable state (WALs under wal/<stream id>).
	StateDir string
	// StopTimeout bounds a graceful stream stop; 0 means the runtime default.
	StopTimeout time.Duration
	// OnState, when set, is called with every state a stream's runtime
	// enters, in order per stream; it must not block.
	OnState func(streamID string, state StreamState)
	// OnJobState, when set, is called with every state a job enters, in
	// order per job; it must not block.
	OnJobState func(jobID string, state JobState)
	// DataPlane is the node's data plane (health_check.data_port,
	// ListenDataPlane); nil without one, and then a Hub job with TaskNodes
	// fails to start.
	DataPlane *DataPlane
	// NodeID is this node's id: which tasks of a split job run here.
	NodeID string
	// Tracer, when set, traces the batches of every stream and job
	// (the node's tracing section); nil is tracing off.
	Tracer trace.Tracer
	// Remote is the file system and network of the Hub's work: the
	// components of a configuration applied with ApplyOptions.Remote and
	// of Hub jobs reach files and destinations only through them (the
	// node's remote policy, enforced at use). Its zero value restricts
	// nothing.
	Remote Sandbox
}

// Sandbox is what the components of some work reach files and the
// network through.
type Sandbox struct {
	FS  sandbox.FS
	Net sandbox.Net
}

// ApplyOptions say how ApplyWith applies a configuration.
type ApplyOptions struct {
	// Stopped names new streams and jobs that are configured but not
	// started (see ApplyStopped).
	Stopped []string
	// Remote marks the configuration as the Hub's: its streams and jobs
	// run in Options.Remote. A stream or job kept from a configuration of
	// the other origin is restarted.
	Remote bool
}

// ErrStreamNotFound is returned for an unknown stream id.
var ErrStreamNotFound = errors.New("stream not found")

// Engine owns the streams and jobs of one node. Its methods are safe for concurrent use.
type Engine struct {
	opts Options
	log  *slog.Logger
	// Built from Options.Metrics; nil without it.
	streamMetrics *stream.Metrics
	jobMetrics    *kernel.Metrics

	// opMu serializes the operations that change which streams run (Apply,
	// Start, Stop, Shutdown); they may wait for streams to stop while
	// holding it. mu guards the fields below and is only held briefly.
	opMu     sync.Mutex
	mu       sync.Mutex
	streams  map[string]*instance
	order    []string // stream ids in configuration order
	jobs     map[string]*jobInstance
	jobOrder []string // configured job ids in configuration order
	hubOrder []string // Hub job ids, sorted

	changes    watchers // a stream or job started or ended; an operation changed what runs
	jobChanges watchers // a job entered a state; a Hub job was started or removed
}

// instance is one configured stream and, while it runs, its runtime.
type instance struct {
	member
	conf config.Stream

	rt  *stream.Stream
	wal stoppableWAL
	// taps outlive the runs: a tap stays attached across restarts.
	taps tap.Set
}

func (in *instance) config() config.Stream { return in.conf }

// New returns an engine with no streams.
func New(opts Options) *Engine {
	if opts.Registry == nil {
		opts.Registry = component.Default
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Engine{opts: opts, log: opts.Logger, streams: map[string]*instance{}, jobs: map[string]*jobInstance{}}
	if opts.Metrics != nil {
		e.streamMetrics, e.jobMetrics = stream.NewMetrics(opts.Metrics), kernel.NewMetrics(opts.Metrics)
	}
	return e
}

// Changes returns a channel signalled (coalesced) whenever a stream
// starts or ends, a job ends, or an operation changed which streams and
// jobs run; and the function that stops the signals. Each caller has its
// own channel: a change made before the call is not signalled.
func (e *Engine) Changes() (<-chan struct{}, func()) { return e.changes.watch() }

func (e *Engine) notify() { e.changes.notify() }

// Apply makes the running streams match cfg: streams whose configuration is
// unchanged keep running, changed ones restart, removed ones stop and new
// ones start. It returns once every stop finished and every start was
// launched; problems building a stream are returned joined, and the other
// streams are applied all the same.
func (e *Engine) Apply(ctx context.Context, cfg *config.Config) error {
	return e.ApplyStopped(ctx, cfg, nil)
}

// ApplyStopped is Apply, except that the new streams and jobs named in stopped are
// configured but not started: they stay stopped, as if stopped on request,
// until Start. A Hub-managed node uses it at start-up for the streams its
// Hub wants stopped, so that they never run.
func (e *Engine) ApplyStopped(ctx context.Context, cfg *config.Config, stopped []string) error {
	return e.ApplyWith(ctx, cfg, ApplyOptions{Stopped: stopped})
}

// ApplyWith is Apply with options: streams and jobs held stopped, the
// configuration's origin.
func (e *Engine) ApplyWith(ctx context.Context, cfg *config.Config, o ApplyOptions) error {
	e.opMu.Lock()
	defer e.opMu.Unlock()
	sk, jk := e.streamKind(), e.jobKind()
	sk.remote, jk.remote = o.Remote, o.Remote
	errs := sk.apply(ctx, e, cfg.Streams, o.Stopped)
	errs = append(errs, jk.apply(ctx, e, cfg.Jobs, o.Stopped)...)
	e.notify()
	return errors.Join(errs...)
}

// streamKind is how Apply handles streams.
func (e *Engine) streamKind() kind[config.Stream, *instance] {
	return kind[config.Stream, *instance]{
		name: "streams", byID: e.streams, order: &e.order,
		id: func(s config.Stream) string { return s.ID },
		create: func(s config.Stream, path string) *instance {
			return &instance{conf: s, member: member{path: path}}
		},
		stop:  e.stop,
		start: e.start,
		forget: func(id string) {
			if e.streamMetrics != nil {
				e.streamMetrics.Forget(id)
			}
		},
	}
}

func (e *Engine) get(id string) *instance {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.streams[id]
}

// start builds and launches one stream. The caller holds e.opMu.
func (e *Engine) start(in *instance) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	log := e.log.With("stream", in.conf.ID)
	if in.conf.StateDefaulted() {
		log.Warn("window buffer state not declared; its contents are not recovered", "buffer", in.conf.Buffer.Type)
	}
	res := component.Resources{StreamID: in.conf.ID, Logger: log}
	if in.remote {
		res.FS, res.Net = e.opts.Remote.FS, e.opts.Remote.Net
	}
	b, ps := buildStream(e.opts.Registry, in.path, in.conf, res)
	if len(ps) > 0 {
		in.err = &config.Error{Problems: ps}
		in.done = closedChan()
		return in.err
	}
	w, err := walFor(in.conf, e.opts.StateDir, res)
	if err != nil {
		b.close(context.Background())
		in.err = fmt.Errorf("%s.durability: %w", in.path, err)
		in.done = closedChan()
		return in.err
	}
	sc := stream.Config{
		ID:          in.conf.ID,
		Input:       b.input,
		Buffer:      b.buffer,
		Processors:  b.processors,
		ThreadNum:   in.conf.Pipeline.ThreadNum,
		Output:      b.output,
		ErrorOutput: b.errorOutput,
		Temporaries: b.temporaries,
		StopTimeout: e.opts.StopTimeout,
		Logger:      log,
		Metrics:     e.streamMetrics,
		Taps:        &in.taps,
		Tracer:      e.opts.Tracer,
	}
	if w != nil {
		sc.WAL = w
		sc.WALMaxBytes = in.conf.Durability.MaxBytes
		if ow, ok := w.(*objectWAL); ok {
			sc.WALAppendDepth = ow.depth
		}
	}
	rt, err := stream.New(sc)
	if err != nil {
		b.close(context.Background())
		if w != nil {
			_ = w.Close()
		}
		in.err = fmt.Errorf("%s: %w", in.path, err)
		in.done = closedChan()
		return in.err
	}
	if hook := e.opts.OnState; hook != nil {
		id := in.conf.ID
		rt.Subscribe(func(st stream.State) { hook(id, st) })
	}
	ctx, cancel := context.WithCancel(context.Background())
	in.rt, in.wal, in.cancel, in.done, in.err, in.stopped = rt, w, cancel, make(chan struct{}), nil, false
	go func() {
		err := rt.Run(ctx)
		if w != nil {
			if cerr := w.Close(); cerr != nil {
				log.Error("close WAL", "err", cerr)
			}
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			log.Error("stream ended with an error", "err", err)
		}
		st := rt.Status()
		elapsed := time.Since(st.StartedAt)
		log.Info("stream ended", "state", st.State, "received", st.Received, "sent", st.Sent,
			"dropped", st.Dropped, "errors", st.Errors, "elapsed_ms", elapsed.Milliseconds(),
			"msgs_per_sec", int64(float64(st.Received)/max(elapsed.Seconds(), 1e-9)))
		e.mu.Lock()
		in.err = err
		e.mu.Unlock()
		close(in.done)
		e.notify()
	}()
	return nil
}

// stop stops one stream and waits for it (bounded by the runtime's stop
// timeout, and by ctx). The caller holds e.opMu.
func (e *Engine) stop(ctx context.Context, in *instance) {
	e.mu.Lock()
	cancel, done := in.cancel, in.done
	in.cancel = nil
	if cancel != nil {
		in.stopped = true
	}
	e.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Stop stops one stream; it stays configured and can be started again.
func (e *Engine) Stop(ctx context.Context, id string) error {
	e.opMu.Lock()
	defer e.opMu.Unlock()
	in := e.get(id)
	if in == nil {
		return fmt.Errorf("%w: %q", ErrStreamNotFound, id)
	}
	e.stop(ctx, in)
	e.notify()
	return nil
}

// Start starts a configured stream that is not running.
func (e *Engine) Start(ctx context.Context, id string) error {
	e.opMu.Lock()
	defer e.opMu.Unlock()
	in := e.get(id)
	if in == nil {
		return fmt.Errorf("%w: %q", ErrStreamNotFound, id)
	}
	if !e.ended(&in.member) {
		return nil // running
	}
	return e.start(in)
}

// Restart stops and starts one stream.
func (e *Engine) Restart(ctx context.Context, id string) error {
	if err := e.Stop(ctx, id); err != nil {
		return err
	}
	return e.Start(ctx, id)
}

// Shutdown stops every stream and job, waiting for graceful stops bounded by ctx.
func (e *Engine) Shutdown(ctx context.Context) {
	e.opMu.Lock()
	defer e.opMu.Unlock()
	e.mu.Lock()
	var dones []chan struct{}
	for _, id := range e.order {
		in := e.streams[id]
		if in.cancel != nil {
			in.cancel()
			in.cancel = nil
		}
		dones = append(dones, in.done)
	}
	var jobs []*jobInstance
	for _, id := range e.allJobsLocked() {
		jobs = append(jobs, e.jobs[id])
	}
	e.mu.Unlock()
	for _, ji := range jobs {
		_, _ = e.stopJob(ctx, ji, false)
	}
	for _, done := range dones {
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
	}
}

// StreamStatus is one stream's observed view.
type StreamStatus struct {
	stream.Status
	Path string
}

// Streams returns every configured stream's status in configuration order.
func (e *Engine) Streams() []StreamStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]StreamStatus, 0, len(e.order))
	for _, id := range e.order {
		out = append(out, e.statusLocked(e.streams[id]))
	}
	return out
}

func (e *Engine) statusLocked(in *instance) StreamStatus {
	st := StreamStatus{Path: in.path}
	if in.rt != nil {
		st.Status = in.rt.Status()
	} else {
		st.ID, st.State = in.conf.ID, stream.StateFailed
		if in.err == nil && in.stopped {
			st.State = stream.StateStopped // held stopped by ApplyStopped
		}
	}
	if in.err != nil && st.LastError == "" {
		st.LastError = in.err.Error()
	}
	if in.rt != nil && in.cancel == nil && st.State != stream.StateCompleted && st.State != stream.StateFailed {
		st.State = stream.StateStopped
	}
	return st
}

// Finished reports whether at least one stream is configured and every
// stream has ended by itself (completed or failed), which is when a
// standalone node with only finite inputs exits. A stream stopped on
// request did not end by itself: the node stays up to be managed.
func (e *Engine) Finished() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.order) == 0 && len(e.jobOrder) == 0 && len(e.hubOrder) == 0 {
		return false
	}
	if !e.jobsFinishedLocked() {
		return false
	}
	for _, id := range e.order {
		if !e.streams[id].endedByItself() {
			return false
		}
	}
	return true
}

// Ready reports whether the engine finished starting what it is meant to
// run: NotReady is empty.
func (e *Engine) Ready() bool { return len(e.NotReady()) == 0 }

// NotReady returns, in configuration order, the ids of the streams that
// should run and do not: one still starting, one that failed (to build or
// later), one stopping while nobody asked it to (the engine shutting
// down). A stream stopped on request, or held stopped by ApplyStopped, is
// where the operator wants it, and a completed stream is done: neither
// makes the engine unready.
func (e *Engine) NotReady() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ids []string
	for _, id := range e.order {
		in := e.streams[id]
		if in.stopped {
			continue
		}
		if st := e.statusLocked(in).State; st != stream.StateRunning && st != stream.StateCompleted {
			ids = append(ids, id)
		}
	}
	return append(ids, e.jobsNotReadyLocked()...)
}

// Failed returns the ids of streams that ended with an error.
func (e *Engine) Failed() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ids []string
	for _, id := range e.order {
		in := e.streams[id]
		select {
		case <-in.done:
			// A stream that could not be built has no runtime; one that ran
			// failed only if it says so (a stop past its deadline is stopped).
			if in.rt == nil && in.err != nil || in.rt != nil && in.rt.Status().State == stream.StateFailed {
				ids = append(ids, id)
			}
		default:
		}
	}
	return append(ids, e.jobsFailedLocked()...)
}
