package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/hub"
	"github.com/flowplane/flowplane/internal/pgtest"
	"github.com/flowplane/flowplane/internal/wire"
)

// The HA failure tests run PostgreSQL (pgtest), two Hub child processes on
// one database with a 3 s leader lease, and two Agents listing both Hubs
// in hub_urls, and break one part at a time under load.

// haLeaseTTL keeps failovers short: the shortest lease the Hub takes.
const haLeaseTTL = "3s"

// haCluster is PostgreSQL, two Hubs on its database hub and two Agents.
type haCluster struct {
	pg        *pgtest.Server
	db        string // the database's URI, as the Hubs' events are read
	hubs      []*fleetHub
	nodes     []*fleetNode
	resources []resKey // the streams the load writes to
	client    *http.Client
}

// startHACluster starts the cluster. Hub i connects as role (the
// server's user flowplane when empty) with application_name hub-a, hub-b.
func startHACluster(t *testing.T, roles ...string) *haCluster {
	t.Helper()
	pg := pgtest.Start(t)
	// The Hubs' roles act as role hubs, which owns the database and so
	// what either Hub's migrations create. They are not superusers: a
	// superuser ignores CONNECTION LIMIT.
	pg.Exec(t, "CREATE ROLE hubs NOLOGIN", "CREATE DATABASE hub OWNER hubs")
	for _, r := range roles {
		if r != "" {
			pg.Exec(t, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s' IN ROLE hubs", r, pgtest.Password),
				"ALTER ROLE "+r+" SET role = 'hubs'")
		}
	}
	c := &haCluster{pg: pg, db: pg.DatabaseURI("hub"), client: newHubClient(t, 32)}
	dir := t.TempDir()
	for i, name := range []string{"hub-a", "hub-b"} {
		uri := c.db + "&application_name=" + name
		if i < len(roles) && roles[i] != "" {
			uri = strings.Replace(uri, "//flowplane:", "//"+roles[i]+":", 1)
		}
		h := &fleetHub{owner: t, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), storage: uri}
		// The operator token of hubDo, so that verifyDurable reads these Hubs.
		h.env = []string{hub.EnvOperatorToken + "=" + hubOperatorToken, hub.EnvLeaseTTL + "=" + haLeaseTTL,
			hub.EnvAdvertiseURL + "=" + h.url()}
		h.start(t) // one after the other: the first one migrates the empty database
		c.hubs = append(c.hubs, h)
	}
	urls := []string{c.hubs[0].url(), c.hubs[1].url()}
	for _, id := range []string{"node-1", "node-2"} {
		n := newFleetNode(t, dir, id, urls, "")
		n.start(t)
		c.nodes = append(c.nodes, n)
		for _, s := range fleetStreams[:8] {
			c.resources = append(c.resources, resKey{id, s})
		}
	}
	for _, n := range c.nodes {
		waitUntil(t, n.id+" online", func() bool {
			var v hub.NodeView
			st, err := hubGetJSON(context.Background(), c.client, c.hubs[0].url()+"/api/v1/nodes/"+n.id, &v)
			return err == nil && st == http.StatusOK && v.Status == "online"
		})
	}
	return c
}

// haTest runs in parallel, skipped with -short, on a cluster of
// startHACluster; ctx ends with the test, after 3 minutes at the latest (a
// hang guard, not a timing assertion).
func haTest(t *testing.T, roles ...string) (*haCluster, context.Context) {
	t.Helper()
	t.Parallel()
	if testing.Short() {
		t.Skip("starts PostgreSQL, two Hubs and two Agents")
	}
	c := startHACluster(t, roles...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return c, ctx
}

// ha reads a Hub's part in the lease.
func (c *haCluster) ha(h *fleetHub) (hub.HA, error) {
	var s hub.System
	st, err := hubGetJSON(context.Background(), c.client, h.url()+"/api/v1/system", &s)
	if err == nil && st != http.StatusOK {
		err = fmt.Errorf("GET %s/api/v1/system: status %d", h.url(), st)
	}
	return s.HA, err
}

// waitLeader waits until one of hubs says it leads at an epoch above
// after and returns it with its view.
func (c *haCluster) waitLeader(t *testing.T, after int64, hubs ...*fleetHub) (*fleetHub, hub.HA) {
	t.Helper()
	var (
		leader *fleetHub
		view   hub.HA
	)
	waitUntil(t, fmt.Sprintf("a Hub leading at an epoch above %d", after), func() bool {
		for _, h := range hubs {
			v, err := c.ha(h)
			if err == nil && v.Role == "leader" && v.Epoch > after {
				leader, view = h, v
				return true
			}
		}
		return false
	})
	return leader, view
}

// other is the Hub that is not h.
func (c *haCluster) other(h *fleetHub) *fleetHub {
	if c.hubs[0] == h {
		return c.hubs[1]
	}
	return c.hubs[0]
}

// haLoad is desired-state writes by many clients through every live Hub.
type haLoad struct {
	c      *haCluster
	ctx    context.Context
	stop   chan struct{}
	once   sync.Once // stopLoad's
	wg     sync.WaitGroup
	down   atomic.Bool  // set by the test: the database is down
	phase  atomic.Int32 // set by the test; acksIn counts 202s per phase
	acksIn [4]atomic.Int64

	mu      sync.Mutex // guards the fields below
	acks    []ack
	errs    []error
	refused int // writes not answered 202 (a dead Hub, 503)
}

// startLoad runs workers clients, each writing at most perWorker times,
// alternating between the Hubs, until stopLoad.
func (c *haCluster) startLoad(ctx context.Context, workers, perWorker int) *haLoad {
	l := &haLoad{c: c, ctx: ctx, stop: make(chan struct{})}
	for w := range workers {
		l.wg.Go(func() {
			res := c.resources[w%len(c.resources)]
			for i := range perWorker {
				select {
				case <-l.stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				h := c.hubs[(w+i)%len(c.hubs)]
				body := fmt.Sprintf(`{"state":%q}`, []string{"running", "stopped"}[(w/len(c.resources)+i)%2])
				wasDown := l.down.Load()
				phase := l.phase.Load()
				r, err := hubDo(ctx, c.client, http.MethodPut, res.desiredURL(h.url()), body)
				switch {
				case err != nil || r.status == http.StatusServiceUnavailable:
					// A killed Hub, or one whose database is away: the
					// write's outcome is unknown, and not counted.
					l.mu.Lock()
					l.refused++
					l.mu.Unlock()
					time.Sleep(5 * time.Millisecond)
				case r.status == http.StatusAccepted:
					a, err := parseAccepted(r, res, "", body)
					if err == nil && wasDown && l.down.Load() {
						err = fmt.Errorf("%s: 202 (generation %d) while the database was down", res, a.gen)
					}
					l.mu.Lock()
					l.acks = append(l.acks, a)
					if err != nil {
						l.errs = append(l.errs, err)
					}
					l.mu.Unlock()
					l.acksIn[phase].Add(1)
				default:
					l.mu.Lock()
					l.errs = append(l.errs, fmt.Errorf("%s through %s: status %d: %s", res, h.url(), r.status, r.body))
					l.mu.Unlock()
					return
				}
			}
		})
	}
	return l
}

// setPhase starts counting 202s under phase p.
func (l *haLoad) setPhase(p int32) { l.phase.Store(p) }

// waitAcks waits until n writes were answered 202 in phase p; false when
// the load ended first or d passed.
func (l *haLoad) waitAcks(p int32, n int64, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for l.acksIn[p].Load() < n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// stopLoad ends the load and, the first time, reports its errors; it
// returns the 202s.
func (l *haLoad) stopLoad(t *testing.T) []ack {
	t.Helper()
	l.once.Do(func() {
		close(l.stop)
		l.wg.Wait()
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, err := range l.errs {
			t.Error(err)
		}
		t.Logf("load: %d writes answered 202 (%d, %d, %d, %d by phase), %d not answered or 503",
			len(l.acks), l.acksIn[0].Load(), l.acksIn[1].Load(), l.acksIn[2].Load(), l.acksIn[3].Load(), l.refused)
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acks
}

// verify requires, through the leader h: every 202 is stored whole
// (verifyDurable), every resource converges again, and no Agent ran a
// command twice. The other Hub, if it runs, stays up as a standby: Agents
// attached to it get the leader's commands through it, and the leader
// dispatches the writes it accepted.
func (c *haCluster) verify(ctx context.Context, t *testing.T, h *fleetHub, acks []ack) {
	t.Helper()
	verifyDurable(ctx, t, c.client, &hubProc{base: h.url(), storage: c.db}, c.resources, acks)
	c.waitConverged(t, h)
	c.checkRanOnce(t)
}

// waitConverged waits until every resource is in_sync at its desired
// generation, as h shows it.
func (c *haCluster) waitConverged(t *testing.T, h *fleetHub) {
	t.Helper()
	var pending []string
	deadline := time.Now().Add(60 * time.Second) // a hang guard, not a timing assertion
	for {
		pending = pending[:0]
		for _, res := range c.resources {
			var s wire.Stream
			u := h.url() + "/api/v1/nodes/" + url.PathEscape(res.node) + "/streams/" + url.PathEscape(res.stream)
			st, err := hubGetJSON(context.Background(), c.client, u, &s)
			if err != nil || st != http.StatusOK || s.Convergence != wire.ConvergenceInSync || s.Observed.Generation != s.Desired.Generation {
				pending = append(pending, fmt.Sprintf("%s (%s, desired %d, observed %d, status %d, %v)",
					res, s.Convergence, s.Desired.Generation, s.Observed.Generation, st, err))
			}
		}
		if len(pending) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not in_sync within 60 s: %s", strings.Join(pending, ", "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkRanOnce reads every node's operations (Node API): the Agent runs a
// Hub command as one node operation with the command id as correlation id,
// so two operations of the Hub with one correlation id are a command run
// twice.
func (c *haCluster) checkRanOnce(t *testing.T) {
	t.Helper()
	total := 0
	for _, n := range c.nodes {
		runs := map[string]int{}
		for page := 1; page <= 100; page++ {
			var pg wire.Page[wire.Operation]
			getJSON(t, fmt.Sprintf("%s/operations?page_size=100&page=%d", n.base(), page), &pg)
			for _, op := range pg.Items {
				if op.Actor == "hub" {
					runs[op.CorrelationID]++
				}
			}
			if len(pg.Items) == 0 || page*100 >= pg.Total {
				break
			}
		}
		for id, k := range runs {
			if k > 1 {
				t.Errorf("%s ran command %s %d times", n.id, id, k)
			}
		}
		total += len(runs)
	}
	if total == 0 {
		t.Error("the Agents ran no Hub command at all")
	}
	t.Logf("the Agents ran %d Hub commands, each once", total)
}

// TestHubFailoverKillLeader SIGKILLs the leading Hub while 32 clients
// write through both Hubs: the standby leads at a higher epoch, every
// write answered 202 is there, every resource converges again, and no
// Agent ran a command twice.
func TestHubFailoverKillLeader(t *testing.T) {
	c, ctx := haTest(t)
	leader, before := c.waitLeader(t, 0, c.hubs...)
	standby := c.other(leader)
	load := c.startLoad(ctx, 32, 200)
	defer load.stopLoad(t)
	if !load.waitAcks(0, 300, 60*time.Second) {
		t.Fatalf("300 writes not accepted before the kill")
	}
	load.setPhase(1)
	leader.kill(t)
	killed := time.Now()
	_, after := c.waitLeader(t, before.Epoch, standby)
	t.Logf("the standby leads at epoch %d (was %d) %v after the leader's SIGKILL (lease TTL %s)",
		after.Epoch, before.Epoch, time.Since(killed).Round(time.Millisecond), haLeaseTTL)
	if after.Leader == nil || after.Leader.Address != standby.url() {
		t.Errorf("the new leader names itself %+v, want address %s", after.Leader, standby.url())
	}
	load.setPhase(2)
	if !load.waitAcks(2, 200, 60*time.Second) {
		t.Errorf("200 writes not accepted through the new leader")
	}
	acks := load.stopLoad(t)
	if t.Failed() {
		t.FailNow()
	}
	c.verify(ctx, t, standby, acks)
}

// TestHubLeaderLosesDatabase takes the leading Hub's database away under
// load (its role gets CONNECTION LIMIT 0, its sessions are terminated):
// it steps down, the other Hub leads at a higher epoch, never are two
// Hubs leaders at once, and dispatch goes on; once it may log in again
// it serves as a standby.
func TestHubLeaderLosesDatabase(t *testing.T) {
	c, ctx := haTest(t, "hub_a", "hub_b")
	leader, before := c.waitLeader(t, 0, c.hubs...)
	standby := c.other(leader)
	app := "hub-a"
	role := "hub_a"
	if leader == c.hubs[1] {
		app, role = "hub-b", "hub_b"
	}

	// Both Hubs are asked where they stand, over and over, until the end.
	var (
		watchStop = make(chan struct{})
		watchDone = make(chan struct{})
		twoErr    error
		samples   int
	)
	go func() {
		defer close(watchDone)
		for {
			select {
			case <-watchStop:
				return
			default:
			}
			a, errA := c.ha(c.hubs[0])
			b, errB := c.ha(c.hubs[1])
			if errA == nil && errB == nil {
				samples++
				if a.Role == "leader" && b.Role == "leader" && twoErr == nil {
					twoErr = fmt.Errorf("both Hubs say they lead: epochs %d and %d", a.Epoch, b.Epoch)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	stopWatch := func() {
		select {
		case <-watchStop:
		default:
			close(watchStop)
		}
		<-watchDone
	}
	defer stopWatch()

	load := c.startLoad(ctx, 16, 400)
	defer load.stopLoad(t)
	if !load.waitAcks(0, 100, 60*time.Second) {
		t.Fatalf("100 writes not accepted before the database was taken away")
	}
	load.setPhase(1)
	c.pg.Exec(t, "ALTER ROLE "+role+" CONNECTION LIMIT 0",
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '"+app+"'")
	cut := time.Now()
	waitUntil(t, "the cut-off leader to step down", func() bool {
		v, err := c.ha(leader)
		return err == nil && v.Role == "standby"
	})
	t.Logf("the cut-off leader stepped down %v after its sessions were terminated", time.Since(cut).Round(time.Millisecond))
	_, after := c.waitLeader(t, before.Epoch, standby)
	t.Logf("the other Hub leads at epoch %d (was %d) %v after the cut", after.Epoch, before.Epoch, time.Since(cut).Round(time.Millisecond))
	load.setPhase(2)
	if !load.waitAcks(2, 100, 60*time.Second) {
		t.Errorf("100 writes not accepted after the cut")
	}
	c.pg.Exec(t, "ALTER ROLE "+role+" CONNECTION LIMIT -1")
	if !waitReadiness(leader.url(), http.StatusOK, 30*time.Second) {
		t.Errorf("the cut-off Hub is not ready within 30 s of getting its database back")
	}
	load.setPhase(3)
	if !load.waitAcks(3, 100, 60*time.Second) {
		t.Errorf("100 writes not accepted after the database came back")
	}
	acks := load.stopLoad(t)
	if t.Failed() {
		t.FailNow()
	}
	stopWatch()
	if twoErr != nil {
		t.Error(twoErr)
	}
	if samples < 10 {
		t.Errorf("only %d samples of both Hubs' roles", samples)
	}
	leaders := 0
	for _, h := range c.hubs {
		v, err := hubMetric(h, "svc_hub_leader")
		if err != nil {
			t.Error(err)
		}
		leaders += int(v)
	}
	if leaders != 1 {
		t.Errorf("svc_hub_leader sums to %d over both Hubs, want 1", leaders)
	}
	t.Logf("%d samples of both Hubs' roles, never two leaders", samples)
	c.verify(ctx, t, standby, acks)
}

// TestHubPostgresRestart stops PostgreSQL under load and starts it again:
// both Hubs answer /readiness 503 while it is down and no write is
// answered 202 then, both are ready again after, and every write answered
// 202 before, during and after is there.
func TestHubPostgresRestart(t *testing.T) {
	c, ctx := haTest(t)
	_, before := c.waitLeader(t, 0, c.hubs...)
	load := c.startLoad(ctx, 32, 200)
	defer load.stopLoad(t)
	if !load.waitAcks(0, 300, 60*time.Second) {
		t.Fatalf("300 writes not accepted before the restart")
	}
	load.setPhase(1)
	c.pg.Stop(t)
	load.down.Store(true)
	for _, h := range c.hubs {
		if !waitReadiness(h.url(), http.StatusServiceUnavailable, 20*time.Second) {
			t.Errorf("%s: /readiness not 503 within 20 s of PostgreSQL stopping", h.url())
		}
	}
	load.down.Store(false)
	c.pg.Start(t)
	load.setPhase(2)
	for _, h := range c.hubs {
		if !waitReadiness(h.url(), http.StatusOK, 30*time.Second) {
			t.Errorf("%s: /readiness not 200 within 30 s of PostgreSQL starting", h.url())
		}
	}
	if !load.waitAcks(2, 300, 60*time.Second) {
		t.Errorf("300 writes not accepted after the restart")
	}
	acks := load.stopLoad(t)
	if t.Failed() {
		t.FailNow()
	}
	leader, after := c.waitLeader(t, before.Epoch-1, c.hubs...)
	t.Logf("after the restart %s leads at epoch %d (was %d)", leader.url(), after.Epoch, before.Epoch)
	c.verify(ctx, t, leader, acks)
}

// hubMetric reads one unlabelled sample from a Hub's /metrics.
func hubMetric(h *fleetHub, name string) (float64, error) {
	resp, err := fleetHTTP.Get(h.url() + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			var f float64
			_, err := fmt.Sscan(v, &f)
			return f, err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New(h.url() + "/metrics has no " + name)
}
