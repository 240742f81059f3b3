package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// apiPrefix is the Hub's default API prefix.
const apiPrefix = "/api/v1"

// agentConfig is what every simulated agent of a run shares.
type agentConfig struct {
	streams     int           // streams each agent reports
	reportEvery time.Duration // report period
	changeProb  float64       // probability that a report carries a state change
	waitMS      int           // long-poll wait_ms
	// configControl: the agents advertise config_control, execute
	// configuration commands and report their configuration (rollout mode).
	configControl bool
}

// simAgent speaks the agent protocol over HTTP like a real Agent: it
// registers with the node token, then heartbeats, reports and long-polls
// with its session token, and registers again on 401 session_expired.
type simAgent struct {
	c         *client
	rec       *recorder
	nodeToken string
	cfg       agentConfig
	id, boot  string
	// onCommand, when set, is called with each command as soon as a poll
	// returns it (latency mode); the agent then executes it.
	onCommand func(cmd wire.Command, at time.Time)
	// executed, when set, is called after a command was executed and reported.
	executed func(cmd wire.Command)
	// done counts the commands executed and reported.
	done atomic.Int64

	regMu sync.Mutex // serialises re-registration

	mu      sync.Mutex // guards the fields below
	session string
	hbEvery time.Duration
	seq     int64
	streams []wire.ReportStream
	counter uint64
	conf    simConfig // with cfg.configControl
}

func newSimAgent(c *client, rec *recorder, nodeToken string, cfg agentConfig, id string) *simAgent {
	a := &simAgent{c: c, rec: rec, nodeToken: nodeToken, cfg: cfg, id: id, boot: "boot-" + id + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	for i := range cfg.streams {
		a.streams = append(a.streams, wire.ReportStream{ID: "s" + strconv.Itoa(i), State: "running", ConfigVersion: "v1"})
	}
	a.conf.nodeVersion = 1 // the configuration it booted with
	return a
}

func (a *simAgent) token() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.session
}

// register obtains a session; the answer sets the heartbeat interval.
func (a *simAgent) register(ctx context.Context) error {
	start := time.Now()
	var out wire.RegisterResponse
	_, err := a.c.do(ctx, "POST", apiPrefix+"/agent/register", a.nodeToken, wire.RegisterRequest{NodeID: a.id, BootID: a.boot,
		Version: "hubload", ProtocolVersion: wire.ProtocolVersion, Capabilities: a.capabilities(),
		NodeCredential: "hubload-node-credential-0123456789-" + a.id}, &out)
	if err != nil {
		if ctx.Err() == nil {
			a.rec.fail("register", err)
		}
		return err
	}
	a.rec.ok("register", time.Since(start))
	a.mu.Lock()
	a.session, a.hbEvery = out.SessionToken, time.Duration(out.HeartbeatIntervalMS)*time.Millisecond
	a.mu.Unlock()
	return nil
}

// registerRetrying registers, trying up to five times a second apart.
func (a *simAgent) registerRetrying(ctx context.Context) error {
	var err error
	for range 5 {
		if err = a.register(ctx); err == nil || ctx.Err() != nil {
			return err
		}
		if sleep(ctx, time.Second) != nil {
			return ctx.Err()
		}
	}
	return err
}

// reregister registers again after old was refused, unless another
// goroutine of this agent already did.
func (a *simAgent) reregister(ctx context.Context, old string) error {
	a.regMu.Lock()
	defer a.regMu.Unlock()
	if a.token() != old {
		return nil
	}
	return a.register(ctx)
}

// call is one session-authenticated agent call, recorded as kind. A 401
// re-registers and retries once.
func (a *simAgent) call(ctx context.Context, kind, method, path string, body, out any) error {
	for try := 0; ; try++ {
		tok := a.token()
		start := time.Now()
		_, err := a.c.do(ctx, method, apiPrefix+"/agent"+path, tok, body, out)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var he *httpError
		if errors.As(err, &he) && he.status == http.StatusUnauthorized && try == 0 {
			a.rec.fail(kind, err)
			if err := a.reregister(ctx, tok); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			a.rec.fail(kind, err)
			return err
		}
		a.rec.ok(kind, time.Since(start))
		return nil
	}
}

func (a *simAgent) heartbeat(ctx context.Context) error {
	return a.call(ctx, "heartbeat", "POST", "/heartbeat",
		wire.HeartbeatRequest{BootID: a.boot, Capabilities: a.capabilities()}, nil)
}

// capabilities are what the agent advertises at register and heartbeat.
func (a *simAgent) capabilities() []string {
	if a.cfg.configControl {
		return []string{wire.CapabilityStreamControl, wire.CapabilityConfigControl}
	}
	return []string{wire.CapabilityStreamControl}
}

// report sends the streams as they are; with probability changeProb one
// stream changes state first. Counters move at every report, as a running
// node's would; the Hub compares states, not counters.
func (a *simAgent) report(ctx context.Context, mayChange bool) error {
	a.mu.Lock()
	if mayChange && len(a.streams) > 0 && rand.Float64() < a.cfg.changeProb {
		s := &a.streams[rand.IntN(len(a.streams))]
		if s.State == "running" {
			s.State = "stopped"
		} else {
			s.State = "running"
		}
	}
	a.seq++
	a.counter += 1000
	rep := wire.Report{BootID: a.boot, ReportSeq: a.seq, ConfigurationVersion: "v1",
		Metrics: map[string]float64{"streams_running": float64(len(a.streams)), "heap_bytes": 3.2e7, "goroutines": 42}}
	if a.cfg.configControl {
		rc := a.conf.report()
		rep.ConfigurationVersion, rep.Configuration = rc.NodeVersion, &rc
	}
	for _, s := range a.streams {
		s.Counters = &wire.StreamCounters{Received: a.counter, Sent: a.counter}
		rep.Streams = append(rep.Streams, s)
	}
	a.mu.Unlock()
	return a.call(ctx, "report", "POST", "/report", rep, nil)
}

// beatLoop heartbeats at the interval the Hub gave and reports every
// reportEvery, each starting at a random phase, until ctx ends.
func (a *simAgent) beatLoop(ctx context.Context) {
	a.mu.Lock()
	hbEvery := a.hbEvery
	a.mu.Unlock()
	if hbEvery <= 0 {
		hbEvery = 5 * time.Second
	}
	nextHB := time.Now().Add(rand.N(hbEvery))
	nextRep := time.Now().Add(rand.N(a.cfg.reportEvery))
	t := time.NewTimer(time.Until(minTime(nextHB, nextRep)))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		if !now.Before(nextHB) {
			_ = a.heartbeat(ctx)
			nextHB = nextHB.Add(hbEvery)
		}
		if !now.Before(nextRep) {
			_ = a.report(ctx, true)
			nextRep = nextRep.Add(a.cfg.reportEvery)
		}
		t.Reset(time.Until(minTime(nextHB, nextRep)))
	}
}

// pollLoop long-polls for commands until ctx ends and executes what comes.
func (a *simAgent) pollLoop(ctx context.Context) {
	path := "/commands?wait_ms=" + strconv.Itoa(a.cfg.waitMS)
	for ctx.Err() == nil {
		start := time.Now()
		var page wire.Page[wire.Command]
		err := a.call(ctx, "poll", "GET", path, nil, &page)
		at := time.Now()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			_ = sleep(ctx, time.Second)
			continue
		}
		for _, c := range page.Items {
			if a.onCommand != nil {
				a.onCommand(c, at)
			}
		}
		for _, c := range page.Items {
			a.execute(ctx, c)
		}
		// An empty answer long before wait_ms is not a long-poll: do not spin.
		if len(page.Items) == 0 && at.Sub(start) < time.Duration(a.cfg.waitMS)*time.Millisecond/2 {
			a.rec.fail("poll", fmt.Errorf("%w: empty answer after %s", errEarlyPoll, at.Sub(start)))
			_ = sleep(ctx, time.Second)
		}
	}
}

var errEarlyPoll = errors.New("early empty poll")

// execute acknowledges a command, applies it to the reported streams (or
// to the simulated configuration), reports success and sends a report that
// shows it, as an Agent does.
func (a *simAgent) execute(ctx context.Context, c wire.Command) {
	res := "/commands/" + c.CommandID + "/result"
	if a.call(ctx, "result", "POST", res, wire.CommandResult{AttemptID: c.AttemptID, State: wire.ResultAcknowledged}, nil) != nil {
		return
	}
	switch c.Operation {
	case wire.CommandConfigApply, wire.CommandConfigValidate, wire.CommandConfigDiff:
		a.executeConfig(ctx, c, res)
		return
	}
	a.mu.Lock()
	found := false
	for i := range a.streams {
		if a.streams[i].ID == c.ResourceID {
			a.streams[i].State, a.streams[i].Generation, a.streams[i].ActionID = c.Payload.State, c.Generation, c.ActionID
			found = true
		}
	}
	if !found {
		a.streams = append(a.streams, wire.ReportStream{ID: c.ResourceID, State: c.Payload.State, Generation: c.Generation,
			ConfigVersion: "v1", ActionID: c.ActionID})
	}
	a.mu.Unlock()
	if a.call(ctx, "result", "POST", res, wire.CommandResult{AttemptID: c.AttemptID, State: wire.ResultSucceeded}, nil) != nil {
		return
	}
	if a.report(ctx, false) != nil {
		return
	}
	a.done.Add(1)
	if a.executed != nil {
		a.executed(c)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
