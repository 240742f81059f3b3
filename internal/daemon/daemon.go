package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/flowplane/flowplane/internal/agent"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/eventlog"
	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/node/history"
	"github.com/flowplane/flowplane/internal/policy"
	"github.com/flowplane/flowplane/internal/sandbox"
	"github.com/flowplane/flowplane/internal/secretref"
	"github.com/flowplane/flowplane/internal/telemetry"
	"github.com/flowplane/flowplane/internal/tracing"
	"github.com/flowplane/flowplane/internal/wire"
)

// Options configure a node process.
type Options struct {
	// ConfigPath is the --config file; StateDir the --state-dir flag
	// (empty: node.ResolveStateDir's choice).
	ConfigPath string
	StateDir   string
	// Version is the build's version, shown by GET /system and logged.
	Version string
	// Started approximates the process start, for the ready_ms figure.
	Started time.Time
	// Stdout receives the log; Stderr the problems found before the log
	// exists.
	Stdout, Stderr io.Writer
}

// ErrFailed is returned by Run for a node that could not start or whose
// streams and jobs ended with a failure. Run has reported why (to Stderr
// before the log exists, to the log after) before it returns.
var ErrFailed = errors.New("the node failed")

// Run runs an engine node until ctx ends or, on a standalone node, every
// stream and job ended. It returns nil once the node stopped or every
// stream and job completed, and ErrFailed otherwise.
func Run(ctx context.Context, o Options) error {
	stderr := o.Stderr
	data, format, err := config.ReadFile(o.ConfigPath)
	if err != nil {
		fmt.Fprintf(stderr, "flowplane: %v\n", err)
		return ErrFailed
	}
	// The file must be valid even when a later applied version will run.
	fileCfg, ok := materialize(o.ConfigPath, data, format, stderr)
	if !ok {
		return ErrFailed
	}
	sd, err := node.ResolveStateDir(o.StateDir, o.ConfigPath, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "flowplane: %v\n", err)
		return ErrFailed
	}
	stateDir := sd.Path
	// One process per state directory: a second node would share the node
	// id, the configuration history and the WALs.
	lock, err := node.LockStateDir(stateDir)
	if err != nil {
		fmt.Fprintf(stderr, "flowplane: %v\n", err)
		return ErrFailed
	}
	defer lock.Release()
	hist, err := history.Open(filepath.Join(stateDir, "config"), time.Now)
	if err != nil {
		fmt.Fprintf(stderr, "flowplane: configuration history: %v\n", err)
		return ErrFailed
	}
	version, _, err := hist.Boot(data, format, o.ConfigPath)
	if err != nil {
		fmt.Fprintf(stderr, "flowplane: configuration history: %v\n", err)
		return ErrFailed
	}
	// The remote policy is the --config file's, whatever version runs.
	pol := policy.New(fileCfg.RemotePolicy, stateDir)
	version, cfg, fallback, ok := bootVersion(hist, version, history.Version{Content: data, Format: format}, pol, stderr)
	if !ok {
		return ErrFailed
	}
	// One redactor for the process: the logger, the node's errors and
	// events; each configuration the node runs adds its values.
	secrets := config.NewRedactor()
	secrets.Merge(cfg.Redactor())
	// A Hub configuration's log file opens as the remote policy allows.
	var logFS sandbox.FS
	if version.Source == history.SourceHub {
		logFS = pol.FS()
	}
	log, closer, err := telemetry.NewLoggerIn(cfg.Logging, o.Stdout, secrets, logFS)
	if err != nil {
		fmt.Fprintf(stderr, "flowplane: %v\n", err)
		return ErrFailed
	}
	defer closer.Close()
	if fallback != nil {
		log.Warn("the applied configuration came from the Hub with secrets this node cannot resolve after a restart, or the node's remote policy refuses it; running the latest file version until the Hub sends its configuration again",
			"config_version", fallback.ID, "hub_version", fallback.HubVersion, "running", version.ID)
	}
	if sd.Source == node.StateDirLegacy {
		log.Warn("using the state directory beside the configuration file, as earlier releases did; pass --state-dir to keep it there, or move it to the default", "state_dir", stateDir)
	}
	hc := cfg.HealthCheck
	for _, w := range cfg.Warnings() {
		log.Error("insecure listener: "+w.Message, "path", w.Path)
	}
	nodeID, err := node.LoadNodeID(hc.NodeID, stateDir)
	if err != nil {
		log.Error("start-up failed", "err", err)
		return ErrFailed
	}
	metrics := telemetry.NewRegistry()
	// The tracer provider is shut down (flushing its queue) after the
	// engine stopped, so the last batches' spans are exported.
	tracer, err := newTracer(fileCfg.Tracing, nodeID)
	if err != nil {
		log.Error("start-up failed", "err", err)
		return ErrFailed
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), tracerFlushTimeout)
		defer cancel()
		if err := tracer.Shutdown(sctx); err != nil {
			log.Warn("flush the traces", "err", err)
		}
	}()
	// The data plane is closed last, after the engine stopped the jobs
	// that use it.
	dp, err := engine.ListenDataPlane(hc, nodeID, stateDir, log, metrics)
	if err != nil {
		log.Error("start-up failed", "err", err)
		return ErrFailed
	}
	if dp != nil {
		defer func() {
			if err := dp.Close(); err != nil {
				log.Warn("close the data plane", "err", err)
			}
		}()
	}
	// Event ids continue across restarts: they start from the clock.
	events := eventlog.New(eventlog.Options{LastID: time.Now().UnixMilli() * 1000})
	var nd atomic.Pointer[node.Node]
	eng := engine.New(engine.Options{
		Registry:  component.Default,
		Logger:    log,
		StateDir:  stateDir,
		Metrics:   metrics,
		DataPlane: dp,
		NodeID:    nodeID,
		Tracer:    tracer.Tracer(),
		// The Hub's work reaches files and destinations only as the
		// remote policy allows, checked again at each use.
		Remote: engine.Sandbox{FS: pol.FS(), Net: pol.Net()},
		OnState: func(id string, st engine.StreamState) {
			if n := nd.Load(); n != nil {
				n.OnStreamState(id, st)
			}
		},
	})
	// Watched from the start: the first apply's changes count.
	changes, stopWatching := eng.Changes()
	defer stopWatching()
	bootID := uuid.Must(uuid.NewV7()).String()
	n := node.New(node.Options{
		Engine: eng, Registry: component.Default, Events: events, Logger: log,
		NodeID: nodeID, BootID: bootID, Version: o.Version, Secrets: secrets, Policy: pol,
	}, cfg, version.ID)
	n.AttachHistory(hist, secretref.Resolver{}, cfg)
	nd.Store(n)
	hopts := node.HandlerOptions{HealthCheck: hc, Events: events, Metrics: metrics, Logger: log}
	// A node with hub_urls is managed by a Hub through its Agent.
	var ag *agent.Agent
	var held []string
	if len(hc.HubURLs) > 0 {
		ao := agent.ConfigOptions(hc)
		ao.NodeID, ao.BootID, ao.Version, ao.StateDir = nodeID, bootID, o.Version, stateDir
		ao.Node, ao.Events, ao.Logger = n, events, log
		// Hub jobs run on the engine, materialized as the configuration is.
		ao.Engine, ao.Registry, ao.Resolver, ao.Secrets, ao.Policy = eng, component.Default, secretref.Resolver{}, secrets, pol
		if ag, err = agent.New(ao); err != nil {
			log.Error("start-up failed", "err", err)
			return ErrFailed
		}
		hopts.AgentStatus = ag.Status
		held = ag.Stopped()
	}
	ln, err := n.Listen(hopts)
	if err != nil {
		log.Error("start-up failed", "err", err)
		return ErrFailed
	}
	serveCtx, stopServing := context.WithCancel(context.Background())
	served := make(chan error, 1)
	if ln != nil {
		log.Info("listening", "listener", ln.Kind, "address", ln.Addr().String(), "tls", ln.TLS())
		go func() { served <- ln.Serve(serveCtx) }()
	}
	defer func() {
		stopServing()
		if ln != nil {
			if err := <-served; err != nil {
				log.Error("listener", "err", err)
			}
		}
	}()
	events.Append(wire.Event{Kind: wire.EventNodeStarted, NodeID: nodeID, Message: "node started with configuration " + version.ID, Data: map[string]any{"config_version": version.ID, "version": o.Version}})
	// Streams the Hub last wanted stopped stay stopped, Hub or no Hub.
	if err := eng.ApplyWith(ctx, cfg, engine.ApplyOptions{Stopped: held, Remote: version.Source == history.SourceHub}); err != nil {
		log.Error("a stream failed to start", "err", err)
		// A WAL directory another process writes to is the same mistake as
		// a shared state directory: refuse to run rather than serve half.
		if errors.Is(err, engine.ErrWALInUse) {
			fmt.Fprintf(stderr, "flowplane: refusing to run a stream whose WAL directory is in use: %v\n", err)
			eng.Shutdown(context.Background())
			return ErrFailed
		}
	}
	if ag != nil {
		agentCtx, stopAgent := context.WithCancel(ctx)
		agentDone := make(chan error, 1)
		go func() { agentDone <- ag.Run(agentCtx) }()
		defer func() {
			stopAgent()
			if err := <-agentDone; err != nil {
				log.Error("agent", "err", err)
			}
		}()
	}
	log.Info("flowplane node started", "version", o.Version, "node_id", nodeID, "config_version", version.ID, "streams", len(cfg.Streams), "jobs", len(cfg.Jobs))
	// Readiness is polled briefly at start-up only, to report how long it took.
	readyTick := time.NewTicker(time.Millisecond)
	defer readyTick.Stop()
	for {
		select {
		case <-readyTick.C:
			switch {
			case eng.Ready():
				log.Info("ready", "ready_ms", float64(time.Since(o.Started).Microseconds())/1000)
				readyTick.Stop()
			case time.Since(o.Started) > 30*time.Second:
				log.Warn("not ready after 30s; a stream did not start", "failed", strings.Join(eng.Failed(), ","))
				readyTick.Stop()
			}
		case <-ctx.Done():
			log.Info("stopping: signal received")
			eng.Shutdown(context.Background())
			log.Info("stopped")
			return nil
		case <-changes:
			// A Hub-managed node stays up when its streams and jobs
			// end: the Hub may start them again.
			if ag == nil && eng.Finished() {
				if failed := eng.Failed(); len(failed) > 0 {
					log.Error("every stream and job ended; some failed", "failed", strings.Join(failed, ","))
					return ErrFailed
				}
				log.Info("every stream and job completed")
				return nil
			}
		}
	}
}

// tracerFlushTimeout bounds the export of the spans still queued when the
// node stops: an unreachable collector must not hold the exit.
const tracerFlushTimeout = 5 * time.Second

// newTracer builds the tracer provider of the tracing section; nil (which
// is tracing off to every caller) when it is not enabled.
func newTracer(t config.Tracing, nodeID string) (*tracing.Provider, error) {
	if !t.Enabled {
		return nil, nil
	}
	// Not the node's context: the exporter must outlive the signal that
	// stops the node, to flush after the engine stopped.
	return tracing.New(context.Background(), tracing.Options{
		Endpoint: t.Endpoint, Protocol: t.Protocol, SamplingRatio: t.SamplingRatio,
		ServiceName: t.ServiceName, NodeID: nodeID,
	})
}
