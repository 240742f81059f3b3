package hub

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/eventlog"
	"github.com/flowplane/flowplane/internal/hub/fleet"
	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// clockHub is a restored Hub on a fake clock whose loops do not run: the
// test calls pass itself, so every timing decision happens at a time it
// chose.
type clockHub struct {
	h     *Hub
	clock *fakeClock
}

var c0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func newClockHub(t testing.TB, intentTTL time.Duration) *clockHub {
	t.Helper()
	clock := &fakeClock{now: c0}
	h, err := New(context.Background(), Options{
		Settings: Settings{Address: "127.0.0.1:0", Storage: dbPath(t), IntentTTL: intentTTL},
		Logger:   slog.New(slog.DiscardHandler), Now: clock.Now, Version: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return &clockHub{h: h, clock: clock}
}

func (c *clockHub) do(t testing.TB, method, path, body, token string) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	// Without an operator token only loopback Host values are served.
	req.Host = "localhost"
	if body != "" || method != "GET" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	c.h.Handler().ServeHTTP(rec, req)
	checkOpenAPI(t, c.h, req, rec.Code, rec.Header(), rec.Body.Bytes())
	return rec
}

func recDecode[T any](t testing.TB, rec *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("decode %d %q: %v", rec.Code, rec.Body.String(), err)
	}
	return v
}

// at moves the clock to c0+d and runs one reconciliation pass.
func (c *clockHub) at(d time.Duration) {
	now := c0.Add(d)
	c.clock.set(now)
	c.h.pass(context.Background(), now)
}

func (c *clockHub) register(t testing.TB, node string) string {
	t.Helper()
	rec := c.do(t, "POST", APIPrefix+"/agent/register", `{"node_id":"`+node+`","boot_id":"b","protocol_version":1,
		"capabilities":["stream_control"],"lease_ttl_ms":36000000,"node_credential":"`+credentialOf(node)+`"}`, "")
	if rec.Code != 200 {
		t.Fatalf("register: %d %s", rec.Code, rec.Body)
	}
	return recDecode[wire.RegisterResponse](t, rec).SessionToken
}

func (c *clockHub) operation(t *testing.T, id string) wire.Operation {
	t.Helper()
	return recDecode[wire.Operation](t, c.do(t, "GET", APIPrefix+"/operations/"+id, "", ""))
}

func (c *clockHub) take(t *testing.T, session string) []wire.Command {
	t.Helper()
	return recDecode[wire.Page[wire.Command]](t, c.do(t, "GET", APIPrefix+"/agent/commands?wait_ms=0", "", session)).Items
}

// TestAttemptExpiryRetryAndIntentExpiry walks one intent through an attempt
// that times out, a retry after backoff, and the intent's own expiry.
func TestAttemptExpiryRetryAndIntentExpiry(t *testing.T) {
	c := newClockHub(t, 2*time.Minute)
	session := c.register(t, "n1")
	w := recDecode[wire.DesiredStateResponse](t, c.do(t, "PUT", APIPrefix+"/nodes/n1/streams/s1/desired-state", `{"state":"running"}`, ""))
	if op := c.operation(t, w.OperationID); op.ExpiresAt.Time != c0.Add(2*time.Minute) {
		t.Fatalf("intent expiry %v", op.ExpiresAt)
	}
	c.at(0)
	first := c.take(t, session)
	if len(first) != 1 || first[0].ExpiresAt.Time != c0.Add(time.Minute) {
		t.Fatalf("first attempt %+v", first)
	}
	// Delivered but never acknowledged: not handed out again before fleet.RedeliverAfter.
	if again := c.take(t, session); len(again) != 0 {
		t.Fatalf("redelivered at once: %+v", again)
	}
	c.at(fleet.RedeliverAfter)
	if again := c.take(t, session); len(again) != 1 || again[0].AttemptID != first[0].AttemptID {
		t.Fatalf("redelivery after %s: %+v", fleet.RedeliverAfter, again)
	}

	c.at(time.Minute) // the attempt expires; a retry waits for its backoff
	op := c.operation(t, w.OperationID)
	if op.State != wire.OpPending || op.Retry.Count != 1 || op.Retry.NextAt.Time != c0.Add(time.Minute+time.Second) ||
		op.Convergence != wire.ConvergenceDegraded {
		t.Fatalf("after the attempt expired: %+v", op)
	}
	if cmds := c.take(t, session); len(cmds) != 0 {
		t.Fatalf("a timed-out attempt is still delivered: %+v", cmds)
	}
	c.at(time.Minute + 500*time.Millisecond)
	if cmds := c.take(t, session); len(cmds) != 0 {
		t.Fatalf("retried inside the backoff: %+v", cmds)
	}
	c.at(time.Minute + time.Second)
	second := c.take(t, session)
	if len(second) != 1 || second[0].AttemptID == first[0].AttemptID || second[0].ExpiresAt.Time != c0.Add(2*time.Minute) {
		t.Fatalf("retry %+v (its expiry is capped by the intent's)", second)
	}
	// A late result of the first attempt changes nothing.
	rec := c.do(t, "POST", APIPrefix+"/agent/commands/"+w.OperationID+"/result", `{"attempt_id":"`+first[0].AttemptID+`","state":"succeeded"}`, session)
	if rec.Code != http.StatusConflict {
		t.Fatalf("late result: %d %s", rec.Code, rec.Body)
	}

	c.at(2 * time.Minute) // the intent itself expires
	op = c.operation(t, w.OperationID)
	if op.State != wire.OpFailed || op.Failure == nil || op.Failure.Code != store.CodeExpired || op.Convergence != wire.ConvergenceBlocked {
		t.Fatalf("after the intent expired: %+v", op)
	}
	au := recDecode[wire.Page[store.AuditRecord]](t, c.do(t, "GET", APIPrefix+"/audit?resource_id=s1", "", ""))
	if au.Items[0].Outcome != store.OutcomeRejected || au.Items[0].FailureCode != store.CodeExpired {
		t.Fatalf("audit %+v", au.Items[0])
	}
	text := c.do(t, "GET", "/metrics", "", "").Body.String()
	for _, want := range []string{`svc_command_total{command="stream_start",outcome="enqueued"} 2`,
		`svc_command_total{command="stream_start",outcome="timed_out"} 2`} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestOfflinePastExpiry fails an intent whose node never came back with
// node_unavailable.
func TestOfflinePastExpiry(t *testing.T) {
	c := newClockHub(t, time.Minute)
	w := recDecode[wire.DesiredStateResponse](t, c.do(t, "PUT", APIPrefix+"/nodes/gone/streams/s1/desired-state", `{"state":"stopped"}`, ""))
	c.at(59 * time.Second)
	if op := c.operation(t, w.OperationID); op.State != wire.OpPending || op.Convergence != wire.ConvergencePending {
		t.Fatalf("before expiry: %+v", op)
	}
	c.at(time.Minute)
	op := c.operation(t, w.OperationID)
	if op.State != wire.OpFailed || op.Failure.Code != "node_unavailable" {
		t.Fatalf("after expiry: %+v", op)
	}
	if text := c.do(t, "GET", "/metrics", "", "").Body.String(); !strings.Contains(text, `svc_command_total{command="stream_stop",outcome="node_unavailable"} 1`) {
		t.Error("node_unavailable not counted")
	}
}

// TestNewerWriteSupersedes: a second write before dispatch supersedes the
// first, which is never dispatched.
func TestNewerWriteSupersedes(t *testing.T) {
	c := newClockHub(t, time.Hour)
	session := c.register(t, "n1")
	w1 := recDecode[wire.DesiredStateResponse](t, c.do(t, "PUT", APIPrefix+"/nodes/n1/streams/s1/desired-state", `{"state":"running"}`, ""))
	w2 := recDecode[wire.DesiredStateResponse](t, c.do(t, "PUT", APIPrefix+"/nodes/n1/streams/s1/desired-state", `{"state":"stopped"}`, ""))
	c.at(0)
	cmds := c.take(t, session)
	if len(cmds) != 1 || cmds[0].CommandID != w2.OperationID || cmds[0].Payload.State != "stopped" {
		t.Fatalf("dispatched %+v", cmds)
	}
	if op := c.operation(t, w1.OperationID); op.State != wire.OpSuperseded {
		t.Fatalf("first intent %s", op.State)
	}
}

// TestQueueBoundWaits: beyond the per-node queue bound commands wait
// (counted once as capacity) and go out as the queue drains.
func TestQueueBoundWaits(t *testing.T) {
	clock := &fakeClock{now: c0}
	h, err := New(context.Background(), Options{Settings: Settings{Address: "127.0.0.1:0", Storage: dbPath(t)},
		Logger: slog.New(slog.DiscardHandler), Now: clock.Now, Limits: limitsWithBound(2)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	c := &clockHub{h: h, clock: clock}
	session := c.register(t, "n1")
	for _, s := range []string{"a", "b", "c"} {
		c.do(t, "PUT", APIPrefix+"/nodes/n1/streams/"+s+"/desired-state", `{"state":"running"}`, "")
	}
	c.at(0)
	c.at(time.Second)
	cmds := c.take(t, session)
	if len(cmds) != 2 {
		t.Fatalf("dispatched %d commands past a bound of 2", len(cmds))
	}
	if text := c.do(t, "GET", "/metrics", "", "").Body.String(); !strings.Contains(text, `svc_command_total{command="stream_start",outcome="capacity"} 1`) {
		t.Error("capacity wait not counted once")
	}
	rec := c.do(t, "POST", APIPrefix+"/agent/commands/"+cmds[0].CommandID+"/result", `{"attempt_id":"`+cmds[0].AttemptID+`","state":"succeeded"}`, session)
	if rec.Code != 204 {
		t.Fatalf("result: %d", rec.Code)
	}
	c.at(2 * time.Second)
	if more := c.take(t, session); len(more) != 1 || more[0].ResourceID != "c" {
		t.Fatalf("after the queue drained: %+v", more)
	}
}

// TestRestartRedeliversDispatched: a command dispatched but not
// acknowledged before a Hub restart is delivered again after it, to the
// same session, with the same attempt.
func TestRestartRedeliversDispatched(t *testing.T) {
	path := dbPath(t)
	th := serve(t, path, "", true)
	a := newTestAgent(th, "n1")
	a.register(t, "", 15*time.Second)
	th.put(t, "n1", "s1", `{"state":"running"}`)
	before := a.commands(t, 5*time.Second)
	th.stop()

	th2 := serve(t, path, "", true)
	a.th = th2
	nodes := decode[wire.Page[NodeView]](t, th2.do(t, "GET", APIPrefix+"/nodes", ""))
	if nodes.Total != 1 || nodes.Items[0].Status != "unavailable" || nodes.Items[0].InFlight != 1 {
		t.Fatalf("nodes after restart %+v", nodes.Items)
	}
	if r := a.call(t, "POST", "/heartbeat", wire.HeartbeatRequest{BootID: a.bootID, Capabilities: []string{wire.CapabilityStreamControl}}, a.session); r.status != 200 {
		t.Fatalf("heartbeat with the old session: %d %s", r.status, r.body)
	}
	after := a.commands(t, 5*time.Second)
	if len(after) != 1 || after[0].AttemptID != before[0].AttemptID {
		t.Fatalf("after restart %+v, before %+v", after, before)
	}
	a.execute(t, after[0])
	if got := th2.stream(t, "n1", "s1"); got.Convergence != wire.ConvergenceInSync {
		t.Fatalf("after restart: %s", got.Convergence)
	}
}

func limitsWithBound(n int) reconcile.Limits {
	l := reconcile.DefaultLimits()
	l.QueueBound = n
	return l
}

// TestConvergenceEventPerGeneration: a resource that goes from in_sync to
// in_sync at a new generation between two looks of the convergence worker
// still gets its convergence_changed event.
func TestConvergenceEventPerGeneration(t *testing.T) {
	c := newClockHub(t, time.Hour)
	ctx := context.Background()
	session := c.register(t, "n1")
	look := func() { t.Helper(); _ = c.h.convergeNodes(ctx, map[string]bool{"n1": true}) }
	converge := func(state string) int64 {
		t.Helper()
		w := recDecode[wire.DesiredStateResponse](t, c.do(t, "PUT", APIPrefix+"/nodes/n1/streams/s1/desired-state", `{"state":"`+state+`"}`, ""))
		c.at(0)
		cmd := c.take(t, session)[0]
		c.do(t, "POST", APIPrefix+"/agent/commands/"+cmd.CommandID+"/result", `{"attempt_id":"`+cmd.AttemptID+`","state":"succeeded"}`, session)
		rep := `{"boot_id":"b","report_seq":` + itoa(w.Generation) + `,"streams":[{"id":"s1","state":"` + state + `","generation":` + itoa(w.Generation) + `}]}`
		if rec := c.do(t, "POST", APIPrefix+"/agent/report", rep, session); rec.Code != 204 {
			t.Fatalf("report: %d %s", rec.Code, rec.Body)
		}
		return w.Generation
	}
	converge("running")
	look()
	gen := converge("running") // same value, new generation, no look in between
	look()
	_ = c.h.pump(ctx)
	evs := c.h.events.Query(eventlogFilterKind(wire.EventConvergenceChanged), 1, 100).Items
	if len(evs) == 0 || evs[0].Data["convergence"] != wire.ConvergenceInSync || evs[0].Data["generation"] != float64(gen) {
		t.Fatalf("newest convergence event %+v, want in_sync at generation %d", evs, gen)
	}
}

// TestShutdownEndsEventStreams: an open SSE stream does not hold up the
// Hub's shutdown (Serve would fail with the grace deadline exceeded).
func TestShutdownEndsEventStreams(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	res, err := http.Get(th.base + APIPrefix + "/events/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("SSE: %d", res.StatusCode)
	}
	th.stop() // reports an error from Serve if the stream held the shutdown
	if _, err := io.ReadAll(res.Body); err != nil {
		t.Fatalf("stream did not end cleanly: %v", err)
	}
}

func eventlogFilterKind(kind string) eventlog.Filter { return eventlog.Filter{Kinds: []string{kind}} }
