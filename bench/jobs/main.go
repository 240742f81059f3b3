// Command jobs measures the job kernel in-process (bench/README.md):
//
//	go run ./bench/jobs -mode window      # keyed tumbling-window count, and the hand-written loop beside it
//	go run ./bench/jobs -mode nexmark     # q0, q1, q2, q5, q7 at parallelism 1 and 2
//	go run ./bench/jobs -mode checkpoint  # checkpoint duration and size for -state-bytes of state, and recovery time
//
// Figures go to stdout. Every run is bounded by its event count.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	_ "github.com/flowplane/flowplane/internal/connect/all"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/kernel"
	"github.com/flowplane/flowplane/internal/secretref"
)

func main() {
	mode := flag.String("mode", "window", "window, nexmark or checkpoint")
	events := flag.Int64("events", 10_000_000, "events per run (window, nexmark)")
	par := flag.String("parallelism", "", "comma-separated parallelisms (default: 2 for window, 1,2 for nexmark)")
	queries := flag.String("queries", "q0,q1,q2,q5,q7", "nexmark queries to run")
	stateBytes := flag.Int64("state-bytes", 1<<30, "live state for -mode checkpoint")
	dir := flag.String("dir", "", "working directory (default: a temporary one, removed after)")
	flag.StringVar(&templates, "templates", "bench/jobs", "directory of the job templates")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	// The same GC target as the flowplane binary (cmd/flowplane/main.go),
	// so the figures are what a node gets; GOGC in the environment wins.
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetGCPercent(400)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	work := *dir
	if work == "" {
		d, err := os.MkdirTemp("", "flowplane-bench-jobs-")
		if err != nil {
			fatal(err)
		}
		defer os.RemoveAll(d)
		work = d
	}
	var err error
	switch *mode {
	case "window":
		err = benchWindow(work, *events, parallelisms(*par, "2"))
	case "nexmark":
		err = benchNexmark(work, *events, parallelisms(*par, "1,2"), strings.Split(*queries, ","))
	case "checkpoint":
		err = benchCheckpoint(work, *stateBytes)
	default:
		err = fmt.Errorf("unknown -mode %q", *mode)
	}
	if err != nil {
		pprof.StopCPUProfile()
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench/jobs:", err)
	os.Exit(1)
}

func parallelisms(s, def string) []int {
	if s == "" {
		s = def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fatal(fmt.Errorf("bad -parallelism %q", s))
		}
		out = append(out, n)
	}
	return out
}

// templates is the directory of the job templates.
var templates = "bench/jobs"

// plan reads a job template, fills in its placeholders (__SINK_CONFIG__
// defaults to {}) and plans it.
func plan(file string, vars map[string]string) (*job.Plan, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	s := strings.ReplaceAll(string(b), "__SINK_CONFIG__", cmp.Or(vars["SINK_CONFIG"], "{}"))
	for k, v := range vars {
		s = strings.ReplaceAll(s, "__"+k+"__", v)
	}
	cfg, err := config.Materialize([]byte(s), config.YAML, component.Default, secretref.Resolver{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	p, ps := job.Build("jobs[0]", cfg.Jobs[0])
	if len(ps) > 0 {
		return nil, fmt.Errorf("%s: %w", file, &config.Error{Problems: ps})
	}
	return p, nil
}

// result is one measured run.
type result struct {
	wall time.Duration
	cpu  time.Duration
	obs  kernel.Observation // at the end of the run
}

func (r result) rate(n int64) float64    { return float64(n) / r.wall.Seconds() }
func (r result) perCore(n int64) float64 { return float64(n) / r.cpu.Seconds() }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// run builds and runs a planned job to completion.
func run(p *job.Plan, stateRoot string) (result, error) {
	rt, err := kernel.Build("jobs[0]", p, kernel.Options{Registry: component.Default, StateRoot: stateRoot})
	if err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c0, t0 := cpuTime(), time.Now()
	err = rt.Run(ctx)
	r := result{wall: time.Since(t0), cpu: cpuTime() - c0, obs: rt.Observe()}
	if err != nil {
		return r, err
	}
	if st := r.obs.State; st != kernel.Completed {
		return r, fmt.Errorf("job ended %s, not completed", st)
	}
	return r, nil
}
