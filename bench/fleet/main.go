// Command fleet measures the control plane's write-to-in_sync latency end to
// end (make bench-fleet): it builds flowplane, starts a Hub and three Agents
// as child processes on loopback, subscribes to the Hub's SSE stream, and
// issues desired-state writes alternating running and stopped across the
// streams of the three nodes, with bounded concurrency. Each write's
// latency runs from just before its PUT until the SSE stream delivers the
// convergence_changed event that reports its node, stream and generation
// in_sync. It prints p50, p90, p99 and max, and the median time to each step
// of an operation's life as the SSE stream showed it.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

const (
	operatorToken = "bench-operator-token"
	nodeToken     = "bench-node-token"
)

type options struct {
	writes, concurrency, nodes, streams int
	slowest                             int
	jobs, checkpoints                   int
	timeout                             time.Duration
	bin, keep                           string
}

func main() {
	var o options
	flag.IntVar(&o.writes, "writes", 1000, "measured desired-state writes")
	flag.IntVar(&o.concurrency, "concurrency", 8, "writes in flight at most (each on its own stream)")
	flag.IntVar(&o.nodes, "nodes", 3, "Agents")
	flag.IntVar(&o.streams, "streams", 8, "streams per Agent")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Second, "give up on one write after this long")
	flag.StringVar(&o.bin, "bin", "", "flowplane binary (default: go build ./cmd/flowplane)")
	flag.StringVar(&o.keep, "dir", "", "work directory, kept (default: a temporary one, removed)")
	flag.IntVar(&o.slowest, "slowest", 0, "also list this many slowest writes, with the arrival of each of their events")
	flag.IntVar(&o.jobs, "jobs", 0, "jobs mode: create this many jobs (running) and measure create-to-in_sync, then checkpoints")
	flag.IntVar(&o.checkpoints, "checkpoints", 100, "jobs mode: measured checkpoint triggers")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-fleet:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) (err error) {
	if o.jobs > 0 {
		o.streams = 0
	}
	if o.concurrency < 1 || (o.jobs == 0 && o.concurrency > o.nodes*o.streams) {
		return fmt.Errorf("-concurrency must be from 1 to nodes*streams (%d)", o.nodes*o.streams)
	}
	dir := o.keep
	if dir == "" {
		d, mkErr := os.MkdirTemp("", "bench-fleet-")
		if mkErr != nil {
			return mkErr
		}
		// Kept for the logs when the run fails.
		defer func() {
			if err == nil {
				os.RemoveAll(d)
			}
		}()
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bin := o.bin
	if bin == "" {
		bin = filepath.Join(dir, "flowplane")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/flowplane")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build (run from the module root): %w", err)
		}
	}

	var procs []*exec.Cmd
	defer func() {
		for _, p := range slices.Backward(procs) {
			_ = p.Process.Signal(syscall.SIGTERM)
			_ = p.Wait()
		}
	}()
	start := func(name string, env []string, args ...string) error {
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			return err
		}
		defer logf.Close()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout, cmd.Stderr = logf, logf
		dieWithParent(cmd)
		if err := cmd.Start(); err != nil {
			return err
		}
		procs = append(procs, cmd)
		return nil
	}
	hubAddr, err := freeAddr()
	if err != nil {
		return err
	}
	h := &hubClient{base: "http://" + hubAddr, http: &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: o.concurrency + 4}}}
	if err := start("hub", []string{"SVC_HUB_ADDRESS=" + hubAddr, "SVC_HUB_STORAGE=" + filepath.Join(dir, "hub.db"),
		"SVC_OPERATOR_TOKEN=" + operatorToken, "SVC_NODE_TOKEN=" + nodeToken}, "hub"); err != nil {
		return err
	}
	if err := waitFor(ctx, 20*time.Second, "the Hub to be ready", func() bool { return h.ready() }); err != nil {
		return err
	}
	var resources []resource
	for i := range o.nodes {
		id := fmt.Sprintf("node-%d", i+1)
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		conf := filepath.Join(dir, id+".yaml")
		if err := os.WriteFile(conf, []byte(nodeDoc(id, addr, h.base, o.streams)), 0o600); err != nil {
			return err
		}
		if err := start(id, []string{"SVC_NODE_TOKEN=" + nodeToken}, "--config", conf, "--state-dir", filepath.Join(dir, id)); err != nil {
			return err
		}
		for s := range o.streams {
			resources = append(resources, resource{node: id, stream: fmt.Sprintf("s%d", s)})
		}
	}
	if err := waitFor(ctx, 20*time.Second, "every Agent online", func() bool { return h.online() == o.nodes }); err != nil {
		return err
	}

	// The stream ends before the Hub is stopped: an open one holds up the
	// Hub's graceful shutdown.
	sctx, unsubscribe := context.WithCancel(ctx)
	defer unsubscribe()
	events, err := h.subscribe(sctx)
	if err != nil {
		return err
	}
	w := newWatcher()
	go w.run(events)
	if o.jobs > 0 {
		return runJobs(ctx, o, h, w, dir)
	}

	// Warm-up, not measured: every stream gets a desired state (stopped).
	for i := range resources {
		resources[i].state = "running"
		if _, err := write(ctx, h, w, &resources[i], o.timeout); err != nil && !errors.Is(err, errSilent) {
			return fmt.Errorf("warm-up: %w", err)
		}
	}

	pool := make(chan *resource, len(resources))
	for i := range resources {
		pool <- &resources[i]
	}
	var (
		mu      sync.Mutex
		lat     []time.Duration
		starts  = map[string]time.Time{} // operation id -> when its write began
		failed  []error
		silent  int
		wg      sync.WaitGroup
		next    = make(chan struct{}, o.writes)
		began   = time.Now()
		workers = o.concurrency
	)
	for range o.writes {
		next <- struct{}{}
	}
	close(next)
	for range workers {
		wg.Go(func() {
			for range next {
				if ctx.Err() != nil {
					return
				}
				r := <-pool
				res, err := write(ctx, h, w, r, o.timeout)
				pool <- r
				mu.Lock()
				switch {
				case errors.Is(err, errSilent):
					silent++
				case err != nil:
					failed = append(failed, err)
				default:
					lat = append(lat, res.latency)
					starts[res.operationID] = res.start
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	report(o, lat, silent, len(failed), elapsed, w.phases(starts))
	if o.slowest > 0 {
		w.slowest(starts, o.slowest)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d writes did not reach in_sync (first: %v); logs in %s", len(failed), o.writes, failed[0], dir)
	}
	return nil
}

// resource is one stream of one node and the state last written for it.
type resource struct {
	node, stream, state string
}

type written struct {
	operationID string
	start       time.Time
	latency     time.Duration
}

// write flips the resource's desired state and waits for the SSE stream
// to show it in_sync at the new generation.
func write(ctx context.Context, h *hubClient, w *watcher, r *resource, timeout time.Duration) (written, error) {
	state := "running"
	if r.state == "running" {
		state = "stopped"
	}
	start := time.Now()
	resp, err := h.put(r.node, r.stream, state)
	if err != nil {
		return written{}, err
	}
	r.state = state
	k := key{r.node, r.stream, resp.Generation}
	fail := func(err error) (written, error) {
		return written{}, fmt.Errorf("%s/%s generation %d (operation %s): %w", r.node, r.stream, resp.Generation, resp.OperationID, err)
	}
	// After a while without the event, the stream's view tells a write
	// that converged without an in_sync event from one still converging.
	at, err := w.wait(ctx, k, start.Add(min(silentAfter, timeout)))
	if errors.Is(err, errNoEvent) {
		if h.inSync(k) {
			return fail(errSilent)
		}
		at, err = w.wait(ctx, k, start.Add(timeout))
	}
	if errors.Is(err, errNoEvent) && h.inSync(k) {
		return fail(errSilent)
	}
	if err != nil {
		return fail(err)
	}
	return written{operationID: resp.OperationID, start: start, latency: at.Sub(start)}, nil
}

// silentAfter is how long a write waits for its in_sync event before
// looking at the stream's view.
const silentAfter = 3 * time.Second

var (
	errNoEvent = errors.New("no in_sync event for it")
	// errSilent is a write the Hub shows in_sync at its generation with no
	// convergence_changed event saying so.
	errSilent = errors.New("in_sync at the Hub, but no in_sync event for it")
)

func report(o options, lat []time.Duration, silent, failed int, elapsed time.Duration, phases map[string][]time.Duration) {
	slices.Sort(lat)
	pct := func(p float64) string {
		if len(lat) == 0 {
			return "-"
		}
		return ms(lat[min(int(float64(len(lat))*p), len(lat)-1)])
	}
	fmt.Printf("flowplane fleet benchmark: %d writes to in_sync over SSE, %d Agents x %d streams, %d in flight, %.0f writes/s\n",
		o.writes, o.nodes, o.streams, o.concurrency, float64(len(lat))/elapsed.Seconds())
	fmt.Printf("write-to-in_sync  p50 %s  p90 %s  p99 %s  max %s  (%d measured, %d failed)\n",
		pct(0.50), pct(0.90), pct(0.99), pct(1), len(lat), failed)
	if silent > 0 {
		fmt.Printf("%d writes converged (the Hub's view shows them in_sync) without an in_sync convergence_changed event; not measured\n", silent)
	}
	fmt.Printf("median time from the write to each event, as the SSE stream delivered it:\n")
	for _, k := range []string{wire.EventIntentAccepted, wire.EventCommandDispatched, wire.EventCommandAcknowledged,
		wire.EventCommandSucceeded, "in_sync"} {
		d := phases[k]
		if len(d) == 0 {
			continue
		}
		slices.Sort(d)
		fmt.Printf("  %-22s %s\n", k, ms(d[len(d)/2]))
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }

// key names one generation of one stream.
type key struct {
	node, stream string
	generation   int64
}

// watcher reads the SSE events: it resolves waiters on in_sync events and
// keeps when each event of an operation arrived.
type watcher struct {
	mu      sync.Mutex // guards the fields below
	inSync  map[key]time.Time
	waiters map[key]chan time.Time
	byOp    map[string]map[string]time.Time // operation id -> kind -> first arrival
	opWait  map[[2]string]chan time.Time    // (operation id, kind) -> waiter
	err     error
}

func newWatcher() *watcher {
	return &watcher{inSync: map[key]time.Time{}, waiters: map[key]chan time.Time{}, byOp: map[string]map[string]time.Time{},
		opWait: map[[2]string]chan time.Time{}}
}

func (w *watcher) run(events <-chan sseEvent) {
	for ev := range events {
		e := ev.Event
		w.mu.Lock()
		kind := e.Kind
		if e.Kind == wire.EventConvergenceChanged {
			kind = ""
			if e.Data["convergence"] == wire.ConvergenceInSync {
				kind = "in_sync"
				g, _ := e.Data["generation"].(float64)
				k := key{e.NodeID, e.ResourceID, int64(g)}
				if c, ok := w.waiters[k]; ok {
					c <- ev.at
					delete(w.waiters, k)
				} else {
					w.inSync[k] = ev.at
				}
			}
		}
		if e.OperationID != "" && kind != "" {
			m := w.byOp[e.OperationID]
			if m == nil {
				m = map[string]time.Time{}
				w.byOp[e.OperationID] = m
			}
			if _, seen := m[kind]; !seen {
				m[kind] = ev.at
				if c, ok := w.opWait[[2]string{e.OperationID, kind}]; ok {
					c <- ev.at
					delete(w.opWait, [2]string{e.OperationID, kind})
				}
			}
		}
		w.mu.Unlock()
	}
	w.mu.Lock()
	w.err = errors.New("the SSE stream ended")
	for k, c := range w.waiters {
		close(c)
		delete(w.waiters, k)
	}
	for k, c := range w.opWait {
		close(c)
		delete(w.opWait, k)
	}
	w.mu.Unlock()
}

// wait returns when the in_sync event of k arrived.
func (w *watcher) wait(ctx context.Context, k key, deadline time.Time) (time.Time, error) {
	w.mu.Lock()
	if at, ok := w.inSync[k]; ok {
		delete(w.inSync, k)
		w.mu.Unlock()
		return at, nil
	}
	if w.err != nil {
		w.mu.Unlock()
		return time.Time{}, w.err
	}
	c := make(chan time.Time, 1)
	w.waiters[k] = c
	w.mu.Unlock()
	return w.await(ctx, c, deadline, func() { delete(w.waiters, k) }, errNoEvent)
}

// await waits for c until deadline; on timeout it runs forget under w.mu
// and returns timeout.
func (w *watcher) await(ctx context.Context, c <-chan time.Time, deadline time.Time, forget func(), timeout error) (time.Time, error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case at, ok := <-c:
		if !ok {
			return time.Time{}, errors.New("the SSE stream ended")
		}
		return at, nil
	case <-t.C:
	case <-ctx.Done():
	}
	w.mu.Lock()
	forget()
	w.mu.Unlock()
	return time.Time{}, timeout
}

// phases returns, by event kind, how long after its write began each
// operation's event arrived.
func (w *watcher) phases(starts map[string]time.Time) map[string][]time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][]time.Duration{}
	for op, t0 := range starts {
		for k, at := range w.byOp[op] {
			out[k] = append(out[k], at.Sub(t0))
		}
	}
	return out
}

// slowest prints the n operations whose in_sync came last after their
// write, with the arrival of each of their events.
func (w *watcher) slowest(starts map[string]time.Time, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	type op struct {
		id    string
		total time.Duration
	}
	var all []op
	for id, t0 := range starts {
		if at, ok := w.byOp[id]["in_sync"]; ok {
			all = append(all, op{id, at.Sub(t0)})
		}
	}
	slices.SortFunc(all, func(a, b op) int { return int(b.total - a.total) })
	fmt.Printf("slowest writes (event arrival after the write began):\n")
	for _, o := range all[:min(n, len(all))] {
		t0 := starts[o.id]
		var parts []string
		for _, k := range []string{wire.EventIntentAccepted, wire.EventCommandDispatched, wire.EventCommandAcknowledged, wire.EventCommandSucceeded, "in_sync"} {
			if at, ok := w.byOp[o.id][k]; ok {
				parts = append(parts, k+" "+ms(at.Sub(t0)))
			}
		}
		fmt.Printf("  %s %s: %s\n", o.id, ms(o.total), strings.Join(parts, ", "))
	}
}

// hubClient calls the Hub's operator API.
type hubClient struct {
	base string
	http *http.Client
}

func (h *hubClient) do(method, path, body string, out any) error {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.base+"/api/v1"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	if body != "" || method != http.MethodGet {
		// Every mutation needs a JSON Content-Type, bodiless ones too.
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func (h *hubClient) put(node, stream, state string) (wire.DesiredStateResponse, error) {
	var r wire.DesiredStateResponse
	err := h.do("PUT", "/nodes/"+node+"/streams/"+stream+"/desired-state", `{"state":"`+state+`"}`, &r)
	return r, err
}

// inSync reports whether the Hub's view shows k's stream in_sync at k's
// generation.
func (h *hubClient) inSync(k key) bool {
	var s wire.Stream
	if h.do("GET", "/nodes/"+k.node+"/streams/"+k.stream, "", &s) != nil {
		return false
	}
	return s.Convergence == wire.ConvergenceInSync && s.Desired.Generation == k.generation && s.Observed.Generation == k.generation
}

func (h *hubClient) ready() bool {
	resp, err := h.http.Get(h.base + "/readiness")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (h *hubClient) online() int {
	var p wire.Page[struct {
		Status string `json:"status"`
	}]
	if h.do("GET", "/nodes?status=online", "", &p) != nil {
		return 0
	}
	return p.Total
}

// sseEvent is an event and when it arrived.
type sseEvent struct {
	wire.Event
	at time.Time
}

// subscribe opens the SSE stream; the channel closes when it ends.
func (h *hubClient) subscribe(ctx context.Context) (<-chan sseEvent, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", h.base+"/api/v1/events/stream", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("SSE: %d", resp.StatusCode)
	}
	out := make(chan sseEvent, 4096)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			at := time.Now()
			var e wire.Event
			if json.Unmarshal([]byte(data), &e) == nil {
				out <- sseEvent{Event: e, at: at}
			}
		}
	}()
	return out, nil
}

func nodeDoc(id, addr, hubURL string, streams int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "logging: {level: warn}\nhealth_check:\n  address: %q\n  hub_urls: [%q]\n  node_id: %s\n  node_token: \"${env:SVC_NODE_TOKEN}\"\nstreams:\n", addr, hubURL, id)
	if streams == 0 {
		b.WriteString("  []\n")
	}
	for s := range streams {
		fmt.Fprintf(&b, "  - id: s%d\n    input: {type: generate, context: '{\"n\": {{count}}}', interval: 100ms}\n    pipeline: {processors: []}\n    output: {type: drop}\n", s)
	}
	return b.String()
}

// freeAddr returns a loopback address with a port the OS chose.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func waitFor(ctx context.Context, limit time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
