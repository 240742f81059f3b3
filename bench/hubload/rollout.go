package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/hub"
	"github.com/flowplane/flowplane/internal/wire"
)

// rolloutPoll is how often a rollout's progress is read (GET
// /rollouts/{id}): the resolution of the wave durations it prints.
const rolloutPoll = 100 * time.Millisecond

// rolloutConfig is the node configuration a rollout of run r (0-based)
// applies: one generate -> drop stream, its message changed per run so
// every rollout is a new configuration. Node-local sections (health_check)
// are not the Hub's to set, so it has none.
func rolloutConfig(r int) string {
	return fmt.Sprintf(`# hubload rollout run %d
streams:
  - id: rollout
    input: {type: generate, context: '{"run": %d, "n": {{count}}}', interval: 1s}
    pipeline: {processors: [{type: json}]}
    output: {type: drop}
`, r+1, r+1)
}

// rolloutRun is one rollout's measurements.
type rolloutRun struct {
	id       string
	took     time.Duration   // POST sent -> succeeded seen
	hubTook  time.Duration   // the Hub's finished_at - created_at
	waves    []time.Duration // per wave: first seen current -> next seen current (or succeeded)
	hubCPU   time.Duration   // the Hub process's user+system CPU over took
	applies  int64           // configuration_apply commands the agents executed
	nWaves   int
	state    string
	failure  string
	progress string // phases at the end, when not succeeded
}

// runRollout is rollout mode: o.agents simulated agents that execute
// configuration commands; o.runs rollouts of a new configuration to all of
// them in waves of o.batch, one after the other, each timed from its
// create to its succeeded state, with the Hub's CPU over that time.
func runRollout(ctx context.Context, o options, hut *hubUnderTest) error {
	rec := newRecorder("register")
	cfg := agentConfig{streams: o.streams, reportEvery: o.reportEvery, changeProb: 0, waitMS: o.waitMS, configControl: true}
	fmt.Printf("rollout mode: %d agents, %d rollouts in waves of %d (gate timeout %d ms, each bounded by %s); %d streams per report, report every %s\n",
		o.agents, o.runs, o.batch, o.gateTimeoutMS, o.rolloutTimeout, o.streams, o.reportEvery)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	sw := startSwarm(sctx, hut, rec, cfg, o.agents, o.ramp, o.conns, "node-")
	defer func() {
		stop()
		if !sw.wait(45 * time.Second) {
			fmt.Println("warning: some agent goroutines did not stop within 45 s")
		}
	}()
	took := sw.awaitRegistered(ctx, o.ramp+2*time.Minute)
	if n := sw.registered.Load(); n < int64(o.agents) {
		return fmt.Errorf("only %d of %d agents registered (%d gave up); see %s", n, o.agents, sw.failed.Load(), hut.logPath)
	}
	op := &client{base: hut.base, hc: &http.Client{Timeout: 10 * time.Second}}
	online, err := awaitOnline(ctx, op, hut.opToken, o.agents, time.Minute)
	if err != nil {
		return err
	}
	fmt.Printf("%d agents registered in %s, %d online\n", o.agents, took.Round(time.Millisecond), online)

	// The Hub's CPU with the fleet idle (heartbeats, reports, long-polls),
	// to set the rollouts' figures against.
	var idle time.Duration
	if o.baseline > 0 {
		c0, _ := cpuTime(hut.pid)
		if sleep(ctx, o.baseline) != nil {
			return ctx.Err()
		}
		c1, _ := cpuTime(hut.pid)
		idle = c1 - c0
		fmt.Printf("idle fleet: hub CPU %.2fs over %s (%.1f%%)\n", idle.Seconds(), o.baseline, 100*cores(idle, o.baseline))
	}

	ids := make([]string, len(sw.agents))
	for i, a := range sw.agents {
		ids[i] = a.id
	}
	var runs []rolloutRun
	var errs []error
	rec.measuring.Store(true)
	for r := range o.runs {
		run, err := rolloutOnce(ctx, o, hut, op, sw, ids, r)
		if err != nil {
			errs = append(errs, fmt.Errorf("run %d: %w", r+1, err))
			if run.id == "" || ctx.Err() != nil {
				break // no rollout was created, or we are out of time: the next would fare no better
			}
		}
		runs = append(runs, run)
	}
	rec.measuring.Store(false)
	printRollouts(o, runs, idle)
	fmt.Printf("agent calls from the first rollout's create to the last one's end (latency from request to answer, as the agent sees it):\n")
	rec.print([]string{"heartbeat", "report", "poll", "result"}, map[string]bool{"heartbeat": true, "report": true, "result": true})
	fmt.Printf("registration:\n")
	rec.print([]string{"register"}, map[string]bool{"register": true})
	fmt.Printf("errors, whole run: %d\n", rec.totalErrors())
	return errors.Join(errs...)
}

// awaitOnline waits until /status counts want nodes online, at most limit.
func awaitOnline(ctx context.Context, op *client, token string, want int, limit time.Duration) (int, error) {
	deadline := time.Now().Add(limit)
	online := -1
	for {
		var st hub.Status
		if _, err := op.do(ctx, "GET", apiPrefix+"/status", token, nil, &st); err == nil {
			online = st.Nodes.Online
			if online >= want {
				return online, nil
			}
		}
		if time.Now().After(deadline) {
			return online, fmt.Errorf("%d of %d nodes online after %s", online, want, limit)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return online, err
		}
	}
}

// rolloutOnce creates rollout r of a new configuration to every node and
// follows it until it ends or o.rolloutTimeout passes.
func rolloutOnce(ctx context.Context, o options, hut *hubUnderTest, op *client, sw *swarm, ids []string, r int) (rolloutRun, error) {
	var run rolloutRun
	applies0 := totalApplies(sw)
	req := wire.RolloutCreateRequest{Configuration: &wire.ConfigDocument{Format: "yaml", Content: rolloutConfig(r)},
		NodeIDs: ids, BatchSize: o.batch, GateTimeoutMS: o.gateTimeoutMS}
	cpu0, _ := cpuTime(hut.pid)
	t0 := time.Now()
	var ro wire.Rollout
	if _, err := op.do(ctx, "POST", apiPrefix+"/rollouts", hut.opToken, req, &ro); err != nil {
		var he *httpError
		if errors.As(err, &he) && (he.status == http.StatusNotFound || he.status == http.StatusMethodNotAllowed) && he.code != "node_not_found" {
			return run, fmt.Errorf("create rollout: %w (does this Hub have the rollout API?)", err)
		}
		return run, fmt.Errorf("create rollout: %w", err)
	}
	run.id = ro.RolloutID
	fmt.Printf("run %d: rollout %s created in %s (%d waves)\n", r+1, ro.RolloutID, time.Since(t0).Round(time.Millisecond), len(ro.Waves))

	waveSeen := map[int]time.Time{} // wave -> when a poll first showed it current
	deadline := t0.Add(o.rolloutTimeout)
	lastPrint := t0
	var end time.Time
	for {
		if ro.CurrentWave > 0 {
			if _, ok := waveSeen[ro.CurrentWave]; !ok {
				waveSeen[ro.CurrentWave] = time.Now()
			}
		}
		if rolloutFinished(ro.State) {
			end = time.Now()
			break
		}
		if time.Now().After(deadline) {
			end = time.Now()
			break
		}
		if time.Since(lastPrint) >= 5*time.Second {
			lastPrint = time.Now()
			fmt.Printf("  ... %s: %s, wave %d/%d, %s\n", time.Since(t0).Round(time.Second), ro.State, ro.CurrentWave, len(ro.Waves), phases(ro))
		}
		if err := sleep(ctx, rolloutPoll); err != nil {
			return run, err
		}
		var next wire.Rollout
		if _, err := op.do(ctx, "GET", apiPrefix+"/rollouts/"+run.id, hut.opToken, nil, &next); err != nil {
			fmt.Printf("  ... GET rollout: %v\n", err)
			continue
		}
		ro = next
	}
	cpu1, _ := cpuTime(hut.pid)
	run.took, run.hubCPU, run.state, run.nWaves = end.Sub(t0), cpu1-cpu0, ro.State, len(ro.Waves)
	if !ro.FinishedAt.IsZero() && !ro.CreatedAt.IsZero() {
		run.hubTook = ro.FinishedAt.Sub(ro.CreatedAt.Time)
	}
	run.waves = waveDurations(waveSeen, len(ro.Waves), end)
	run.applies = totalApplies(sw) - applies0
	if ro.State == wire.RolloutSucceeded {
		fmt.Printf("run %d: succeeded in %s (%d applies), hub CPU %.2fs (%.1f%%)\n", r+1, run.took.Round(time.Millisecond),
			run.applies, run.hubCPU.Seconds(), 100*cores(run.hubCPU, run.took))
		return run, nil
	}
	run.progress = phases(ro)
	if ro.Failure != nil {
		run.failure = ro.Failure.Code + ": " + truncate(ro.Failure.Message, 200)
	}
	if rolloutFinished(ro.State) {
		return run, fmt.Errorf("rollout %s ended %s after %s (%s; nodes %s)", run.id, ro.State, run.took.Round(time.Millisecond), run.failure, run.progress)
	}
	return run, fmt.Errorf("rollout %s still %s after %s (wave %d/%d; nodes %s)", run.id, ro.State, o.rolloutTimeout, ro.CurrentWave, len(ro.Waves), run.progress)
}

// rolloutFinished reports whether a rollout in state s moves no more.
func rolloutFinished(s string) bool {
	switch s {
	case wire.RolloutSucceeded, wire.RolloutFailed, wire.RolloutCancelled, wire.RolloutRolledBack:
		return true
	}
	return false
}

// phases counts a rollout's nodes by phase, e.g. "passed 20, applying 10, waiting 70".
func phases(ro wire.Rollout) string {
	n := map[string]int{}
	for _, x := range ro.Nodes {
		n[x.Phase]++
	}
	order := []string{wire.RolloutNodePassed, wire.RolloutNodeSoaking, wire.RolloutNodeApplying, wire.RolloutNodeWaiting,
		wire.RolloutNodeFailed, wire.RolloutNodeSkipped, wire.RolloutNodeRollingBack, wire.RolloutNodeRolledBack}
	var parts []string
	for _, p := range order {
		if n[p] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", p, n[p]))
			delete(n, p)
		}
	}
	for p, c := range n { // phases this program does not know
		parts = append(parts, fmt.Sprintf("%s %d", p, c))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// waveDurations turns the times each wave was first seen current into
// each wave's duration, the last ending at end. A wave never seen (passed
// between two polls) is 0 and its time counts to the wave seen before it.
func waveDurations(seen map[int]time.Time, waves int, end time.Time) []time.Duration {
	out := make([]time.Duration, waves)
	for w := 1; w <= waves; w++ {
		start, ok := seen[w]
		if !ok {
			continue
		}
		stop := end
		for v := w + 1; v <= waves; v++ {
			if t, ok := seen[v]; ok {
				stop = t
				break
			}
		}
		out[w-1] = stop.Sub(start)
	}
	return out
}

func totalApplies(sw *swarm) int64 {
	var n int64
	for _, a := range sw.agents {
		n += a.configApplies()
	}
	return n
}

// printRollouts prints the summary of the runs.
func printRollouts(o options, runs []rolloutRun, idle time.Duration) {
	fmt.Println()
	fmt.Println("== hub rollout benchmark")
	fmt.Printf("machine        %d cores (GOMAXPROCS %d), %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Printf("rollouts       %d agents, waves of %d, gate timeout %d ms, progress read every %s\n", o.agents, o.batch, o.gateTimeoutMS, rolloutPoll)
	if o.baseline > 0 {
		fmt.Printf("idle fleet     hub CPU %.1f%% of a core (%s before the first rollout)\n", 100*cores(idle, o.baseline), o.baseline)
	}
	var ok []time.Duration
	for i, r := range runs {
		hubSide := "-"
		if r.hubTook > 0 {
			hubSide = r.hubTook.Round(time.Millisecond).String()
		}
		fmt.Printf("run %d         %s %s: create -> end %s (hub created_at -> finished_at %s), %d waves, %d applies; hub CPU %.2fs user+sys = %.1f%% of a core\n",
			i+1, r.id, r.state, r.took.Round(time.Millisecond), hubSide, r.nWaves, r.applies, r.hubCPU.Seconds(), 100*cores(r.hubCPU, r.took))
		var ws []string
		for _, w := range r.waves {
			ws = append(ws, fmt.Sprintf("%.1f", w.Seconds()))
		}
		if len(ws) > 0 {
			fmt.Printf("               per wave (s, as polled): %s\n", strings.Join(ws, " "))
		}
		if r.state != wire.RolloutSucceeded {
			fmt.Printf("               not succeeded: %s; nodes %s\n", r.failure, r.progress)
		} else {
			ok = append(ok, r.took)
		}
	}
	if len(ok) > 0 {
		slices.Sort(ok)
		fmt.Printf("create -> succeeded over %d run(s): min %s, median %s, max %s\n", len(ok),
			ok[0].Round(time.Millisecond), ok[len(ok)/2].Round(time.Millisecond), ok[len(ok)-1].Round(time.Millisecond))
	}
	_ = os.Stdout.Sync()
}
