package fleet

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// registered returns a fleet whose nodes registered at t0 (online) with a
// 15 s lease.
func registered(ids ...string) *Fleet {
	f := New(func() time.Time { return t0 })
	for _, id := range ids {
		f.Register(store.Registration{NodeID: id, BootID: "b1", SessionToken: "tok-" + id, SessionExpiresAt: t0.Add(time.Hour),
			LeaseTTL: 15 * time.Second, Now: t0})
	}
	return f
}

func attempt(node, id, state string) Flight {
	return Flight{Command: wire.Command{CommandID: "i-" + id, AttemptID: id, NodeID: node}, State: state,
		DispatchedAt: t0, ExpiresAt: t0.Add(time.Minute)}
}

// TestPendingAndSettle: a pass reads the marked nodes that can take a
// command; its Settle drops only the marks of nodes with no row left that
// nobody marked again since.
func TestPendingAndSettle(t *testing.T) {
	tests := []struct {
		name        string
		setup       func(f *Fleet)
		between     func(f *Fleet) // after Pending, before Settle
		left        map[string]bool
		wantPending []string
		wantMarked  []string // after Settle
	}{
		{name: "no rows left: cleared", setup: func(f *Fleet) { f.Mark("a", "b") },
			wantPending: []string{"a", "b"}, wantMarked: nil},
		{name: "rows left: kept", setup: func(f *Fleet) { f.Mark("a", "b") }, left: map[string]bool{"b": true},
			wantPending: []string{"a", "b"}, wantMarked: []string{"b"}},
		{name: "marked again during the pass: kept", setup: func(f *Fleet) { f.Mark("a") }, between: func(f *Fleet) { f.Mark("a") },
			wantPending: []string{"a"}, wantMarked: []string{"a"}},
		{name: "unavailable node: not read, mark kept", setup: func(f *Fleet) { f.Mark("a", "b"); f.ExpireLeases(t0.Add(time.Minute)) },
			wantPending: nil, wantMarked: []string{"a", "b"}},
		{name: "draining node: not read, mark kept; active again: marked", setup: func(f *Fleet) {
			f.SetMode("b", wire.NodeModeDraining)
			f.Mark("a", "b")
		}, between: func(f *Fleet) { f.SetMode("b", wire.NodeModeActive) }, wantPending: []string{"a"}, wantMarked: []string{"b"}},
		{name: "unknown node: not read", setup: func(f *Fleet) { f.Mark("ghost") }, wantMarked: []string{"ghost"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := registered("a", "b")
			tt.setup(f)
			p := f.Pending()
			if diff := cmp.Diff(tt.wantPending, p.Nodes); diff != "" {
				t.Errorf("Pending (-want +got):\n%s", diff)
			}
			if tt.between != nil {
				tt.between(f)
			}
			f.Settle(p, tt.left)
			var marked []string
			for _, id := range []string{"a", "b", "ghost"} {
				if _, ok := f.pending[id]; ok {
					marked = append(marked, id)
				}
			}
			if diff := cmp.Diff(tt.wantMarked, marked); diff != "" {
				t.Errorf("marked after Settle (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAttempts: an attempt is in flight from Enqueue to Finish and on its
// node's queue until acknowledged; a delivered one is handed out again only
// after RedeliverAfter.
func TestAttempts(t *testing.T) {
	type step struct {
		do         func(f *Fleet) bool // reports what the step returned (ok, or commands taken)
		want       bool
		queued     int
		active     int
		inFlight   int
		takenAfter int // commands a poll at t0+takeAt gets
		takeAt     time.Duration
	}
	take := func(f *Fleet, at time.Duration) int {
		f.mu.Lock()
		defer f.mu.Unlock()
		cmds, _ := f.takeLocked("a", t0.Add(at))
		return len(cmds)
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "dispatched, delivered, redelivered, acknowledged, finished", steps: []step{
			{do: func(f *Fleet) bool { f.Enqueue(attempt("a", "x", wire.OpDispatched)); return true }, want: true,
				queued: 1, active: 1, inFlight: 1, takenAfter: 1},
			{do: func(f *Fleet) bool { return take(f, RedeliverAfter-time.Millisecond) > 0 }, want: false,
				queued: 1, active: 1, inFlight: 1, takenAfter: 1, takeAt: RedeliverAfter},
			{do: func(f *Fleet) bool { _, ok := f.Acknowledge("x"); return ok }, want: true,
				queued: 0, active: 1, inFlight: 1, takenAfter: 0, takeAt: time.Hour},
			{do: func(f *Fleet) bool { _, ok := f.Finish("x"); return ok }, want: true,
				queued: 0, active: 0, inFlight: 0},
			{do: func(f *Fleet) bool { _, ok := f.Finish("x"); return ok }, want: false,
				queued: 0, active: 0, inFlight: 0},
		}},
		{name: "restored acknowledged: in flight, not queued", steps: []step{
			{do: func(f *Fleet) bool { f.Enqueue(attempt("a", "x", wire.OpAcknowledged)); return true }, want: true,
				queued: 0, active: 1, inFlight: 1},
		}},
		{name: "finished before acknowledged", steps: []step{
			{do: func(f *Fleet) bool {
				f.Enqueue(attempt("a", "x", wire.OpDispatched), attempt("a", "y", wire.OpDispatched))
				return true
			},
				want: true, queued: 2, active: 2, inFlight: 2, takenAfter: 2},
			{do: func(f *Fleet) bool { fl, ok := f.Finish("x"); return ok && fl.Command.AttemptID == "x" }, want: true,
				queued: 1, active: 1, inFlight: 1, takenAfter: 1, takeAt: RedeliverAfter},
		}},
		{name: "unknown attempt", steps: []step{
			{do: func(f *Fleet) bool { _, ok := f.Acknowledge("nope"); return ok }, want: false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := registered("a")
			for i, s := range tt.steps {
				if got := s.do(f); got != s.want {
					t.Fatalf("step %d returned %v, want %v", i, got, s.want)
				}
				n, _ := f.Node("a")
				inFlight, _ := f.Queues()
				if n.Queued != s.queued || n.Active != s.active || inFlight != s.inFlight || f.InFlight() != s.inFlight {
					t.Fatalf("step %d: queued %d active %d in flight %d, want %d %d %d", i, n.Queued, n.Active, inFlight, s.queued, s.active, s.inFlight)
				}
				if got := take(f, s.takeAt); got != s.takenAfter {
					t.Fatalf("step %d: a poll at +%s took %d, want %d", i, s.takeAt, got, s.takenAfter)
				}
			}
		})
	}
}

// TestWaitForCapacity: an intent is counted once while it waits, and again
// after an attempt of it moved on.
func TestWaitForCapacity(t *testing.T) {
	f := registered("a")
	got := []bool{f.WaitForCapacity("a", "i-x"), f.WaitForCapacity("a", "i-x"), f.WaitForCapacity("a", "i-y")}
	f.Enqueue(attempt("a", "x", wire.OpDispatched))
	f.Acknowledge("x")
	got = append(got, f.WaitForCapacity("a", "i-x"))
	if diff := cmp.Diff([]bool{true, false, true, true}, got); diff != "" {
		t.Fatalf("first (-want +got):\n%s", diff)
	}
}

// TestSessions: a registration replaces the node's cached session at
// once; expired sessions leave the cache.
func TestSessions(t *testing.T) {
	tests := []struct {
		name string
		do   func(f *Fleet)
		want map[string]bool // token -> cached
	}{
		{name: "registered", do: func(*Fleet) {}, want: map[string]bool{"tok-a": true, "tok-b": true}},
		{name: "registered again: old token dropped", do: func(f *Fleet) {
			f.Register(store.Registration{NodeID: "a", BootID: "b2", SessionToken: "tok-a2", SessionExpiresAt: t0.Add(time.Hour), LeaseTTL: time.Second, Now: t0})
		}, want: map[string]bool{"tok-a": false, "tok-a2": true, "tok-b": true}},
		{name: "cached from the store", do: func(f *Fleet) {
			f.CacheSession("tok-c", Session{NodeID: "c", ExpiresAt: t0.Add(time.Minute)})
		}, want: map[string]bool{"tok-c": true}},
		{name: "expired", do: func(f *Fleet) {
			f.CacheSession("tok-c", Session{NodeID: "c", ExpiresAt: t0.Add(time.Minute)})
			f.ExpireSessions(t0.Add(time.Minute))
		}, want: map[string]bool{"tok-a": true, "tok-c": false}},
		{name: "dropped", do: func(f *Fleet) { f.DropSession("tok-b") }, want: map[string]bool{"tok-a": true, "tok-b": false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := registered("a", "b")
			tt.do(f)
			for tok, want := range tt.want {
				if _, got := f.Session(tok); got != want {
					t.Errorf("session %s cached %v, want %v", tok, got, want)
				}
			}
		})
	}
}

// TestLeases: liveness follows register, heartbeat and lease expiry; an
// expired lease makes the node's observation stale.
func TestLeases(t *testing.T) {
	f := New(time.Now)
	reg := store.Registration{NodeID: "a", BootID: "b1", SessionToken: "t", LeaseTTL: 10 * time.Second, Now: t0}
	if came, rebooted := f.Register(reg); !came || rebooted {
		t.Fatalf("first registration: came %v rebooted %v", came, rebooted)
	}
	f.Receive(Report{NodeID: "a", BootID: "b1", Seq: 1, Now: t0})
	f.Accept(Report{NodeID: "a", BootID: "b1", Seq: 1, Now: t0}, true)
	if !f.Observing("a") {
		t.Fatal("not observing after an accepted report")
	}
	until, came, changed := f.Heartbeat("a", nil, "", "", t0.Add(5*time.Second))
	if came || changed || !until.Equal(t0.Add(15*time.Second)) {
		t.Fatalf("heartbeat: until %v came %v changed %v", until, came, changed)
	}
	if _, _, changed := f.Heartbeat("a", []string{"stream_control"}, "", "", t0.Add(5*time.Second)); !changed {
		t.Fatal("a new capability is not a change")
	}
	if gone := f.ExpireLeases(t0.Add(15*time.Second - time.Millisecond)); len(gone) != 0 {
		t.Fatalf("expired early: %v", gone)
	}
	if gone := f.ExpireLeases(t0.Add(15 * time.Second)); !cmp.Equal(gone, []string{"a"}) {
		t.Fatalf("expired %v, want [a]", gone)
	}
	if n, _ := f.Node("a"); n.Online || n.Observing || n.Status != reconcile.StatusUnavailable {
		t.Fatalf("after expiry: %+v", n)
	}
	if _, came, _ := f.Heartbeat("a", nil, "", "", t0.Add(time.Minute)); !came {
		t.Fatal("a heartbeat after expiry did not bring the node back")
	}
	if f.Observing("a") {
		t.Fatal("observing again before a report")
	}
	f.Receive(Report{NodeID: "a", BootID: "b1", Seq: 2, Now: t0})
	f.Accept(Report{NodeID: "a", BootID: "b1", Seq: 2, Now: t0}, false)
	reg.BootID, reg.Now = "b2", t0.Add(time.Minute)
	if came, rebooted := f.Register(reg); came || !rebooted {
		t.Fatalf("registration of a new boot: came %v rebooted %v", came, rebooted)
	}
	if f.Observing("a") {
		t.Fatal("observing the old boot's report after a new boot registered")
	}
}

// TestReceive: reports are ordered by (boot, seq); one that says nothing
// new is taken without a write and makes the observation current.
func TestReceive(t *testing.T) {
	obs := []store.ObservedStream{{StreamID: "s1", State: "running", Generation: 1}}
	changed := []store.ObservedStream{{StreamID: "s1", State: "failed", Generation: 1}}
	tests := []struct {
		name   string
		before []Report // received and accepted
		expire bool     // the lease lapses before r
		r      Report
		want   Received
	}{
		{name: "first", r: Report{BootID: "b1", Seq: 1, Streams: obs}, want: Received{SameConfig: true}},
		{name: "same again", before: []Report{{BootID: "b1", Seq: 1, Streams: obs}}, r: Report{BootID: "b1", Seq: 2, Streams: obs},
			want: Received{Same: true, SameConfig: true, Prev: obs, WasFresh: true}},
		{name: "same after the lease lapsed: refreshed", before: []Report{{BootID: "b1", Seq: 1, Streams: obs}}, expire: true,
			r: Report{BootID: "b1", Seq: 2, Streams: obs}, want: Received{Same: true, Refreshed: true, SameConfig: true, Prev: obs, WasFresh: true}},
		{name: "older", before: []Report{{BootID: "b1", Seq: 5, Streams: obs}}, r: Report{BootID: "b1", Seq: 5, Streams: changed},
			want: Received{Stale: true, SameConfig: true, Prev: obs, WasFresh: true}},
		{name: "new boot, lower seq", before: []Report{{BootID: "b1", Seq: 5, Streams: obs}}, r: Report{BootID: "b2", Seq: 1, Streams: obs},
			want: Received{SameConfig: true, Prev: obs, WasFresh: true}},
		{name: "changed", before: []Report{{BootID: "b1", Seq: 1, Streams: obs}}, r: Report{BootID: "b1", Seq: 2, Streams: changed},
			want: Received{SameConfig: true, Prev: obs, WasFresh: true}},
		{name: "new configuration", before: []Report{{BootID: "b1", Seq: 1, Streams: obs}},
			r:    Report{BootID: "b1", Seq: 2, Streams: obs, Configuration: &wire.ReportConfiguration{Generation: 3}},
			want: Received{Prev: obs, WasFresh: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := registered("a")
			for _, r := range tt.before {
				r.NodeID = "a"
				f.Receive(r)
				f.Accept(r, false)
			}
			if tt.expire {
				f.ExpireLeases(t0.Add(time.Hour))
				f.Heartbeat("a", nil, "", "", t0.Add(time.Hour))
			}
			tt.r.NodeID = "a"
			got := f.Receive(tt.r)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Receive (-want +got):\n%s", diff)
			}
			if tt.want.Same && !f.Observing("a") {
				t.Error("a report saying nothing new left the observation stale")
			}
		})
	}
}

// TestRestore: Restore replaces nodes, marks and attempts, keeps the
// session cache, and leaves every node unavailable.
func TestRestore(t *testing.T) {
	f := registered("a")
	f.Enqueue(attempt("a", "old", wire.OpDispatched))
	f.Mark("a")
	f.Restore([]store.Node{{NodeID: "b", RegisteredAt: t0, Mode: wire.NodeModeMaintenance, LeaseTTL: time.Second, ReportSeq: 7}},
		map[string][]store.ObservedStream{"b": {{StreamID: "s1", State: "running"}}}, []string{"b"},
		[]Flight{attempt("b", "x", wire.OpAcknowledged)})
	if _, ok := f.Node("a"); ok {
		t.Error("a node the store does not hold survived the restore")
	}
	n, _ := f.Node("b")
	want := Node{NodeID: "b", RegisteredAt: t0, Mode: wire.NodeModeMaintenance, Status: reconcile.StatusUnavailable, LeaseTTL: time.Second,
		ReportSeq: 7, Observed: []store.ObservedStream{{StreamID: "s1", State: "running"}}, Active: 1}
	if diff := cmp.Diff(want, n); diff != "" {
		t.Errorf("restored node (-want +got):\n%s", diff)
	}
	if _, ok := f.Finish("old"); ok {
		t.Error("an attempt the store does not hold survived the restore")
	}
	if _, ok := f.Session("tok-a"); !ok {
		t.Error("the session cache did not survive the restore")
	}
	if _, ok := f.pending["b"]; !ok {
		t.Error("the pending outbox did not mark its node")
	}
}

// TestCopies: what the fleet returns is a copy.
func TestCopies(t *testing.T) {
	f := registered("a")
	f.Advertise("a", []string{"job_control", "stream_control"}, "", "")
	n, _ := f.Node("a")
	n.Capabilities[0] = "changed"
	f.ReconcileNode("a").Capabilities[0] = "changed"
	f.Nodes()[0].Capabilities[0] = "changed"
	if got, _ := f.Node("a"); got.Capabilities[0] != "job_control" {
		t.Fatalf("a returned node changed the fleet: %v", got.Capabilities)
	}
	f.Receive(Report{NodeID: "a", BootID: "b1", Seq: 1})
	f.Accept(Report{NodeID: "a", BootID: "b1", Seq: 1, Streams: []store.ObservedStream{{StreamID: "s1", LastErrorAt: time.UnixMicro(1500)}}}, false)
	o := f.Observed("a", "s1")
	o.State = "changed"
	if again := f.Observed("a", "s1"); again.State != "" || !again.LastErrorAt.Equal(time.UnixMilli(1)) {
		t.Fatalf("observed %+v, want a copy in milliseconds", again)
	}
	if f.Observed("a", "s2") != nil || f.Observed("b", "s1") != nil {
		t.Fatal("an observation of nothing")
	}
}

// TestPoll: a poll with no listener to park on gets what is queued at
// once, else waits for a command, the end of its wait, its context or the
// fleet's shutdown; the node counts it while it waits.
func TestPoll(t *testing.T) {
	tests := []struct {
		name  string
		queue bool                                      // a command is queued before the poll
		then  func(f *Fleet, cancel context.CancelFunc) // while the poll waits
		want  int
	}{
		{name: "queued", queue: true, want: 1},
		{name: "woken by a command", then: func(f *Fleet, _ context.CancelFunc) { f.Enqueue(attempt("a", "x", wire.OpDispatched)) }, want: 1},
		{name: "wait ends", then: func(*Fleet, context.CancelFunc) {}, want: 0},
		{name: "context ends", then: func(_ *Fleet, cancel context.CancelFunc) { cancel() }, want: 0},
		{name: "shutdown", then: func(f *Fleet, _ context.CancelFunc) { f.Shutdown() }, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := registered("a")
				if tt.queue {
					f.Enqueue(attempt("a", "x", wire.OpDispatched))
				}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				got := make(chan []wire.Command, 1)
				start := time.Now()
				go func() {
					cmds, parked := f.Poll(ctx, nil, nil, "a", time.Minute)
					if parked {
						t.Error("parked without a listener")
					}
					got <- cmds
				}()
				synctest.Wait()
				if tt.then != nil {
					if n, _ := f.Node("a"); n.Pollers != 1 {
						t.Fatalf("%d polls waiting, want 1", n.Pollers)
					}
					time.Sleep(time.Second)
					tt.then(f, cancel)
				}
				cmds := <-got
				if len(cmds) != tt.want {
					t.Fatalf("poll got %d commands, want %d", len(cmds), tt.want)
				}
				if waited := time.Since(start); tt.name == "wait ends" && waited != time.Minute {
					t.Fatalf("waited %s, want the poll's wait", waited)
				}
				if n, _ := f.Node("a"); n.Pollers != 0 {
					t.Fatalf("%d polls still counted after the answer", n.Pollers)
				}
			})
		})
	}
}

// TestCommandPage: an empty answer is an empty page, not null.
func TestCommandPage(t *testing.T) {
	if p := CommandPage(nil); p.Items == nil || p.Total != 0 || p.Page != 1 {
		t.Fatalf("%+v", p)
	}
	if p := CommandPage(make([]wire.Command, 2)); p.PageSize != 2 || p.Total != 2 {
		t.Fatalf("%+v", p)
	}
}

// TestForget: a forgotten node's session is dropped and not cached again,
// it is unavailable with nothing reported, its queued commands are kept
// but not delivered until it registers again.
func TestForget(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	f := New(func() time.Time { return t0 })
	reg := store.Registration{NodeID: "a", BootID: "b1", SessionToken: "tok-a", SessionExpiresAt: t0.Add(time.Hour), LeaseTTL: time.Minute, Now: t0}
	f.Register(reg)
	f.mu.Lock()
	f.enqueueLocked(Flight{Command: wire.Command{CommandID: "c1", AttemptID: "at1", NodeID: "a"}, State: wire.OpDispatched, ExpiresAt: t0.Add(time.Minute)})
	f.mu.Unlock()
	f.Forget("a")
	if _, ok := f.Session("tok-a"); ok {
		t.Fatal("the forgotten node's session is still cached")
	}
	f.CacheSession("tok-a", Session{NodeID: "a", ExpiresAt: t0.Add(time.Hour)})
	if _, ok := f.Session("tok-a"); ok {
		t.Fatal("a session read before the forget was cached after it")
	}
	n, _ := f.Node("a")
	if n.Online || !n.RegisteredAt.IsZero() || n.Queued != 1 {
		t.Fatalf("forgotten node: %+v", n)
	}
	f.mu.Lock()
	cmds, _ := f.takeLocked("a", t0)
	f.mu.Unlock()
	if len(cmds) != 0 {
		t.Fatalf("a forgotten node was handed %d commands", len(cmds))
	}
	reg.SessionToken = "tok-a2"
	f.Register(reg)
	f.mu.Lock()
	cmds, _ = f.takeLocked("a", t0)
	f.mu.Unlock()
	if len(cmds) != 1 {
		t.Fatalf("after registering again: %d commands, want 1", len(cmds))
	}
}
