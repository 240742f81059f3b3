package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/hub"
	"github.com/flowplane/flowplane/internal/wire"
)

// The fleet test runs a real Hub (flowplane hub) and three real Agents
// (flowplane --config with hub_urls) as child processes and watches them
// only through the Hub's operator API, its SSE stream and the nodes' own
// Node API. The subtests share the processes; each uses its own streams.

const (
	fleetOperatorToken = "operator-token-for-the-fleet-test"
	fleetNodeToken     = "node-token-for-the-fleet-test"
)

// fleetStreams run on every node; each scenario owns one or two of them.
var fleetStreams = []string{"desired", "offline-run", "offline-stop", "restart", "drain-inflight", "drain-held",
	"sse", "drift", "session", "revive", "pending"}

var fleetHTTP = &http.Client{Timeout: 10 * time.Second}

// fleetHub is the Hub child process, restartable on the same address and
// SQLite file.
type fleetHub struct {
	owner         *testing.T // the test the process belongs to, across subtests
	addr, storage string
	env           []string // beside the address, storage and tokens
	proc          *exec.Cmd
}

// startFleetHub starts a Hub child process on a free loopback port with
// its SQLite file in dir.
func startFleetHub(t *testing.T, dir string) *fleetHub {
	h := &fleetHub{owner: t, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), storage: filepath.Join(dir, "hub.db")}
	h.start(t)
	return h
}

func (h *fleetHub) url() string { return "http://" + h.addr }

func (h *fleetHub) start(t *testing.T) {
	t.Helper()
	env := []string{hub.EnvAddress + "=" + h.addr, hub.EnvStorage + "=" + h.storage,
		hub.EnvOperatorToken + "=" + fleetOperatorToken, hub.EnvNodeToken + "=" + fleetNodeToken}
	env = append(env, h.env...)
	h.proc = startProcessFor(t, h.owner, "hub", env, "hub")
	waitUntil(t, "the Hub to be ready", func() bool {
		resp, err := fleetHTTP.Get(h.url() + "/readiness")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func (h *fleetHub) kill(t *testing.T) {
	t.Helper()
	if err := h.proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = h.proc.Wait()
}

// try sends an operator API request and decodes a 2xx answer into out.
func (h *fleetHub) try(method, path, body string, out any) (int, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.url()+"/api/v1"+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+fleetOperatorToken)
	if body != "" || method != http.MethodGet {
		// Every mutation needs a JSON Content-Type, bodiless ones too.
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := fleetHTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// call is try that fails the test on any error and checks the status.
func (h *fleetHub) call(t *testing.T, method, path, body string, want int, out any) {
	t.Helper()
	status, err := h.try(method, path, body, out)
	if err != nil {
		t.Fatal(err)
	}
	if status != want {
		t.Fatalf("%s %s: %d, want %d", method, path, status, want)
	}
}

func (h *fleetHub) put(t *testing.T, node, stream, state string) wire.DesiredStateResponse {
	t.Helper()
	var w wire.DesiredStateResponse
	h.call(t, "PUT", "/nodes/"+node+"/streams/"+stream+"/desired-state", `{"state":"`+state+`"}`, http.StatusAccepted, &w)
	if w.Generation < 1 || w.OperationID == "" || w.DesiredState != state {
		t.Fatalf("PUT %s/%s: answer %+v", node, stream, w)
	}
	return w
}

func (h *fleetHub) stream(t *testing.T, node, id string) wire.Stream {
	t.Helper()
	var s wire.Stream
	h.call(t, "GET", "/nodes/"+node+"/streams/"+id, "", http.StatusOK, &s)
	return s
}

// fleetOperation is the part of an operation record the tests read; the
// observation is a stream's.
type fleetOperation struct {
	State     string               `json:"state"`
	AttemptID string               `json:"attempt_id"`
	Observed  *wire.StreamObserved `json:"observed"`
	Result    json.RawMessage      `json:"result"`
}

func (h *fleetHub) operation(t *testing.T, id string) fleetOperation {
	t.Helper()
	var op fleetOperation
	h.call(t, "GET", "/operations/"+id, "", http.StatusOK, &op)
	return op
}

// nodeView returns the Hub's view of a node; false while the Hub does not
// answer (it is restarting).
func (h *fleetHub) nodeView(id string) (hub.NodeView, bool) {
	var v hub.NodeView
	_, err := h.try("GET", "/nodes/"+id, "", &v)
	return v, err == nil
}

func (h *fleetHub) waitStatus(t *testing.T, node, status string) hub.NodeView {
	t.Helper()
	var v hub.NodeView
	waitUntil(t, node+" "+status+" at the Hub", func() bool {
		var ok bool
		v, ok = h.nodeView(node)
		return ok && v.Status == status
	})
	return v
}

// waitInSync waits until the Hub shows the stream in_sync at generation gen
// (the Agent reported that generation) and returns the view.
func (h *fleetHub) waitInSync(t *testing.T, node, stream string, gen int64) wire.Stream {
	t.Helper()
	var s wire.Stream
	waitUntil(t, fmt.Sprintf("%s/%s in_sync at generation %d", node, stream, gen), func() bool {
		s = h.stream(t, node, stream)
		return s.Convergence == wire.ConvergenceInSync && s.Desired.Generation == gen && s.Observed.Generation == gen
	})
	return s
}

// events returns up to the newest 100 events matching query, oldest first.
func (h *fleetHub) events(t *testing.T, query string) []wire.Event {
	t.Helper()
	var p wire.Page[wire.Event]
	h.call(t, "GET", "/events?page_size=100&"+query, "", http.StatusOK, &p)
	slices.Reverse(p.Items)
	return p.Items
}

// lastEventID is the id of the newest event, a mark for "after this".
func (h *fleetHub) lastEventID(t *testing.T) int64 {
	t.Helper()
	if evs := h.events(t, ""); len(evs) > 0 {
		return evs[len(evs)-1].ID
	}
	return 0
}

// eventsAfter returns the events of query with an id above mark, oldest
// first, optionally of the given kinds only.
func (h *fleetHub) eventsAfter(t *testing.T, mark int64, query string, kinds ...string) []wire.Event {
	t.Helper()
	var out []wire.Event
	for _, e := range h.events(t, query) {
		if e.ID > mark && (len(kinds) == 0 || slices.Contains(kinds, e.Kind)) {
			out = append(out, e)
		}
	}
	return out
}

// subscribe opens the SSE stream with the query and returns its events.
// The channel closes when the stream ends; the subscription ends with the
// test.
func (h *fleetHub) subscribe(t *testing.T, query string) <-chan wire.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", h.url()+"/api/v1/events/stream?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+fleetOperatorToken)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req) // no timeout: the stream stays open
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		cancel()
		t.Fatalf("SSE: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || sc.Text() != "retry: 2000" {
		resp.Body.Close()
		cancel()
		t.Fatalf("SSE first line %q", sc.Text())
	}
	out := make(chan wire.Event, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var e wire.Event
			if json.Unmarshal([]byte(data), &e) == nil {
				out <- e
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-done
	})
	return out
}

// dumpEvents logs the newest Hub events, for a failed test.
func (h *fleetHub) dumpEvents(t *testing.T) {
	var p wire.Page[wire.Event]
	if _, err := h.try("GET", "/events?page_size=60", "", &p); err != nil {
		t.Logf("hub events: %v", err)
		return
	}
	var b strings.Builder
	for _, e := range slices.Backward(p.Items) {
		fmt.Fprintf(&b, "%d %s %s node=%s resource=%s op=%s %v\n", e.ID, e.OccurredAt.Format("15:04:05.000"), e.Kind, e.NodeID, e.ResourceID, e.OperationID, e.Data)
	}
	t.Logf("hub events, newest last:\n%s", b.String())
}

// fleetNode is an Agent child process: a node with hub_urls.
type fleetNode struct {
	owner                 *testing.T // the test the process belongs to, across subtests
	id, addr, conf, state string
	env                   []string // beside the node token
	proc                  *exec.Cmd
}

func newFleetNode(t *testing.T, dir, id string, hubURLs []string, extra string) *fleetNode {
	t.Helper()
	n := &fleetNode{owner: t, id: id, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), conf: filepath.Join(dir, id+".yaml"), state: filepath.Join(dir, id)}
	urls, err := json.Marshal(hubURLs)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "logging: {level: info}\nhealth_check:\n  address: %q\n  hub_urls: %s\n  node_id: %s\n  node_token: \"${env:%s}\"\n%s\n%sstreams:\n",
		n.addr, urls, id, hub.EnvNodeToken, extra, tempRootsPolicy())
	for _, s := range fleetStreams {
		fmt.Fprintf(&b, "  - id: %s\n    input: {type: generate, context: '{\"n\": {{count}}}', interval: 50ms}\n    pipeline: {processors: []}\n    output: {type: drop}\n", s)
	}
	if err := os.WriteFile(n.conf, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return n
}

// tempRootsPolicy is the remote_policy section of test nodes whose Hub
// work writes under t.TempDir() rather than the node's state directory
// (the default file root).
func tempRootsPolicy() string {
	return fmt.Sprintf("remote_policy: {file_roots: [%q]}\n", os.TempDir())
}

func (n *fleetNode) base() string { return "http://" + n.addr }

func (n *fleetNode) start(t *testing.T) {
	t.Helper()
	n.proc = startProcessFor(t, n.owner, n.id, append([]string{hub.EnvNodeToken + "=" + fleetNodeToken}, n.env...), "--config", n.conf, "--state-dir", n.state)
	waitListening(t, n.addr)
}

func (n *fleetNode) kill(t *testing.T) {
	t.Helper()
	if err := n.proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = n.proc.Wait()
}

// freeze stops the process (SIGSTOP) so that it neither acknowledges nor
// reports; the returned function lets it run again.
func (n *fleetNode) freeze(t *testing.T) (thaw func()) {
	t.Helper()
	if err := n.proc.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	thawed := false
	thaw = func() {
		if !thawed {
			thawed = true
			_ = n.proc.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(thaw)
	return thaw
}

// stream is the node's own view of a stream (Node API).
func (n *fleetNode) stream(t *testing.T, id string) wire.Stream {
	t.Helper()
	var s wire.Stream
	getJSON(t, n.base()+"/streams/"+id, &s)
	return s
}

// holds checks cond for d (longer than a reconcile tick) and fails the
// first time it is false: for what must not happen.
func holds(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if !cond() {
			t.Fatalf("no longer true: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kindsOf lists the kinds of events, for messages.
func kindsOf(evs []wire.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

// TestFleet runs the control plane end to end with real processes: a Hub
// and three Agents, killed and restarted with SIGKILL along the way.
func TestFleet(t *testing.T) {
	t.Parallel() // independent: own ports, own directories, own processes
	if testing.Short() {
		t.Skip("starts a Hub and three Agents as child processes")
	}
	dir := t.TempDir()
	h := &fleetHub{owner: t, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), storage: filepath.Join(dir, "hub.db")}
	deadURL := fmt.Sprintf("http://127.0.0.1:%d", freePort(t)) // nothing listens there
	// node-a: a long lease, so that freezing it for a moment keeps it online.
	a := newFleetNode(t, dir, "node-a", []string{h.url()}, "  agent_lease_ttl_ms: 5000")
	// node-b: a dead first Hub URL.
	b := newFleetNode(t, dir, "node-b", []string{deadURL, h.url()}, "  agent_lease_ttl_ms: 1500")
	// node-c: a short session, so it re-registers every two seconds.
	c := newFleetNode(t, dir, "node-c", []string{h.url()}, "  agent_lease_ttl_ms: 1500\n  agent_session_ttl_ms: 2000")

	h.start(t)
	a.start(t)
	b.start(t)
	// Deferred, so it runs before the cleanups kill the processes.
	defer func() {
		if t.Failed() {
			h.dumpEvents(t)
		}
	}()
	h.waitStatus(t, "node-a", "online")

	t.Run("desired state reaches in_sync", func(t *testing.T) {
		for _, state := range []string{"stopped", "running"} {
			w := h.put(t, "node-a", "desired", state)
			s := h.waitInSync(t, "node-a", "desired", w.Generation)
			if s.Observed.State != state || s.Desired.State != state {
				t.Fatalf("%s: Hub view %+v", state, s)
			}
			if got := a.stream(t, "desired"); got.Observed.State != state {
				t.Fatalf("%s: the node's own view is %s", state, got.Observed.State)
			}
		}
	})

	t.Run("a write for an offline node converges when it starts", func(t *testing.T) {
		run := h.put(t, "node-c", "offline-run", "running")
		stop := h.put(t, "node-c", "offline-stop", "stopped")
		if v, ok := h.nodeView("node-c"); !ok || v.Status != "unknown" {
			t.Fatalf("node-c before it ever started: %+v", v)
		}
		for _, w := range []wire.DesiredStateResponse{run, stop} {
			if s := h.stream(t, "node-c", w.StreamID); s.Convergence != wire.ConvergencePending {
				t.Fatalf("%s before node-c started: %s", w.StreamID, s.Convergence)
			}
			if op := h.operation(t, w.OperationID); op.State != wire.OpPending {
				t.Fatalf("%s operation before node-c started: %s", w.StreamID, op.State)
			}
		}
		c.start(t)
		h.waitInSync(t, "node-c", "offline-run", run.Generation)
		h.waitInSync(t, "node-c", "offline-stop", stop.Generation)
		if got := c.stream(t, "offline-stop"); got.Observed.State != "stopped" {
			t.Fatalf("offline-stop on node-c is %s", got.Observed.State)
		}
		if got := c.stream(t, "offline-run"); got.Observed.State != "running" {
			t.Fatalf("offline-run on node-c is %s", got.Observed.State)
		}
	})

	t.Run("the second hub_url is used when the first is dead", func(t *testing.T) {
		h.waitStatus(t, "node-b", "online")
		var sys struct {
			Agent *struct {
				HubURL    string `json:"hub_url"`
				Connected bool   `json:"connected"`
			} `json:"agent"`
		}
		getJSON(t, b.base()+"/system", &sys)
		if sys.Agent == nil || sys.Agent.HubURL != h.url() || !sys.Agent.Connected {
			t.Fatalf("node-b /system agent = %+v, want hub_url %s connected", sys.Agent, h.url())
		}
		w := h.put(t, "node-b", "desired", "stopped")
		h.waitInSync(t, "node-b", "desired", w.Generation)
	})

	t.Run("restart converges only with its action_id", func(t *testing.T) {
		w := h.put(t, "node-a", "restart", "running")
		h.waitInSync(t, "node-a", "restart", w.Generation)
		before := a.stream(t, "restart")

		// Frozen, the Agent can neither acknowledge nor report.
		thaw := a.freeze(t)
		var rs wire.DesiredStateResponse
		h.call(t, "POST", "/nodes/node-a/streams/restart/actions/restart", "", http.StatusAccepted, &rs)
		if rs.ActionID == "" || rs.Generation != w.Generation+1 {
			t.Fatalf("restart answer %+v", rs)
		}
		waitUntil(t, "the restart dispatched", func() bool { return h.operation(t, rs.OperationID).State == wire.OpDispatched })
		if s := h.stream(t, "node-a", "restart"); s.Convergence == wire.ConvergenceInSync || s.Observed.ActionID == rs.ActionID {
			t.Fatalf("before the Agent reported the restart: %s, observed %+v", s.Convergence, s.Observed)
		}
		thaw()

		s := h.waitInSync(t, "node-a", "restart", rs.Generation)
		if s.Observed.ActionID != rs.ActionID {
			t.Fatalf("in_sync with observed action_id %q, want %q", s.Observed.ActionID, rs.ActionID)
		}
		op := h.operation(t, rs.OperationID)
		if op.State != wire.OpSucceeded || op.Observed == nil || op.Observed.ActionID != rs.ActionID {
			t.Fatalf("restart operation %+v (observed %+v)", op, op.Observed)
		}
		after := a.stream(t, "restart")
		if !after.Observed.StartedAt.After(before.Observed.StartedAt.Time) || after.Observed.State != "running" {
			t.Fatalf("the stream did not restart: started_at %v then %v, state %s", before.Observed.StartedAt, after.Observed.StartedAt, after.Observed.State)
		}
	})

	t.Run("drain holds new dispatch, in-flight work completes", func(t *testing.T) {
		for _, id := range []string{"drain-inflight", "drain-held"} {
			w := h.put(t, "node-a", id, "running")
			h.waitInSync(t, "node-a", id, w.Generation)
		}
		// A command in flight when the drain begins: dispatched to a
		// frozen Agent.
		thaw := a.freeze(t)
		inflight := h.put(t, "node-a", "drain-inflight", "stopped")
		waitUntil(t, "the in-flight command dispatched", func() bool {
			return h.operation(t, inflight.OperationID).State == wire.OpDispatched
		})
		var v hub.NodeView
		h.call(t, "POST", "/nodes/node-a/drain", "", http.StatusOK, &v)
		if v.Mode != "draining" {
			t.Fatalf("after drain: mode %s", v.Mode)
		}
		held := h.put(t, "node-a", "drain-held", "stopped")
		thaw()

		h.waitInSync(t, "node-a", "drain-inflight", inflight.Generation)
		if got := a.stream(t, "drain-inflight"); got.Observed.State != "stopped" {
			t.Fatalf("the in-flight stop did not run: %s", got.Observed.State)
		}
		waitUntil(t, "drain-held blocked", func() bool { return h.stream(t, "node-a", "drain-held").Convergence == wire.ConvergenceBlocked })
		holds(t, "drain-held stays undispatched and running while node-a drains", 1500*time.Millisecond, func() bool {
			s := h.stream(t, "node-a", "drain-held")
			return h.operation(t, held.OperationID).State == wire.OpPending && s.Desired.State == "stopped" &&
				s.Desired.Generation == held.Generation && a.stream(t, "drain-held").Observed.State == "running"
		})

		h.call(t, "DELETE", "/nodes/node-a/maintenance", "", http.StatusOK, &v)
		if v.Mode != "active" {
			t.Fatalf("after maintenance exit: mode %s", v.Mode)
		}
		h.waitInSync(t, "node-a", "drain-held", held.Generation)
		if got := a.stream(t, "drain-held"); got.Observed.State != "stopped" {
			t.Fatalf("drain-held after the drain: %s", got.Observed.State)
		}
		if evs := h.events(t, "node_id=node-a&kind=node_maintenance_changed"); len(evs) != 2 || evs[0].Actor == "" || evs[0].CorrelationID == "" {
			t.Fatalf("node_maintenance_changed events %+v", evs)
		}
	})

	t.Run("an SSE subscriber sees an operation's whole life in order", func(t *testing.T) {
		evs := h.subscribe(t, "node_id=node-a&resource_id=sse")
		w := h.put(t, "node-a", "sse", "stopped")
		var life []string
		timeout := time.After(20 * time.Second)
	read:
		for {
			select {
			case e, ok := <-evs:
				if !ok {
					t.Fatalf("the SSE stream ended; saw %v", life)
				}
				if e.OperationID != w.OperationID {
					continue
				}
				if e.Kind != wire.EventConvergenceChanged {
					life = append(life, e.Kind)
					continue
				}
				if e.Data["convergence"] == wire.ConvergenceInSync && e.Data["generation"] == float64(w.Generation) {
					life = append(life, "convergence_changed:in_sync")
					break read
				}
			case <-timeout:
				t.Fatalf("no in_sync on the SSE stream; saw %v", life)
			}
		}
		want := []string{wire.EventIntentAccepted, wire.EventCommandDispatched, wire.EventCommandAcknowledged,
			wire.EventCommandSucceeded, "convergence_changed:in_sync"}
		if !slices.Equal(life, want) {
			t.Fatalf("operation life %v, want %v", life, want)
		}
	})

	t.Run("drift through the Node API shows degraded and is not reverted", func(t *testing.T) {
		w := h.put(t, "node-a", "drift", "running")
		h.waitInSync(t, "node-a", "drift", w.Generation)
		mark := h.lastEventID(t)
		var ops wire.Page[wire.Operation]
		h.call(t, "GET", "/operations?resource_id=drift&node_id=node-a", "", http.StatusOK, &ops)

		resp, err := fleetHTTP.Post(a.base()+"/streams/drift/stop", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("node stop: %d", resp.StatusCode)
		}
		waitUntil(t, "the Hub to show drift degraded", func() bool {
			return h.stream(t, "node-a", "drift").Convergence == wire.ConvergenceDegraded
		})
		// Events follow the view: the convergence worker writes them.
		waitUntil(t, "a convergence_changed event to degraded for drift", func() bool {
			changes := h.eventsAfter(t, mark, "node_id=node-a&resource_id=drift", wire.EventConvergenceChanged)
			return len(changes) > 0 && changes[len(changes)-1].Data["convergence"] == wire.ConvergenceDegraded &&
				changes[len(changes)-1].Data["reason"] == "drift"
		})
		holds(t, "the Hub leaves the drifted stream stopped", 1500*time.Millisecond, func() bool {
			var now wire.Page[wire.Operation]
			h.call(t, "GET", "/operations?resource_id=drift&node_id=node-a", "", http.StatusOK, &now)
			s := h.stream(t, "node-a", "drift")
			return now.Total == ops.Total && s.Convergence == wire.ConvergenceDegraded && s.Desired.Generation == w.Generation &&
				a.stream(t, "drift").Observed.State == "stopped"
		})

		again := h.put(t, "node-a", "drift", "running")
		h.waitInSync(t, "node-a", "drift", again.Generation)
		if got := a.stream(t, "drift"); got.Observed.State != "running" {
			t.Fatalf("after re-asserting running: %s", got.Observed.State)
		}
	})

	t.Run("session expiry re-registers transparently", func(t *testing.T) {
		w := h.put(t, "node-c", "session", "running")
		h.waitInSync(t, "node-c", "session", w.Generation)
		boot, _ := h.nodeView("node-c")
		before := c.stream(t, "session")
		mark := h.lastEventID(t)
		waitUntil(t, "node-c to register twice more", func() bool {
			return len(h.eventsAfter(t, mark, "node_id=node-c&kind=node_registered")) >= 2
		})
		for _, e := range h.eventsAfter(t, mark, "node_id=node-c&kind=node_registered") {
			if e.Data["boot_id"] != boot.BootID {
				t.Fatalf("re-registration with boot_id %v, want %s", e.Data["boot_id"], boot.BootID)
			}
		}
		if evs := h.eventsAfter(t, mark, "node_id=node-c", wire.EventNodeRestarted, wire.EventNodeUnavailable); len(evs) > 0 {
			t.Fatalf("node-c events during re-registration: %v", kindsOf(evs))
		}
		after := c.stream(t, "session")
		if after.Observed.State != "running" || !after.Observed.StartedAt.Equal(before.Observed.StartedAt.Time) ||
			after.Observed.Counters.Received <= before.Observed.Counters.Received {
			t.Fatalf("the stream was touched: before %+v, after %+v", before.Observed, after.Observed)
		}
		if s := h.stream(t, "node-c", "session"); s.Convergence != wire.ConvergenceInSync {
			t.Fatalf("session at the Hub: %s", s.Convergence)
		}
		// Work still flows on the new session.
		stop := h.put(t, "node-c", "session", "stopped")
		h.waitInSync(t, "node-c", "session", stop.Generation)
	})

	t.Run("an Agent killed goes unavailable, comes back and converges", func(t *testing.T) {
		w := h.put(t, "node-b", "revive", "stopped")
		h.waitInSync(t, "node-b", "revive", w.Generation)
		old := h.waitStatus(t, "node-b", "online")
		mark := h.lastEventID(t)

		b.kill(t)
		h.waitStatus(t, "node-b", "unavailable")
		waitUntil(t, "a node_unavailable event for node-b", func() bool {
			return len(h.eventsAfter(t, mark, "node_id=node-b&kind=node_unavailable")) == 1
		})
		revive := h.put(t, "node-b", "revive", "running")
		if s := h.stream(t, "node-b", "revive"); s.Convergence != wire.ConvergencePending {
			t.Fatalf("a write for the unavailable node: %s", s.Convergence)
		}

		b.start(t)
		v := h.waitStatus(t, "node-b", "online")
		if v.BootID == old.BootID {
			t.Fatalf("node-b came back with the same boot_id %s", v.BootID)
		}
		s := h.waitInSync(t, "node-b", "revive", revive.Generation)
		if s.Observed.State != "running" || b.stream(t, "revive").Observed.State != "running" {
			t.Fatalf("revive after the restart: Hub %s, node %s", s.Observed.State, b.stream(t, "revive").Observed.State)
		}
		// What was in_sync before the kill is again, without a new command.
		if s := h.stream(t, "node-b", "desired"); s.Convergence != wire.ConvergenceInSync || b.stream(t, "desired").Observed.State != "stopped" {
			t.Fatalf("desired on node-b after the restart: %s, node %s", s.Convergence, b.stream(t, "desired").Observed.State)
		}
		evs := h.eventsAfter(t, mark, "node_id=node-b", wire.EventNodeRegistered, wire.EventNodeOnline, wire.EventNodeRestarted)
		var registered, online, restarted bool
		for _, e := range evs {
			switch {
			case e.Kind == wire.EventNodeRegistered && e.Data["boot_id"] == v.BootID:
				registered = true
			case e.Kind == wire.EventNodeOnline && registered:
				online = true
			case e.Kind == wire.EventNodeRestarted && registered && e.Data["previous_boot_id"] == old.BootID:
				restarted = true
			}
		}
		if !registered || !online || !restarted {
			t.Fatalf("events after the restart: %v (registered %v, online %v, restarted %v)", kindsOf(evs), registered, online, restarted)
		}
	})

	t.Run("a Hub killed restarts on its file and dispatches pending intents", func(t *testing.T) {
		// node-c goes away first, so that the next write for it waits in
		// the outbox when the Hub dies.
		c.kill(t)
		h.waitStatus(t, "node-c", "unavailable")
		pending := h.put(t, "node-c", "pending", "stopped")
		if op := h.operation(t, pending.OperationID); op.State != wire.OpPending {
			t.Fatalf("the write for the stopped node: %s", op.State)
		}

		h.kill(t)
		h.start(t)
		if op := h.operation(t, pending.OperationID); op.State != wire.OpPending {
			t.Fatalf("after the Hub restart the intent is %s", op.State)
		}
		if s := h.stream(t, "node-c", "pending"); s.Desired.Generation != pending.Generation || s.Desired.State != "stopped" {
			t.Fatalf("desired state after the Hub restart: %+v", s.Desired)
		}
		// The Agents that kept running reconnect and take new work.
		h.waitStatus(t, "node-a", "online")
		h.waitStatus(t, "node-b", "online")
		w := h.put(t, "node-a", "desired", "stopped")
		h.waitInSync(t, "node-a", "desired", w.Generation)
		w = h.put(t, "node-b", "desired", "running")
		h.waitInSync(t, "node-b", "desired", w.Generation)

		c.start(t)
		h.waitInSync(t, "node-c", "pending", pending.Generation)
		if op := h.operation(t, pending.OperationID); op.State != wire.OpSucceeded {
			t.Fatalf("the pending intent after node-c came back: %s", op.State)
		}
		if got := c.stream(t, "pending"); got.Observed.State != "stopped" {
			t.Fatalf("pending on node-c: %s", got.Observed.State)
		}
	})
}
