package node_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// TestIfMatch: the current generation, `*` and the weak form pass; a stale
// one is 412.
func TestIfMatch(t *testing.T) {
	h := newHarness(t, doc(hcLocal, genStream("a", "a")))
	r := h.expect(t, 200, "GET", "/streams/a", "")
	g := h.stream(t, "a").Desired.Generation
	etag := r.Header.Get("ETag")
	if etag != fmt.Sprintf(`"generation-%d"`, g) {
		t.Fatalf("ETag %q for generation %d", etag, g)
	}
	stop := h.action(t, "a", "stop", "If-Match", etag)
	if stop.Generation != g+1 {
		t.Fatalf("stop generation %d, want %d", stop.Generation, g+1)
	}
	stale := h.expect(t, 412, "POST", "/streams/a/start", "", "If-Match", etag)
	p := problem(t, stale, "generation_conflict")
	if p.Details["expected_generation"] != float64(g) || p.Details["current_generation"] != float64(g+1) {
		t.Errorf("details %v", p.Details)
	}
	// A rejected write changes nothing.
	if s := h.stream(t, "a"); s.Desired.Generation != g+1 || s.Desired.State != "stopped" {
		t.Errorf("after 412 desired = %+v", s.Desired)
	}
	any := h.action(t, "a", "start", "If-Match", "*")
	weak := h.action(t, "a", "restart", "If-Match", fmt.Sprintf(`W/"generation-%d"`, any.Generation))
	if weak.Generation != g+3 || weak.DesiredState != "running" {
		t.Errorf("weak If-Match answer %+v", weak)
	}
	spaced := h.action(t, "a", "start", "If-Match", fmt.Sprintf(` "generation-%d" `, weak.Generation))
	h.succeed(t, stop.OperationID)
	h.succeed(t, spaced.OperationID)
	h.waitInSync(t, "a")
}

// TestIdempotencyKey: a retry replays the first 202 without a second
// operation; the same key with another request is 409.
func TestIdempotencyKey(t *testing.T) {
	h := newHarness(t, doc(hcLocal, genStream("a", "a"), genStream("b", "b")))
	first := h.expect(t, 202, "POST", "/streams/a/restart", "", "Idempotency-Key", "key-1")
	if first.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("first answer is marked replayed")
	}
	again := h.expect(t, 202, "POST", "/streams/a/restart", "", "Idempotency-Key", "key-1")
	if again.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry not marked replayed: %v", again.Header)
	}
	a, b := decode[wire.DesiredStateResponse](t, first), decode[wire.DesiredStateResponse](t, again)
	if !reflect.DeepEqual(a, b) || a.OperationID == "" {
		t.Errorf("replayed %+v, first %+v", b, a)
	}
	for _, hd := range []string{"Location", "ETag"} {
		if first.Header.Get(hd) != again.Header.Get(hd) {
			t.Errorf("%s: first %q, replay %q", hd, first.Header.Get(hd), again.Header.Get(hd))
		}
	}
	ops := decode[wire.Page[wire.Operation]](t, h.expect(t, 200, "GET", "/operations?resource_id=a&operation=restart", ""))
	if ops.Total != 1 {
		t.Errorf("%d restart operations after a replay, want 1", ops.Total)
	}
	problem(t, h.expect(t, 409, "POST", "/streams/a/restart", "{}", "Idempotency-Key", "key-1"), "idempotency_key_reused")
	// The same key on another resource is another request, not a reuse.
	if other := h.expect(t, 202, "POST", "/streams/b/restart", "", "Idempotency-Key", "key-1"); other.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("key-1 on /streams/b/restart replayed the answer of /streams/a/restart")
	}

	// Configuration apply: no second version either.
	body := configBody(t, "yaml", doc(hcLocal, genStream("a", "a"), genStream("b", "b")))
	ap1 := decode[wire.Operation](t, h.expect(t, 202, "POST", "/configuration/apply", body, "Idempotency-Key", "key-2"))
	ap2r := h.expect(t, 202, "POST", "/configuration/apply", body, "Idempotency-Key", "key-2")
	if ap2 := decode[wire.Operation](t, ap2r); ap2.OperationID != ap1.OperationID || ap2r.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("apply replay %+v (first %s)", ap2, ap1.OperationID)
	}
	h.succeed(t, ap1.OperationID)
	if vs := decode[wire.Page[map[string]any]](t, h.expect(t, 200, "GET", "/configuration/versions", "")); vs.Total != 2 {
		t.Errorf("%d versions after a replayed apply, want 2", vs.Total)
	}
	problem(t, h.expect(t, 409, "POST", "/configuration/apply", body+" ", "Idempotency-Key", "key-2"), "idempotency_key_reused")
	h.drain(t)
}

// TestOperations: start, stop and restart succeed; a restart converges
// only once its action id is observed; the list filters and is newest
// first.
func TestOperations(t *testing.T) {
	h := newHarness(t, doc(hcLocal, genStream("a", "a"), genStream("b", "b")))
	before := time.Now().Add(-time.Second)

	rs := h.action(t, "a", "restart", "X-Correlation-ID", "corr-restart")
	if rs.ActionID == "" {
		t.Fatalf("restart answer without action_id: %+v", rs)
	}
	if d := h.stream(t, "a").Desired; d.ActionID != rs.ActionID || d.Generation != rs.Generation {
		t.Errorf("desired after restart %+v, want action %s", d, rs.ActionID)
	}
	eventually(t, "restart observed", func() (bool, string) {
		s := h.stream(t, "a")
		if s.Convergence == wire.ConvergenceInSync && s.Observed.ActionID != rs.ActionID {
			t.Fatalf("in_sync before the restart's action id was observed: %+v", s)
		}
		return s.Convergence == wire.ConvergenceInSync, s.Convergence
	})
	s := h.stream(t, "a")
	if s.Observed.ActionID != rs.ActionID || s.Observed.Generation != rs.Generation || s.Observed.State != "running" {
		t.Errorf("observed after restart %+v", s.Observed)
	}
	op := h.succeed(t, rs.OperationID)
	if op.OperationID != op.IntentID || op.Operation != "restart" || op.NodeID != testNodeID || op.ResourceID != "a" ||
		op.Generation != rs.Generation || op.CorrelationID != "corr-restart" || op.Actor != "anonymous" ||
		op.CreatedAt.Before(before) || op.DispatchedAt.IsZero() || op.FinishedAt.Before(op.CreatedAt.Time) {
		t.Errorf("operation record %+v", op)
	}

	stop := h.action(t, "b", "stop", "X-Correlation-ID", "corr-stop")
	h.succeed(t, stop.OperationID)
	if s := h.waitInSync(t, "b"); s.Observed.State != "stopped" || s.Desired.State != "stopped" {
		t.Errorf("after stop %+v", s)
	}
	start := h.action(t, "b", "start", "X-Correlation-ID", "corr-start")
	h.succeed(t, start.OperationID)
	if s := h.waitInSync(t, "b"); s.Observed.State != "running" || s.LatestOperation == nil || s.LatestOperation.OperationID != start.OperationID {
		t.Errorf("after start %+v", s)
	}

	list := func(query string) []string {
		t.Helper()
		p := decode[wire.Page[wire.Operation]](t, h.expect(t, 200, "GET", "/operations"+query, ""))
		var ids []string
		for i, o := range p.Items {
			if i > 0 && o.CreatedAt.After(p.Items[i-1].CreatedAt.Time) {
				t.Errorf("%s: not newest first at %d", query, i)
			}
			ids = append(ids, o.OperationID)
		}
		if p.Total != len(ids) {
			t.Errorf("%s: total %d for %d items", query, p.Total, len(ids))
		}
		return ids
	}
	want := func(query string, ids ...string) {
		t.Helper()
		if got := list(query); !slices.Equal(got, ids) {
			t.Errorf("GET /operations%s = %v, want %v", query, got, ids)
		}
	}
	want("", start.OperationID, stop.OperationID, rs.OperationID)
	want("?resource_id=b", start.OperationID, stop.OperationID)
	want("?operation=stop", stop.OperationID)
	want("?state=succeeded", start.OperationID, stop.OperationID, rs.OperationID)
	want("?state=pending")
	want("?correlation_id=corr-restart", rs.OperationID)
	want("?node_id="+testNodeID+"&resource_id=a", rs.OperationID)
	want("?node_id=other")
	want("?resource_id=b&operation=start&correlation_id=corr-start", start.OperationID)
}

// TestCancelQueuedOperation: a start queued behind a slow stop is
// cancelled, its desire reverts; an operation that ran is not cancellable.
// The event log then holds every kind of row.
func TestCancelQueuedOperation(t *testing.T) {
	slow := newSlowServer(t)
	h := newHarness(t, doc(hcLocal, httpStream("slow", slow.URL, "plain")), harnessOptions{slow: slow})
	select {
	case <-slow.got:
	case <-time.After(waitFor):
		t.Fatal("the slow endpoint got no request")
	}
	stop := h.action(t, "slow", "stop")
	eventually(t, "stop dispatched", func() (bool, string) {
		op := decode[wire.Operation](t, h.expect(t, 200, "GET", "/operations/"+stop.OperationID, ""))
		return op.State == wire.OpDispatched, op.State
	})
	start := h.action(t, "slow", "start", "X-Correlation-ID", "corr-queued")
	if op := decode[wire.Operation](t, h.expect(t, 200, "GET", "/operations/"+start.OperationID, "")); op.State != wire.OpPending {
		t.Fatalf("queued start is %s", op.State)
	}
	if s := h.stream(t, "slow"); s.Desired.State != "running" || s.Convergence == wire.ConvergenceInSync {
		t.Fatalf("while queued: %+v", s)
	}

	r := h.expect(t, 200, "DELETE", "/operations/"+start.OperationID, "", "X-Correlation-ID", "corr-cancel")
	if op := decode[wire.Operation](t, r); op.State != wire.OpCancelled || op.OperationID != start.OperationID || op.FinishedAt.IsZero() {
		t.Errorf("cancel answer %+v", op)
	}
	s := h.stream(t, "slow")
	if s.Desired.State != "stopped" || s.Desired.Generation != start.Generation {
		t.Errorf("desired after cancel %+v, want stopped at generation %d", s.Desired, start.Generation)
	}
	p := problem(t, h.expect(t, 409, "DELETE", "/operations/"+start.OperationID, ""), "operation_not_cancellable")
	if p.Details["state"] != wire.OpCancelled {
		t.Errorf("details %v", p.Details)
	}
	p = problem(t, h.expect(t, 409, "DELETE", "/operations/"+stop.OperationID, ""), "operation_not_cancellable")
	if p.Details["state"] != wire.OpDispatched {
		t.Errorf("details %v", p.Details)
	}

	slow.release()
	h.succeed(t, stop.OperationID)
	if s := h.waitInSync(t, "slow"); s.Observed.State != "stopped" || s.Desired.State != "stopped" {
		t.Errorf("after the stop %+v", s)
	}
	if op := h.waitOp(t, start.OperationID); op.State != wire.OpCancelled || !op.DispatchedAt.IsZero() {
		t.Errorf("cancelled start ran: %+v", op)
	}
	problem(t, h.expect(t, 409, "DELETE", "/operations/"+stop.OperationID, ""), "operation_not_cancellable")

	apply := decode[wire.Operation](t, h.expect(t, 202, "POST", "/configuration/apply",
		configBody(t, "yaml", doc(hcLocal, httpStream("slow", slow.URL, "plain"), genStream("extra", "x")))))
	h.succeed(t, apply.OperationID)
	checkEvents(t, h, start.OperationID)
}

// checkEvents requires the event rows operations leave, newest first and
// filterable by kind and resource_id.
func checkEvents(t *testing.T, h *harness, cancelled string) {
	t.Helper()
	all := decode[wire.Page[wire.Event]](t, h.expect(t, 200, "GET", "/events?page_size=100", ""))
	kinds := map[string]bool{}
	for i, ev := range all.Items {
		kinds[ev.Kind] = true
		if i > 0 && (ev.ID >= all.Items[i-1].ID || ev.OccurredAt.After(all.Items[i-1].OccurredAt.Time)) {
			t.Errorf("events not newest first at %d: %d after %d", i, ev.ID, all.Items[i-1].ID)
		}
		if ev.NodeID != testNodeID {
			t.Errorf("event %d has node_id %q", ev.ID, ev.NodeID)
		}
	}
	for _, k := range []string{"intent_accepted", "command_succeeded", "stream_state_changed", "configuration_applied", "operation_cancelled", "node_started"} {
		if !kinds[k] {
			t.Errorf("no %s event among %d", k, all.Total)
		}
	}
	query := func(q string) []wire.Event {
		t.Helper()
		p := decode[wire.Page[wire.Event]](t, h.expect(t, 200, "GET", "/events?"+q, ""))
		if len(p.Items) == 0 {
			t.Errorf("GET /events?%s is empty", q)
		}
		return p.Items
	}
	for _, ev := range query("kind=operation_cancelled") {
		if ev.Kind != "operation_cancelled" || ev.OperationID != cancelled || ev.ResourceID != "slow" || ev.CorrelationID != "corr-cancel" {
			t.Errorf("cancel event %+v", ev)
		}
	}
	states := map[any]bool{}
	for _, ev := range query("resource_id=slow&kind=stream_state_changed") {
		if ev.ResourceID != "slow" || ev.Kind != "stream_state_changed" {
			t.Errorf("filtered event %+v", ev)
		}
		states[ev.Data["state"]] = true
	}
	if !states["stopped"] || !states["running"] {
		t.Errorf("stream states seen %v", states)
	}
	for _, ev := range query("kind=intent_accepted,command_succeeded&resource_id=slow") {
		if ev.Kind != "intent_accepted" && ev.Kind != "command_succeeded" || ev.ResourceID != "slow" {
			t.Errorf("filtered event %+v", ev)
		}
	}
	for _, ev := range query("kind=configuration_applied") {
		if ev.ResourceID != "configuration" || ev.Data["config_version"] != "v2" {
			t.Errorf("configuration event %+v", ev)
		}
	}
	for _, ev := range query("correlation_id=corr-queued") {
		if ev.Kind != "intent_accepted" {
			t.Errorf("corr-queued event %+v", ev)
		}
	}
}
