// Command hubload benchmarks the Hub over loopback HTTP, against a real
// `flowplane hub` child process (or, with -inprocess, a Hub inside this
// process, to profile it).
//
// Agents mode simulates many Agents speaking the agent protocol (register,
// heartbeat at the interval the Hub answers, periodic reports, long-polls)
// and measures the Hub's CPU and memory from /proc over a steady-state
// window, plus the agents' call latencies and errors. Latency mode
// measures the time from an operator's desired-state PUT to the Agent's
// long-poll returning that command. Rollout mode measures rollouts of a
// new configuration to a fleet of simulated Agents in waves: the time from
// create to succeeded, and the Hub's CPU meanwhile.
//
//	go run ./bench/hubload -mode agents -agents 10000 -duration 60s
//	go run ./bench/hubload -mode latency -writes 1000
//	go run ./bench/hubload -mode rollout -agents 100 -batch 10 -runs 3
//
// Linux only (/proc). Every loop is bounded by count and time.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
)

type options struct {
	mode        string
	agents      int
	duration    time.Duration
	ramp        time.Duration
	warmup      time.Duration
	sample      time.Duration
	streams     int
	reportEvery time.Duration
	changeProb  float64
	waitMS      int
	conns       string
	desired     int

	writes     int
	writers    int
	pollers    int
	background int

	runs           int
	batch          int
	gateTimeoutMS  int64
	rolloutTimeout time.Duration
	baseline       time.Duration

	hubEnv     envList
	bin        string
	dir        string
	keep       bool
	inProcess  bool
	cpuProfile string
	memProfile string
	timeout    time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.mode, "mode", "agents", "agents (simulated fleet: Hub CPU and RSS), latency (write-to-delivery) or rollout (create-to-succeeded of configuration rollouts)")
	flag.IntVar(&o.agents, "agents", 10000, "agents and rollout modes: simulated agents (rollout mode's default: 100)")
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "agents mode: steady-state window measured after ramp and warm-up")
	flag.DurationVar(&o.ramp, "ramp", 10*time.Second, "spread registrations over this long (rollout mode's default: 2s)")
	flag.DurationVar(&o.warmup, "warmup", 10*time.Second, "wait after the last registration before measuring")
	flag.DurationVar(&o.sample, "sample", 10*time.Second, "agents mode: print a progress line (and check /status) this often")
	flag.IntVar(&o.streams, "streams", 3, "streams in each simulated agent's reports")
	flag.DurationVar(&o.reportEvery, "report-every", 5*time.Second, "report period of each agent")
	flag.Float64Var(&o.changeProb, "change", 0.01, "probability that a report carries a stream state change (a store write)")
	flag.IntVar(&o.waitMS, "wait-ms", 25000, "long-poll wait_ms")
	flag.StringVar(&o.conns, "conns", connsShared, "shared (one client transport: a long-poll connection per agent and a pool) or per-agent (up to 2 connections each)")
	flag.IntVar(&o.desired, "desired", 0, "agents mode: before measuring, give this many of each agent's streams a desired state (running) and wait until the agents executed the commands")
	flag.IntVar(&o.writes, "writes", 1000, "latency mode: desired-state writes")
	flag.IntVar(&o.writers, "writers", 1, "latency mode: concurrent writers")
	flag.IntVar(&o.pollers, "pollers", 1, "latency mode: long-polling agents that receive the writes")
	flag.IntVar(&o.background, "background", 0, "latency mode: simulated agents running meanwhile, as in agents mode")
	flag.IntVar(&o.runs, "runs", 3, "rollout mode: rollouts, one after the other, each of a new configuration to every agent")
	flag.IntVar(&o.batch, "batch", 10, "rollout mode: batch_size, the nodes per wave")
	flag.Int64Var(&o.gateTimeoutMS, "gate-timeout-ms", 60000, "rollout mode: gate_timeout_ms of each rollout")
	flag.DurationVar(&o.rolloutTimeout, "rollout-timeout", 5*time.Minute, "rollout mode: give up on a rollout not finished after this long")
	flag.DurationVar(&o.baseline, "baseline", 5*time.Second, "rollout mode: measure the Hub's CPU with the fleet idle this long before the first rollout (0: not)")
	flag.Var(&o.hubEnv, "hub-env", "KEY=VALUE added to the Hub child's environment (repeatable), e.g. GOGC=100 or GOMEMLIMIT=400MiB")
	flag.StringVar(&o.bin, "bin", "", "flowplane binary to run (default: go build ./cmd/flowplane from the module in the working directory)")
	flag.StringVar(&o.dir, "dir", "", "parent of the run's temporary directory (database, log, binary); default $TMPDIR")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory")
	flag.BoolVar(&o.inProcess, "inprocess", false, "run the Hub inside this process (for -cpuprofile); CPU and RSS then include the load generator")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of this process over the window (useful with -inprocess)")
	flag.StringVar(&o.memProfile, "memprofile", "", "write a heap profile of this process at the end of the window (useful with -inprocess)")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "abort the whole run after this long")
	flag.Parse()
	if o.mode == "rollout" {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["agents"] {
			o.agents = 100
		}
		if !set["ramp"] {
			o.ramp = 2 * time.Second
		}
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "hubload:", err)
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, o.timeout)
	defer cancelT()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "hubload:", err)
		os.Exit(1)
	}
}

func (o options) validate() error {
	var errs []error
	if o.mode != "agents" && o.mode != "latency" && o.mode != "rollout" {
		errs = append(errs, fmt.Errorf("-mode must be agents, latency or rollout, got %q", o.mode))
	}
	if o.runs < 1 || o.runs > 100 || o.batch < 1 || o.gateTimeoutMS < 0 || o.rolloutTimeout <= 0 || o.rolloutTimeout > time.Hour || o.baseline < 0 || o.baseline > 10*time.Minute {
		errs = append(errs, errors.New("-runs must be 1 to 100, -batch positive, -gate-timeout-ms not negative, -rollout-timeout in (0, 1h], -baseline 0 to 10m"))
	}
	if o.agents < 1 || o.agents > 100000 {
		errs = append(errs, errors.New("-agents must be 1 to 100000"))
	}
	if o.writes < 1 || o.writes > 100000 || o.writers < 1 || o.writers > 64 || o.pollers < 1 || o.pollers > 64 {
		errs = append(errs, errors.New("-writes must be 1 to 100000, -writers and -pollers 1 to 64"))
	}
	if o.background < 0 || o.background > 100000 {
		errs = append(errs, errors.New("-background must be 0 to 100000"))
	}
	if o.duration <= 0 || o.duration > time.Hour || o.ramp < 0 || o.warmup < 0 || o.sample <= 0 || o.reportEvery < 100*time.Millisecond {
		errs = append(errs, errors.New("-duration must be in (0, 1h], -ramp and -warmup not negative, -sample positive, -report-every at least 100ms"))
	}
	if o.waitMS < 1000 || o.waitMS > 30000 {
		errs = append(errs, errors.New("-wait-ms must be 1000 to 30000"))
	}
	if o.conns != connsShared && o.conns != connsPerAgent {
		errs = append(errs, fmt.Errorf("-conns must be %s or %s", connsShared, connsPerAgent))
	}
	if o.changeProb < 0 || o.changeProb > 1 || o.streams < 0 || o.streams > 100 {
		errs = append(errs, errors.New("-change must be 0 to 1, -streams 0 to 100"))
	}
	if o.desired < 0 || o.desired > o.streams {
		errs = append(errs, errors.New("-desired must be 0 to -streams"))
	}
	if o.inProcess && len(o.hubEnv) > 0 {
		errs = append(errs, errors.New("-hub-env applies to the Hub child; with -inprocess set the environment of this process"))
	}
	return errors.Join(errs...)
}

func run(ctx context.Context, o options) error {
	agents := o.agents
	if o.mode == "latency" {
		agents = o.background + o.pollers
	}
	// Each agent holds a long-poll socket in each process, the Hub and
	// this one, plus its share of the pool for heartbeats and reports (at
	// most one more each); with -inprocess both ends live here.
	need := uint64(agents + agents/2 + 4096)
	if o.conns == connsPerAgent {
		need = uint64(2*agents + 4096)
	}
	if o.inProcess {
		need *= 2
	}
	if err := raiseFileLimit(need); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(o.dir, "hubload-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Printf("run directory %s (kept)\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	bin := o.bin
	if !o.inProcess && bin == "" {
		if bin, err = buildHub(".", dir); err != nil {
			return err
		}
	}
	switch {
	case os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "":
	case o.inProcess:
		// As the flowplane binary does (cmd/flowplane/main.go).
		debug.SetGCPercent(400)
	default:
		// The generator's own garbage collection would show in the
		// latencies it measures (a mark phase every few seconds stalls
		// requests for hundreds of milliseconds on 2 cores): it collects
		// only when its heap reaches genMemoryLimit.
		debug.SetGCPercent(-1)
		debug.SetMemoryLimit(genMemoryLimit)
	}
	hut, err := startHub(ctx, dir, bin, o.inProcess, o.hubEnv)
	if err != nil {
		return err
	}
	where := fmt.Sprintf("child process %d (%s)", hut.pid, bin)
	if hut.inProcess {
		where = "in this process"
	}
	fmt.Printf("hub at %s, %s, storage %s\n", hut.base, where, filepath.Join(dir, "hub.db"))
	switch o.mode {
	case "agents":
		err = runAgents(ctx, o, hut)
	case "rollout":
		err = runRollout(ctx, o, hut)
	default:
		err = runLatency(ctx, o, hut)
	}
	if serr := hut.stop(); serr != nil && err == nil && !hut.inProcess {
		fmt.Printf("warning: hub stop: %v (log %s)\n", serr, hut.logPath)
	}
	if err != nil && o.keep {
		err = fmt.Errorf("%w (hub log %s)", err, hut.logPath)
	}
	return err
}

// genMemoryLimit is the heap at which the load generator collects garbage
// (GOGC and GOMEMLIMIT in the environment override it).
const genMemoryLimit = 4 << 30

// envList is a repeatable KEY=VALUE flag.
type envList []string

func (e *envList) String() string { return strings.Join(*e, " ") }

func (e *envList) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	*e = append(*e, v)
	return nil
}

// raiseFileLimit makes RLIMIT_NOFILE at least need, raising the hard limit
// too when allowed (root); the Hub child inherits it.
func raiseFileLimit(need uint64) error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Cur >= need {
		return nil
	}
	want := syscall.Rlimit{Cur: need, Max: max(l.Max, need)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		want = syscall.Rlimit{Cur: l.Max, Max: l.Max}
		if err2 := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err2 != nil {
			return err2
		}
		fmt.Printf("warning: open-file limit %d is below the %d this run needs (raising it: %v)\n", l.Max, need, err)
		return nil
	}
	fmt.Printf("open-file limit raised from %d/%d to %d/%d\n", l.Cur, l.Max, want.Cur, want.Max)
	return nil
}
