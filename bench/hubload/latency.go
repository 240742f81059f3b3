package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// deliveryTimeout bounds how long one write waits for its command.
const deliveryTimeout = 10 * time.Second

// tracker matches commands delivered to agents with the writes that made
// them (command_id == operation_id). Either side may come first: the
// command can arrive before the writer has read its 202. mu guards ops.
type tracker struct {
	mu   sync.Mutex
	ops  map[string]*tracked
	dups atomic.Int64
}

type tracked struct {
	at                 time.Time     // when the poll returned the command; set before delivered closes
	delivered, handled chan struct{} // closed once each
	gotIt, doneIt      bool
}

func (t *tracker) get(id string) *tracked {
	t.mu.Lock()
	defer t.mu.Unlock()
	x := t.ops[id]
	if x == nil {
		x = &tracked{delivered: make(chan struct{}), handled: make(chan struct{})}
		t.ops[id] = x
	}
	return x
}

func (t *tracker) delivered(c wire.Command, at time.Time) {
	x := t.get(c.CommandID)
	t.mu.Lock()
	defer t.mu.Unlock()
	if x.gotIt {
		t.dups.Add(1)
		return
	}
	x.gotIt, x.at = true, at
	close(x.delivered)
}

func (t *tracker) handled(c wire.Command) {
	x := t.get(c.CommandID)
	t.mu.Lock()
	defer t.mu.Unlock()
	if !x.doneIt {
		x.doneIt = true
		close(x.handled)
	}
}

func (t *tracker) forget(id string) {
	t.mu.Lock()
	delete(t.ops, id)
	t.mu.Unlock()
}

// runLatency is latency mode: o.pollers agents long-poll; o.writers write
// o.writes desired states, each to one poller's stream, and measure the
// time from sending the PUT to the poll that returns its command, and to
// the 202. Each writer waits until the agent executed the command (ack,
// success, report) and polls again before its next write.
func runLatency(ctx context.Context, o options, hut *hubUnderTest) error {
	rec := newRecorder("register")
	fmt.Printf("latency mode: %d writes by %d writer(s) to %d long-polling agent(s), wait_ms %d, %d background agents\n",
		o.writes, o.writers, o.pollers, o.waitMS, o.background)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	var bg *swarm
	if o.background > 0 {
		cfg := agentConfig{streams: o.streams, reportEvery: o.reportEvery, changeProb: o.changeProb, waitMS: o.waitMS}
		bg = startSwarm(sctx, hut, rec, cfg, o.background, o.ramp, o.conns, "bg-")
		took := bg.awaitRegistered(ctx, o.ramp+2*time.Minute)
		fmt.Printf("background: %d/%d agents registered in %s\n", bg.registered.Load(), o.background, took.Round(time.Millisecond))
		if sleep(ctx, o.warmup) != nil {
			return ctx.Err()
		}
	}

	tr := &tracker{ops: map[string]*tracked{}}
	c := &client{base: hut.base, hc: &http.Client{Transport: newTransport(4*o.pollers + 16)}}
	cfg := agentConfig{streams: 0, reportEvery: o.reportEvery, waitMS: o.waitMS}
	pollers := make([]*simAgent, o.pollers)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for i := range pollers {
		a := newSimAgent(c, rec, hut.nodeToken, cfg, "lat-"+strconv.Itoa(i))
		a.onCommand, a.executed = tr.delivered, tr.handled
		if err := a.register(ctx); err != nil {
			return fmt.Errorf("register %s: %w", a.id, err)
		}
		if err := a.report(ctx, false); err != nil {
			return fmt.Errorf("report %s: %w", a.id, err)
		}
		pollers[i] = a
		wg.Add(2)
		go func() { defer wg.Done(); a.pollLoop(sctx) }()
		go func() { defer wg.Done(); a.beatLoop(sctx) }()
	}
	// Let the first polls reach the Hub.
	if sleep(ctx, 500*time.Millisecond) != nil {
		return ctx.Err()
	}

	stopProfile, err := startProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	op := &client{base: hut.base, hc: &http.Client{Transport: newTransport(o.writers + 4)}}
	var (
		mu                      sync.Mutex
		accepted, delivered     []time.Duration
		writeErrs, lost, slowly int
		next                    atomic.Int64
	)
	hub0, _ := cpuTime(hut.pid)
	gen0, _ := cpuTime(os.Getpid())
	busy0, _ := machineBusy()
	load0 := loadAverage()
	t0 := time.Now()
	rec.measuring.Store(true)
	var ww sync.WaitGroup
	for range o.writers {
		ww.Add(1)
		go func() {
			defer ww.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= o.writes || ctx.Err() != nil {
					return
				}
				a := pollers[i%len(pollers)]
				k := i / len(pollers)
				stream := "w" + strconv.Itoa(k%8)
				state := "running"
				if (k/8)%2 == 1 {
					state = "stopped"
				}
				var res wire.DesiredStateResponse
				start := time.Now()
				_, err := op.do(ctx, "PUT", apiPrefix+"/nodes/"+a.id+"/streams/"+stream+"/desired-state", hut.opToken,
					map[string]string{"state": state, "config_version": "v1"}, &res)
				acceptedIn := time.Since(start)
				if err != nil {
					mu.Lock()
					writeErrs++
					mu.Unlock()
					rec.fail("write", err)
					continue
				}
				x := tr.get(res.OperationID)
				var got time.Duration
				gotOK := false
				select {
				case <-x.delivered:
					got, gotOK = x.at.Sub(start), true
				case <-time.After(deliveryTimeout):
				case <-ctx.Done():
					return
				}
				handled := true
				if gotOK {
					select {
					case <-x.handled:
					case <-time.After(deliveryTimeout):
						handled = false
					case <-ctx.Done():
						return
					}
				}
				tr.forget(res.OperationID)
				mu.Lock()
				accepted = append(accepted, acceptedIn)
				if gotOK {
					delivered = append(delivered, got)
				} else {
					lost++
				}
				if !handled {
					slowly++
				}
				mu.Unlock()
			}
		}()
	}
	ww.Wait()
	rec.measuring.Store(false)
	elapsed := time.Since(t0)
	hub1, _ := cpuTime(hut.pid)
	gen1, _ := cpuTime(os.Getpid())
	busy1, _ := machineBusy()
	mem, _ := memoryOf(hut.pid)
	stopProfile()
	if err := writeHeapProfile(o.memProfile); err != nil {
		return err
	}
	stop()
	wg.Wait()
	if bg != nil && !bg.wait(45*time.Second) {
		fmt.Println("warning: some background agent goroutines did not stop within 45 s")
	}

	fmt.Println()
	fmt.Println("== hub write-to-delivery latency benchmark")
	fmt.Printf("writes         %d in %s (%.0f/s) by %d writer(s) to %d agent(s); %d background agents\n",
		len(accepted), elapsed.Round(time.Millisecond), float64(len(accepted))/elapsed.Seconds(), o.writers, o.pollers, o.background)
	fmt.Printf("PUT -> delivered   %s  (target p99 < 50ms)\n", percentiles(delivered))
	fmt.Printf("PUT -> 202         %s\n", percentiles(accepted))
	fmt.Printf("failures       %d write errors, %d commands not delivered within %s, %d not executed in time, %d duplicate deliveries\n",
		writeErrs, lost, deliveryTimeout, slowly, tr.dups.Load())
	fmt.Printf("agent calls while writing:\n")
	rec.print([]string{"result", "report", "heartbeat"}, map[string]bool{"result": true, "report": true, "heartbeat": true})
	who := "hub process"
	if hut.inProcess {
		who = "hub+agents (in-process!)"
	}
	fmt.Printf("%-14s CPU %.3f cores while writing; RSS %s, peak %s\n", who, cores(hub1-hub0, elapsed), mib(mem.RSS), mib(mem.HWM))
	fmt.Printf("machine        busy %.2f of %d cores, of which %.2f neither the hub nor the load generator; load average %s -> %s\n",
		cores(busy1-busy0, elapsed), runtime.NumCPU(), cores(busy1-busy0-(hub1-hub0)-otherIfChild(hut, gen1-gen0), elapsed), load0, loadAverage())
	fmt.Printf("errors, whole run: %d\n", rec.totalErrors())
	return nil
}
