package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/flowplane/flowplane/internal/agent"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/eventlog"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/kernel"
	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/node/history"
	"github.com/flowplane/flowplane/internal/secretref"
	"github.com/flowplane/flowplane/internal/stream"
	"github.com/flowplane/flowplane/internal/telemetry"
	"github.com/flowplane/flowplane/internal/wal"
	"github.com/flowplane/flowplane/internal/wire"
)

// processStart approximates the process start for the ready_ms figure.
var processStart = time.Now()

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

const usage = `flowplane — streaming-data engine, Agent and Hub in one binary.

Usage:
  flowplane --config <file> [--state-dir <dir>]   run an engine node
  flowplane --config <file> --validate             check a configuration as start-up does, then exit
  flowplane hub [--address host:port] [--storage file.db]
                                                   run the Hub (settings and tokens from SVC_*: flowplane hub --help)
  flowplane schema                                 print the configuration's JSON Schema
  flowplane version                                print the version (also --version)
  flowplane --help                                 this help

Configuration files are .yaml, .yml, .json or .toml. Exit status: 0 success,
1 invalid configuration or run-time failure, 2 usage error.
`

// exit codes
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	exitVersion = 0
)

// run is the whole command line; main only supplies the process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "schema":
			if len(args) > 1 {
				fmt.Fprintf(stderr, "flowplane schema takes no arguments\n")
				return exitUsage
			}
			return printSchema(stdout, stderr)
		case "version":
			fmt.Fprintf(stdout, "flowplane %s\n", buildVersion())
			return exitVersion
		case "hub":
			return runHub(ctx, args[1:], stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("flowplane", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	configPath := fs.String("config", "", "configuration file")
	validate := fs.Bool("validate", false, "validate the configuration and exit")
	stateDir := fs.String("state-dir", "", "directory of durable node state")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return exitOK
		}
		fmt.Fprintf(stderr, "flowplane: %v\n\n%s", err, usage)
		return exitUsage
	}
	if *showVersion {
		fmt.Fprintf(stdout, "flowplane %s\n", buildVersion())
		return exitVersion
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "flowplane: unexpected argument %q\n\n%s", fs.Arg(0), usage)
		return exitUsage
	}
	if *configPath == "" {
		fmt.Fprintf(stderr, "flowplane: --config <file> is required\n\n%s", usage)
		return exitUsage
	}
	if *validate {
		cfg, ok := load(*configPath, stderr)
		if !ok {
			return exitFailed
		}
		for _, w := range cfg.Warnings() {
			fmt.Fprintf(stderr, "warning: %s\n", w.Error())
		}
		fmt.Fprintf(stdout, "OK: %s is valid (%s, %s)\n", *configPath, plural(len(cfg.Streams), "stream"), plural(len(cfg.Jobs), "job"))
		return exitOK
	}
	return runNode(ctx, nodeOptions{configPath: *configPath, stateDir: *stateDir}, stdout, stderr)
}

// load runs the one materialization path and the deep build on a file,
// printing every problem. It is what --validate does.
func load(path string, stderr io.Writer) (*config.Config, bool) {
	data, format, err := config.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "flowplane: %v\n", err)
		return nil, false
	}
	return materialize(path, data, format, stderr)
}

// materialize is the walk shared by --validate and start-up.
func materialize(name string, data []byte, format config.Format, stderr io.Writer) (*config.Config, bool) {
	reg := component.Default
	cfg, err := config.Materialize(data, format, reg, secretref.Resolver{})
	problems := config.Problems(err)
	if cfg != nil && len(problems) == 0 {
		problems = config.CapProblems(cfg.Redact(append(engine.Check(cfg, reg), checkTLSFiles(cfg.HealthCheck)...)))
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "%s: %s:\n", name, plural(config.TotalProblems(problems), "problem"))
		for _, p := range problems {
			fmt.Fprintf(stderr, "  %s\n", p.Error())
		}
		return nil, false
	}
	return cfg, true
}

// bootVersion materializes the version Boot chose to run. A version from
// the Hub (source hub) whose ${secret:} references this node cannot
// resolve (the Hub resolved them at dispatch, and they are gone after a
// restart) gives way to the latest file version, marked applied: the
// Agent then reports no Hub version and the Hub sends its configuration
// again. fallback is the Hub version set aside (nil when none was); the
// caller warns naming it, never a value. A Hub version runs with the
// health_check of file (the --config file's text). Any other problem
// fails, as materialize does.
func bootVersion(hist *history.Store, v history.Version, file history.Version, stderr io.Writer) (run history.Version, cfg *config.Config, fallback *history.Version, ok bool) {
	if v.Source == history.SourceHub && !secretsResolvable(v) {
		file, found := latestFile(hist)
		if found {
			if err := hist.MarkApplied(file.ID); err != nil {
				fmt.Fprintf(stderr, "flowplane: configuration history: %v\n", err)
				return v, nil, nil, false
			}
			hub := v
			hub.Content = nil
			fallback, v = &hub, file
		}
	}
	content, format := v.Content, v.Format
	if v.Source == history.SourceHub {
		// A Hub configuration has no health_check: the node runs it with
		// the one of its --config file (config.NodeLocal).
		var err error
		if content, err = config.WithNodeLocal(v.Content, v.Format, file.Content, file.Format); err != nil {
			fmt.Fprintf(stderr, "flowplane: %s (applied configuration): %v\n", v.ID, err)
			return v, nil, nil, false
		}
		format = config.JSON
	}
	cfg, ok = materialize(v.ID+" (applied configuration)", content, format, stderr)
	return v, cfg, fallback, ok
}

// secretsResolvable reports whether every ${secret:} reference of v
// resolves from this process's environment. A text that does not parse
// counts as resolvable: materialize reports it.
func secretsResolvable(v history.Version) bool {
	tree, err := config.Tree(v.Content, v.Format)
	if err != nil {
		return true
	}
	_, err = secretref.Resolver{}.Secrets(tree)
	return err == nil
}

// latestFile returns the newest version of source file, with its text.
func latestFile(hist *history.Store) (history.Version, bool) {
	vs := hist.List()
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].Source != history.SourceFile {
			continue
		}
		v, err := hist.Get(vs[i].ID)
		return v, err == nil
	}
	return history.Version{}, false
}

// checkTLSFiles loads the certificate files health_check names, as the
// listener and the Agent will at start-up, so that --validate reports
// them.
func checkTLSFiles(hc config.HealthCheck) []config.Problem {
	var ps []config.Problem
	if t := hc.TLS; t != nil && hc.Enabled {
		if _, err := httpapi.ServerTLS(t.CertFile, t.KeyFile, nil); err != nil {
			ps = append(ps, config.Problem{Path: "health_check.tls", Message: err.Error()})
		}
	}
	if hc.HubCAFile != "" && len(hc.HubURLs) > 0 {
		if _, err := httpapi.ClientTLS(hc.HubCAFile); err != nil {
			ps = append(ps, config.Problem{Path: "health_check.hub_ca_file", Message: err.Error()})
		}
	}
	return ps
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func printSchema(stdout, stderr io.Writer) int {
	b, err := json.MarshalIndent(config.Schema(component.Default), "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "flowplane: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return exitOK
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "0.6.0-dev"
}

type nodeOptions struct {
	configPath string
	stateDir   string
}

// runNode runs an engine node until ctx ends or every stream finished.
func runNode(ctx context.Context, o nodeOptions, stdout, stderr io.Writer) int {
	data, format, err := config.ReadFile(o.configPath)
	if err != nil {
		fmt.Fprintf(stderr, "flowplane: %v\n", err)
		return exitFailed
	}
	// The file must be valid even when a later applied version will run.
	if _, ok := materialize(o.configPath, data, format, stderr); !ok {
		return exitFailed
	}
	sd, err := node.ResolveStateDir(o.stateDir, o.configPath, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "flowplane: %v\n", err)
		return exitFailed
	}
	stateDir := sd.Path
	// One process per state directory: a second node would share the node
	// id, the configuration history and the WALs.
	lock, err := node.LockStateDir(stateDir)
	if err != nil {
		fmt.Fprintf(stderr, "flowplane: %v\n", err)
		return exitFailed
	}
	defer lock.Release()
	hist, err := history.Open(filepath.Join(stateDir, "config"), time.Now)
	if err != nil {
		fmt.Fprintf(stderr, "flowplane: configuration history: %v\n", err)
		return exitFailed
	}
	version, _, err := hist.Boot(data, format, o.configPath)
	if err != nil {
		fmt.Fprintf(stderr, "flowplane: configuration history: %v\n", err)
		return exitFailed
	}
	version, cfg, fallback, ok := bootVersion(hist, version, history.Version{Content: data, Format: format}, stderr)
	if !ok {
		return exitFailed
	}
	// One redactor for the process: the logger, the node's errors and
	// events; each configuration the node runs adds its values.
	secrets := config.NewRedactor()
	secrets.Merge(cfg.Redactor())
	log, closer, err := telemetry.NewLogger(cfg.Logging, stdout, secrets)
	if err != nil {
		fmt.Fprintf(stderr, "flowplane: %v\n", err)
		return exitFailed
	}
	defer closer.Close()
	if fallback != nil {
		log.Warn("the applied configuration came from the Hub with secrets this node cannot resolve after a restart; running the latest file version until the Hub sends its configuration again",
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
		return exitFailed
	}
	metrics := telemetry.NewRegistry()
	// The data plane is closed last, after the engine stopped the jobs
	// that use it.
	dp, err := startDataPlane(hc, nodeID, log, metrics)
	if err != nil {
		log.Error("start-up failed", "err", err)
		return exitFailed
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
		Registry:   component.Default,
		Logger:     log,
		StateDir:   stateDir,
		Metrics:    stream.NewMetrics(metrics),
		JobMetrics: kernel.NewMetrics(metrics),
		DataPlane:  dp,
		NodeID:     nodeID,
		OnState: func(id string, st stream.State) {
			if n := nd.Load(); n != nil {
				n.OnStreamState(id, st)
			}
		},
	})
	bootID := uuid.Must(uuid.NewV7()).String()
	n := node.New(node.Options{
		Engine: eng, Registry: component.Default, Events: events, Logger: log,
		NodeID: nodeID, BootID: bootID, Version: buildVersion(), Secrets: secrets,
	}, cfg, version.ID)
	n.AttachHistory(hist, secretref.Resolver{}, cfg)
	nd.Store(n)
	hopts := node.HandlerOptions{HealthCheck: hc, Events: events, Metrics: metrics, Logger: log}
	// A node with hub_urls is managed by a Hub through its Agent.
	var ag *agent.Agent
	var held []string
	if len(hc.HubURLs) > 0 {
		ao := agent.ConfigOptions(hc)
		ao.NodeID, ao.BootID, ao.Version, ao.StateDir = nodeID, bootID, buildVersion(), stateDir
		ao.Node, ao.Events, ao.Logger = n, events, log
		// Hub jobs run on the engine, materialized as the configuration is.
		ao.Engine, ao.Registry, ao.Resolver, ao.Secrets = eng, component.Default, secretref.Resolver{}, secrets
		if ag, err = agent.New(ao); err != nil {
			log.Error("start-up failed", "err", err)
			return exitFailed
		}
		hopts.AgentStatus = ag.Status
		held = ag.Stopped()
	}
	ln, err := n.Listen(hopts)
	if err != nil {
		log.Error("start-up failed", "err", err)
		return exitFailed
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
	events.Append(wire.Event{Kind: wire.EventNodeStarted, NodeID: nodeID, Message: "node started with configuration " + version.ID, Data: map[string]any{"config_version": version.ID, "version": buildVersion()}})
	// Streams the Hub last wanted stopped stay stopped, Hub or no Hub.
	if err := eng.ApplyStopped(ctx, cfg, held); err != nil {
		log.Error("a stream failed to start", "err", err)
		// A WAL directory another process writes to is the same mistake as
		// a shared state directory: refuse to run rather than serve half.
		if errors.Is(err, wal.ErrInUse) {
			fmt.Fprintf(stderr, "flowplane: refusing to run a stream whose WAL directory is in use: %v\n", err)
			eng.Shutdown(context.Background())
			return exitFailed
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
	log.Info("flowplane node started", "version", buildVersion(), "node_id", nodeID, "config_version", version.ID, "streams", len(cfg.Streams), "jobs", len(cfg.Jobs))
	// Readiness is polled briefly at start-up only, to report how long it took.
	readyTick := time.NewTicker(time.Millisecond)
	defer readyTick.Stop()
	for {
		select {
		case <-readyTick.C:
			switch {
			case eng.Ready():
				log.Info("ready", "ready_ms", float64(time.Since(processStart).Microseconds())/1000)
				readyTick.Stop()
			case time.Since(processStart) > 30*time.Second:
				log.Warn("not ready after 30s; a stream did not start", "failed", strings.Join(eng.Failed(), ","))
				readyTick.Stop()
			}
		case <-ctx.Done():
			log.Info("stopping: signal received")
			eng.Shutdown(context.Background())
			log.Info("stopped")
			return exitOK
		case <-eng.Changes():
			// A Hub-managed node stays up when its streams and jobs
			// end: the Hub may start them again.
			if ag == nil && eng.Finished() {
				if failed := eng.Failed(); len(failed) > 0 {
					log.Error("every stream and job ended; some failed", "failed", strings.Join(failed, ","))
					return exitFailed
				}
				log.Info("every stream and job completed")
				return exitOK
			}
		}
	}
}
