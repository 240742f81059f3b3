package hub

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/wire"
)

// openClockHub opens and restores a Hub over path on clock, loops not
// running (see clockHub).
func openClockHub(t *testing.T, path string, clock *fakeClock) *clockHub {
	t.Helper()
	h, err := New(context.Background(), Options{
		Settings: Settings{Address: "127.0.0.1:0", Storage: path, IntentTTL: time.Hour},
		Logger:   slog.New(slog.DiscardHandler), Now: clock.Now, Version: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !h.Ready() {
		t.Fatal("hub not restored")
	}
	return &clockHub{h: h, clock: clock}
}

// staleView is the part of a stream view the stale rule speaks of.
type staleView struct {
	Convergence string
	State       string
	Generation  int64
	Stale       bool
	ReportedAt  time.Time
}

func (c *clockHub) staleView(t *testing.T, path string) (staleView, map[string]any) {
	t.Helper()
	rec := c.do(t, "GET", path, "", "")
	if rec.Code != 200 {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	s := recDecode[wire.Stream](t, rec)
	var raw map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	return staleView{s.Convergence, s.Observed.State, s.Observed.Generation, s.Observed.Stale, s.Observed.ReportedAt.Time}, raw
}

// convergenceEvents looks at n1's resources as the convergence worker
// would, and returns the convergence_changed events recorded so far,
// oldest first, as (previous, convergence, reason).
func (c *clockHub) convergenceEvents(t *testing.T) [][3]any {
	t.Helper()
	ctx := context.Background()
	if err := c.h.convergeNodes(ctx, map[string]bool{"n1": true}); err != nil {
		t.Fatal(err)
	}
	if err := c.h.pump(ctx); err != nil {
		t.Fatal(err)
	}
	evs := c.h.events.Query(eventlogFilterKind(wire.EventConvergenceChanged), 1, 100).Items
	var out [][3]any
	for i := len(evs) - 1; i >= 0; i-- {
		out = append(out, [3]any{evs[i].Data["previous"], evs[i].Data["convergence"], evs[i].Data["reason"]})
	}
	return out
}

// TestStaleObservation: convergence never claims what no one observed. When
// a node's lease lapses, and after a Hub restart until the node's first
// report to the new process, its streams' convergence is unknown (reason
// stale) and their observed view keeps the last report, with reported_at
// and stale: true; a convergence_changed event marks each move.
func TestStaleObservation(t *testing.T) {
	path := dbPath(t)
	clock := &fakeClock{now: c0}
	c := openClockHub(t, path, clock)
	const stream = APIPrefix + "/nodes/n1/streams/s1"
	rec := c.do(t, "POST", APIPrefix+"/agent/register", `{"node_id":"n1","boot_id":"b","protocol_version":1,
		"capabilities":["stream_control"],"lease_ttl_ms":15000,"node_credential":"`+credentialOf("n1")+`"}`, "")
	if rec.Code != 200 {
		t.Fatalf("register: %d %s", rec.Code, rec.Body)
	}
	session := recDecode[wire.RegisterResponse](t, rec).SessionToken
	seq := int64(0)
	report := func() {
		t.Helper()
		seq++
		rep := `{"boot_id":"b","report_seq":` + itoa(seq) + `,"streams":[{"id":"s1","state":"running","generation":1}]}`
		if rec := c.do(t, "POST", APIPrefix+"/agent/report", rep, session); rec.Code != 204 {
			t.Fatalf("report: %d %s", rec.Code, rec.Body)
		}
	}
	heartbeat := func() {
		t.Helper()
		if rec := c.do(t, "POST", APIPrefix+"/agent/heartbeat", `{"boot_id":"b","capabilities":["stream_control"]}`, session); rec.Code != 200 {
			t.Fatalf("heartbeat: %d %s", rec.Code, rec.Body)
		}
	}
	check := func(step string, want staleView) {
		t.Helper()
		got, raw := c.staleView(t, stream)
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: stream view (-want +got):\n%s", step, d)
		}
		obs, _ := raw["observed"].(map[string]any)
		if _, has := obs["stale"]; has != want.Stale {
			t.Errorf("%s: observed %v, want stale present = %v", step, obs, want.Stale)
		}
	}

	c.do(t, "PUT", stream+"/desired-state", `{"state":"running"}`, "")
	if _, raw := c.staleView(t, stream); raw["observed"] != nil {
		t.Fatalf("observed shown before any report: %v", raw["observed"])
	}
	c.at(0)
	cmd := c.take(t, session)[0]
	c.do(t, "POST", APIPrefix+"/agent/commands/"+cmd.CommandID+"/result", `{"attempt_id":"`+cmd.AttemptID+`","state":"succeeded"}`, session)
	report()
	check("reported", staleView{Convergence: wire.ConvergenceInSync, State: "running", Generation: 1, ReportedAt: c0})
	inSync := [3]any{nil, wire.ConvergenceInSync, reconcile.ReasonMatch} // the first look
	if evs := c.convergenceEvents(t); len(evs) == 0 || evs[len(evs)-1] != inSync {
		t.Fatalf("events %v, want the last %v", evs, inSync)
	}

	// The lease lapses: the last report is kept, but vouches for nothing.
	c.at(15 * time.Second)
	staleNow := staleView{Convergence: wire.ConvergenceUnknown, State: "running", Generation: 1, Stale: true, ReportedAt: c0}
	check("lease expired", staleNow)
	wentStale := [3]any{wire.ConvergenceInSync, wire.ConvergenceUnknown, reconcile.ReasonStale}
	if evs := c.convergenceEvents(t); evs[len(evs)-1] != wentStale {
		t.Fatalf("after the lease expired: events %v, want the last %v", evs, wentStale)
	}
	if n := recDecode[NodeView](t, c.do(t, "GET", APIPrefix+"/nodes/n1", "", "")); n.Status != reconcile.StatusUnavailable {
		t.Fatalf("node %s", n.Status)
	}
	// Back online, but not reported yet: still stale.
	clock.set(c0.Add(20 * time.Second))
	heartbeat()
	check("heartbeat, no report", staleNow)
	// The node's next report says the same: fresh again.
	report()
	check("reported again", staleView{Convergence: wire.ConvergenceInSync, State: "running", Generation: 1, ReportedAt: c0.Add(20 * time.Second)})
	cameBack := [3]any{wire.ConvergenceUnknown, wire.ConvergenceInSync, reconcile.ReasonMatch}
	if evs := c.convergenceEvents(t); evs[len(evs)-1] != cameBack {
		t.Fatalf("after the report: events %v, want the last %v", evs, cameBack)
	}

	// A Hub restart over the same store: nothing reported to the new
	// process yet, so every observation is stale.
	if err := c.h.Close(); err != nil {
		t.Fatal(err)
	}
	clock.set(c0.Add(30 * time.Second))
	c = openClockHub(t, path, clock)
	t.Cleanup(func() { _ = c.h.Close() })
	// A report that repeats the observation is not written, so the
	// restored reported_at is the last report that changed it.
	restarted := staleView{Convergence: wire.ConvergenceUnknown, State: "running", Generation: 1, Stale: true, ReportedAt: c0}
	check("after the restart", restarted)
	if evs := c.convergenceEvents(t); len(evs) == 0 || evs[len(evs)-1] != wentStale {
		t.Fatalf("after the restart: events %v, want the last %v", evs, wentStale)
	}
	list := recDecode[wire.Page[wire.Stream]](t, c.do(t, "GET", APIPrefix+"/streams?convergence=unknown", "", ""))
	if list.Total != 1 || !list.Items[0].Observed.Stale {
		t.Fatalf("GET /streams?convergence=unknown: %+v", list.Items)
	}
	heartbeat() // the session survives the restart
	check("after the restart, heartbeat", restarted)
	report()
	check("after the restart, reported", staleView{Convergence: wire.ConvergenceInSync, State: "running", Generation: 1, ReportedAt: c0.Add(30 * time.Second)})
	if evs := c.convergenceEvents(t); evs[len(evs)-1] != cameBack {
		t.Fatalf("after the first report to the new Hub: events %v, want the last %v", evs, cameBack)
	}
	if text := c.do(t, "GET", APIPrefix+"/operations?resource_id=s1", "", "").Body.String(); strings.Contains(text, `"stale":true`) {
		t.Fatalf("operations still show a stale observation: %s", text)
	}
}

// TestStaleAfterNodeReboot: a node that registers with a new boot_id while
// its lease still runs is a new process; what the old one reported is
// stale until the new one reports.
func TestStaleAfterNodeReboot(t *testing.T) {
	c := openClockHub(t, dbPath(t), &fakeClock{now: c0})
	t.Cleanup(func() { _ = c.h.Close() })
	register := func(boot string) string {
		t.Helper()
		rec := c.do(t, "POST", APIPrefix+"/agent/register", `{"node_id":"n1","boot_id":"`+boot+`","protocol_version":1,
			"capabilities":["stream_control"],"lease_ttl_ms":60000,"node_credential":"`+credentialOf("n1")+`"}`, "")
		if rec.Code != 200 {
			t.Fatalf("register: %d %s", rec.Code, rec.Body)
		}
		return recDecode[wire.RegisterResponse](t, rec).SessionToken
	}
	report := func(session, boot string) {
		t.Helper()
		rep := `{"boot_id":"` + boot + `","report_seq":1,"streams":[{"id":"s1","state":"running","generation":1}]}`
		if rec := c.do(t, "POST", APIPrefix+"/agent/report", rep, session); rec.Code != 204 {
			t.Fatalf("report: %d %s", rec.Code, rec.Body)
		}
	}
	const stream = APIPrefix + "/nodes/n1/streams/s1"
	session := register("b1")
	c.do(t, "PUT", stream+"/desired-state", `{"state":"running"}`, "")
	c.at(0)
	cmd := c.take(t, session)[0]
	c.do(t, "POST", APIPrefix+"/agent/commands/"+cmd.CommandID+"/result", `{"attempt_id":"`+cmd.AttemptID+`","state":"succeeded"}`, session)
	report(session, "b1")
	if v, _ := c.staleView(t, stream); v.Convergence != wire.ConvergenceInSync || v.Stale {
		t.Fatalf("reported: %+v", v)
	}
	session = register("b2")
	if v, _ := c.staleView(t, stream); v.Convergence != wire.ConvergenceUnknown || !v.Stale {
		t.Fatalf("after a new boot registered: %+v", v)
	}
	report(session, "b2")
	if v, _ := c.staleView(t, stream); v.Convergence != wire.ConvergenceInSync || v.Stale {
		t.Fatalf("after the new boot reported: %+v", v)
	}
	// Registering again with the same boot (a lost session) changes nothing.
	register("b2")
	if v, _ := c.staleView(t, stream); v.Convergence != wire.ConvergenceInSync {
		t.Fatalf("after re-registering the same boot: %+v", v)
	}
}
