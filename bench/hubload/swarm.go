package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// swarm is a set of simulated agents started over a ramp. Each agent,
// once registered, sends a first report and then runs two goroutines: the
// heartbeat/report loop and the long-poll loop, until ctx ends.
type swarm struct {
	agents     []*simAgent
	registered atomic.Int64
	failed     atomic.Int64
	wg         sync.WaitGroup
}

// connsShared and connsPerAgent are the values of -conns.
const (
	connsShared   = "shared"
	connsPerAgent = "per-agent"
)

// startSwarm starts n agents named prefix0..prefix<n-1>, spread evenly over
// ramp. conns is connsShared (one transport for all: a long-poll
// connection per agent plus a pool for heartbeats and reports) or
// connsPerAgent (a transport of its own per agent, up to two connections,
// as separate Agent processes would hold).
func startSwarm(ctx context.Context, hut *hubUnderTest, rec *recorder, cfg agentConfig, n int, ramp time.Duration, conns, prefix string) *swarm {
	s := &swarm{agents: make([]*simAgent, n)}
	var shared *client
	if conns == connsShared {
		shared = &client{base: hut.base, hc: &http.Client{Transport: newTransport(n + n/2 + 64)}}
	}
	for i := range n {
		c := shared
		if c == nil {
			c = &client{base: hut.base, hc: &http.Client{Transport: newTransport(2)}}
		}
		s.agents[i] = newSimAgent(c, rec, hut.nodeToken, cfg, fmt.Sprintf("%s%05d", prefix, i))
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		start := time.Now()
		for i, a := range s.agents {
			at := start.Add(ramp * time.Duration(i) / time.Duration(n))
			if d := time.Until(at); d > 0 && sleep(ctx, d) != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				if err := a.registerRetrying(ctx); err != nil {
					s.failed.Add(1)
					return
				}
				s.registered.Add(1)
				_ = a.report(ctx, false)
				s.wg.Add(2)
				go func() { defer s.wg.Done(); a.pollLoop(ctx) }()
				go func() { defer s.wg.Done(); a.beatLoop(ctx) }()
			}()
		}
	}()
	return s
}

// awaitRegistered waits until every agent registered or gave up, or limit
// passes, printing progress; it returns how long that took.
func (s *swarm) awaitRegistered(ctx context.Context, limit time.Duration) time.Duration {
	start := time.Now()
	n := int64(len(s.agents))
	lastPrint := start
	for s.registered.Load()+s.failed.Load() < n && time.Since(start) < limit {
		if sleep(ctx, 100*time.Millisecond) != nil {
			break
		}
		if time.Since(lastPrint) >= 5*time.Second {
			lastPrint = time.Now()
			fmt.Printf("  ... %d/%d registered after %s\n", s.registered.Load(), n, time.Since(start).Round(time.Second))
		}
	}
	return time.Since(start)
}

// wait waits for every goroutine of the swarm after ctx ended, at most limit.
func (s *swarm) wait(limit time.Duration) bool {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(limit):
		return false
	}
}
