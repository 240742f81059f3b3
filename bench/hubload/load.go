package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowplane/flowplane/internal/hub"
)

// runAgents is agents mode: o.agents simulated agents at the Hub's default
// heartbeat interval, reporting every o.reportEvery and long-polling, for
// o.duration of steady state; it measures the Hub process and the calls.
func runAgents(ctx context.Context, o options, hut *hubUnderTest) error {
	rec := newRecorder("register", "write")
	cfg := agentConfig{streams: o.streams, reportEvery: o.reportEvery, changeProb: o.changeProb, waitMS: o.waitMS}
	fmt.Printf("agents mode: %d agents (%s connections), ramp %s, warm-up %s, window %s; %d streams per report, report every %s, state change in %.1f%% of reports, wait_ms %d\n",
		o.agents, o.conns, o.ramp, o.warmup, o.duration, o.streams, o.reportEvery, 100*o.changeProb, o.waitMS)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	cpuStart, _ := cpuTime(hut.pid)
	sw := startSwarm(sctx, hut, rec, cfg, o.agents, o.ramp, o.conns, "node-")
	took := sw.awaitRegistered(ctx, o.ramp+2*time.Minute)
	cpuReg, _ := cpuTime(hut.pid)
	fmt.Printf("registered %d/%d agents in %s (%d gave up); hub CPU during the ramp %.2f cores\n",
		sw.registered.Load(), o.agents, took.Round(time.Millisecond), sw.failed.Load(), cores(cpuReg-cpuStart, took))
	if sw.registered.Load() == 0 {
		return fmt.Errorf("no agent registered; see %s", hut.logPath)
	}
	// The CPU profile covers the desired-state writes too, when there are any.
	stopProfile, err := startProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	if o.desired > 0 {
		if err := desireAll(ctx, hut, rec, sw.agents, o.desired); err != nil {
			return err
		}
	}
	if sleep(ctx, o.warmup) != nil {
		return ctx.Err()
	}

	op := &client{base: hut.base, hc: &http.Client{Timeout: 10 * time.Second}}
	fmt.Printf("steady state: measuring %s\n", o.duration)
	self := os.Getpid()
	hub0, _ := cpuTime(hut.pid)
	gen0, _ := cpuTime(self)
	busy0, _ := machineBusy()
	load0 := loadAverage()
	t0 := time.Now()
	rec.measuring.Store(true)
	minOnline, maxOnline, statusErrs := -1, 0, 0
	lastCPU, lastAt := hub0, t0
	lastCalls := 0
	for time.Since(t0) < o.duration {
		if sleep(ctx, min(o.sample, o.duration-time.Since(t0))) != nil {
			return ctx.Err()
		}
		var st hub.Status
		if _, err := op.do(ctx, "GET", apiPrefix+"/status", hut.opToken, nil, &st); err != nil {
			statusErrs++
		} else {
			if minOnline < 0 || st.Nodes.Online < minOnline {
				minOnline = st.Nodes.Online
			}
			maxOnline = max(maxOnline, st.Nodes.Online)
		}
		c, _ := cpuTime(hut.pid)
		m, _ := memoryOf(hut.pid)
		now := time.Now()
		calls := rec.calls("heartbeat") + rec.calls("report") + rec.calls("poll")
		fmt.Printf("  t+%-4s online %5d/%d  hub %.2f cores  RSS %s  fds %d  agent calls %.0f/s  errors so far %d\n",
			now.Sub(t0).Round(time.Second), st.Nodes.Online, o.agents, cores(c-lastCPU, now.Sub(lastAt)), mib(m.RSS),
			openFiles(hut.pid), float64(calls-lastCalls)/now.Sub(lastAt).Seconds(), rec.totalErrors())
		lastCPU, lastAt, lastCalls = c, now, calls
	}
	rec.measuring.Store(false)
	window := time.Since(t0)
	hub1, _ := cpuTime(hut.pid)
	gen1, _ := cpuTime(self)
	busy1, _ := machineBusy()
	mem, _ := memoryOf(hut.pid)
	fds := openFiles(hut.pid)
	stopProfile()
	if err := writeHeapProfile(o.memProfile); err != nil {
		return err
	}
	gm, gmErr := goMemory(ctx, hut.base)
	stop()
	if !sw.wait(45 * time.Second) {
		fmt.Println("warning: some agent goroutines did not stop within 45 s")
	}

	hubCores := cores(hub1-hub0, window)
	fmt.Println()
	fmt.Println("== hub agents benchmark")
	fmt.Printf("machine        %d cores (GOMAXPROCS %d), %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Printf("agents         %d registered of %d, %s connections, steady window %s\n", sw.registered.Load(), o.agents, o.conns, window.Round(time.Millisecond))
	who := "hub process"
	if hut.inProcess {
		who = "hub+agents (in-process!)"
	}
	fmt.Printf("%-14s CPU %.3f cores over the window (target < 1); RSS %s at the end, peak (VmHWM) %s (target < 500 MiB); %d threads, %d fds\n",
		who, hubCores, mib(mem.RSS), mib(mem.HWM), mem.Threads, fds)
	if gmErr != nil {
		fmt.Printf("Go runtime     (reading /metrics: %v)\n", gmErr)
	} else {
		fmt.Printf("Go runtime     heap in use %s (allocated %s, next GC at %s), stacks %s, %.0f goroutines; from the Go runtime %s, idle heap %s of which released %s\n",
			mibf(gm["go_memstats_heap_inuse_bytes"]), mibf(gm["go_memstats_heap_alloc_bytes"]), mibf(gm["go_memstats_next_gc_bytes"]),
			mibf(gm["go_memstats_stack_inuse_bytes"]), gm["go_goroutines"], mibf(gm["go_memstats_sys_bytes"]),
			mibf(gm["go_memstats_heap_idle_bytes"]), mibf(gm["go_memstats_heap_released_bytes"]))
	}
	if !hut.inProcess {
		fmt.Printf("load generator CPU %.3f cores (same machine)\n", cores(gen1-gen0, window))
	}
	fmt.Printf("machine        busy %.2f of %d cores, of which %.2f neither the hub nor the load generator; load average %s -> %s\n",
		cores(busy1-busy0, window), runtime.NumCPU(), cores(busy1-busy0-(hub1-hub0)-otherIfChild(hut, gen1-gen0), window), load0, loadAverage())
	fmt.Printf("online nodes   /status during the window: min %d, max %d of %d (%d status errors)\n", minOnline, maxOnline, o.agents, statusErrs)
	fmt.Printf("calls in the window (latency from request to answer, as the agent sees it):\n")
	rec.print([]string{"heartbeat", "report", "poll", "result"}, map[string]bool{"heartbeat": true, "report": true, "result": true})
	fmt.Printf("registration (whole ramp):\n")
	rec.print([]string{"register"}, map[string]bool{"register": true})
	if o.desired > 0 {
		fmt.Printf("desired-state writes before the window:\n")
		rec.print([]string{"write"}, map[string]bool{"write": true})
	}
	fmt.Printf("errors, whole run: %d\n", rec.totalErrors())
	return nil
}

// desireBatchWriters is the concurrency of desireAll's writes.
const desireBatchWriters = 16

// desireAll gives the first k streams of every registered agent the
// desired state running, then waits (at most 5 minutes) until the agents
// executed that many commands each: the steady state then has resources
// to converge, as a real fleet does.
func desireAll(ctx context.Context, hut *hubUnderTest, rec *recorder, agents []*simAgent, k int) error {
	start := time.Now()
	op := &client{base: hut.base, hc: &http.Client{Transport: newTransport(desireBatchWriters + 4)}}
	type job struct{ node, stream string }
	jobs := make(chan job)
	var wg sync.WaitGroup
	var failed, written atomic.Int64
	for range desireBatchWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				t := time.Now()
				_, err := op.do(ctx, "PUT", apiPrefix+"/nodes/"+j.node+"/streams/"+j.stream+"/desired-state", hut.opToken,
					map[string]string{"state": "running", "config_version": "v1"}, nil)
				if err != nil {
					failed.Add(1)
					rec.fail("write", err)
					continue
				}
				rec.ok("write", time.Since(t))
				written.Add(1)
			}
		}()
	}
	stopProgress := make(chan struct{})
	go func() {
		last, lastAt := int64(0), time.Now()
		lastCPU, _ := cpuTime(hut.pid)
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-stopProgress:
				return
			}
			n := written.Load()
			c, _ := cpuTime(hut.pid)
			fmt.Printf("  ... %d desired-state writes, %.0f/s, hub %.2f cores\n", n, float64(n-last)/time.Since(lastAt).Seconds(),
				cores(c-lastCPU, time.Since(lastAt)))
			last, lastCPU, lastAt = n, c, time.Now()
		}
	}()
	want := 0
feed:
	for _, a := range agents {
		if a.token() == "" {
			continue // never registered
		}
		for i := range k {
			select {
			case jobs <- job{a.id, "s" + strconv.Itoa(i)}:
				want++
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	close(stopProgress)
	wrote := time.Since(start)
	done := func() int64 {
		var n int64
		for _, a := range agents {
			n += min(a.done.Load(), int64(k))
		}
		return n
	}
	for done() < int64(want)-failed.Load() && time.Since(start) < 5*time.Minute {
		if sleep(ctx, 200*time.Millisecond) != nil {
			return ctx.Err()
		}
	}
	fmt.Printf("desired state: %d writes in %s (%d failed); %d commands executed %s after the first write\n",
		want, wrote.Round(time.Millisecond), failed.Load(), done(), time.Since(start).Round(time.Millisecond))
	return nil
}

// otherIfChild is the load generator's CPU when it is not already counted
// as the Hub's (in-process runs).
func otherIfChild(hut *hubUnderTest, gen time.Duration) time.Duration {
	if hut.inProcess {
		return 0
	}
	return gen
}

func mibf(b float64) string { return mib(int64(b)) }

// cores is CPU time used per wall-clock time.
func cores(cpu, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return cpu.Seconds() / wall.Seconds()
}

// startProfile starts a CPU profile into path ("" = none) and returns the
// function that stops it (once; later calls do nothing).
func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() { pprof.StopCPUProfile(); f.Close(); fmt.Printf("CPU profile written to %s\n", path) })
	}, nil
}

func writeHeapProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		return err
	}
	fmt.Printf("heap profile written to %s\n", path)
	return nil
}
