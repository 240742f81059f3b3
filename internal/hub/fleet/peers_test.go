package fleet

import (
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// TestSync: what another Hub wrote of a node reaches the fleet: a later
// lease brings it online and never shortens one, a newer registration
// drops the session cached here, a newer report is taken, an older one
// is not.
func TestSync(t *testing.T) {
	stored := func(mod func(*store.Node)) store.Node {
		n := store.Node{NodeID: "n1", BootID: "b1", RegisteredAt: t0, LeaseExpiresAt: t0.Add(15 * time.Second), Mode: wire.NodeModeActive,
			SessionExpiresAt: t0.Add(time.Hour), LeaseTTL: 15 * time.Second}
		if mod != nil {
			mod(&n)
		}
		return n
	}
	obs := []store.ObservedStream{{StreamID: "s1", State: "running", Generation: 1}}
	tests := []struct {
		name       string
		setup      func(f *Fleet)
		sn         store.Node
		observed   []store.ObservedStream
		now        time.Time
		want       Synced
		wantStatus string
		wantUntil  time.Time
		wantSeq    int64
	}{
		{name: "registered elsewhere: online", setup: func(*Fleet) {}, sn: stored(nil), now: t0, want: Synced{Came: true},
			wantStatus: "online", wantUntil: t0.Add(15 * time.Second)},
		{name: "lapsed here, renewed elsewhere: online again", setup: func(f *Fleet) {
			f.Register(store.Registration{NodeID: "n1", BootID: "b1", SessionToken: "tok", SessionExpiresAt: t0.Add(time.Hour), LeaseTTL: time.Second, Now: t0})
			f.ExpireLeases(t0.Add(2 * time.Second))
		}, sn: stored(func(n *store.Node) { n.LeaseExpiresAt = t0.Add(30 * time.Second) }), now: t0.Add(20 * time.Second),
			want: Synced{Came: true}, wantStatus: "online", wantUntil: t0.Add(30 * time.Second)},
		{name: "an older lease is not taken", setup: func(f *Fleet) {
			f.Register(store.Registration{NodeID: "n1", BootID: "b1", SessionToken: "tok", SessionExpiresAt: t0.Add(time.Hour), LeaseTTL: time.Minute, Now: t0})
		}, sn: stored(nil), now: t0, wantStatus: "online", wantUntil: t0.Add(time.Minute)},
		{name: "a newer report is taken", setup: func(*Fleet) {}, sn: stored(func(n *store.Node) { n.ReportBootID, n.ReportSeq = "b1", 3 }),
			observed: obs, now: t0, want: Synced{Came: true, Reported: true}, wantStatus: "online", wantUntil: t0.Add(15 * time.Second), wantSeq: 3},
		{name: "an expired stored lease does not bring it online", setup: func(*Fleet) {}, sn: stored(nil), now: t0.Add(time.Minute),
			wantStatus: "unavailable", wantUntil: t0.Add(15 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := New(func() time.Time { return tt.now })
			tt.setup(f)
			got := f.Sync(tt.sn, tt.observed, f.Changes("n1"), tt.now)
			if got != tt.want {
				t.Errorf("Sync = %+v, want %+v", got, tt.want)
			}
			n, _ := f.Node("n1")
			if n.Status != tt.wantStatus || !n.LeaseUntil.Equal(tt.wantUntil) || n.ReportSeq != tt.wantSeq {
				t.Errorf("node %s until %v seq %d, want %s %v %d", n.Status, n.LeaseUntil, n.ReportSeq, tt.wantStatus, tt.wantUntil, tt.wantSeq)
			}
			if f.NeedsReport("n1", tt.sn.ReportBootID, tt.sn.ReportSeq) && tt.observed != nil {
				t.Errorf("the report taken is still needed")
			}
		})
	}
}

// TestSyncDropsReplacedSession: a registration on another Hub replaces the
// node's session here too.
func TestSyncDropsReplacedSession(t *testing.T) {
	f := registered("n1")
	if _, ok := f.Session("tok-n1"); !ok {
		t.Fatal("the session is not cached")
	}
	f.Sync(store.Node{NodeID: "n1", BootID: "b2", RegisteredAt: t0.Add(time.Second), LeaseExpiresAt: t0.Add(16 * time.Second)}, nil, f.Changes("n1"), t0.Add(time.Second))
	if _, ok := f.Session("tok-n1"); ok {
		t.Fatal("the replaced session is still cached")
	}
}

// TestSyncFlights: a standby's attempts of a node follow the store: new
// ones are delivered once, acknowledged ones leave the queue, finished
// ones are forgotten.
func TestSyncFlights(t *testing.T) {
	f := registered("n1")
	f.SyncFlights("n1", []Flight{attempt("n1", "a1", wire.OpDispatched), attempt("n1", "a2", wire.OpDispatched)})
	f.mu.Lock()
	cmds, _ := f.takeLocked("n1", t0)
	f.mu.Unlock()
	if len(cmds) != 2 {
		t.Fatalf("delivered %+v", cmds)
	}
	// The same attempts again (the next note): not delivered again before
	// RedeliverAfter.
	f.SyncFlights("n1", []Flight{attempt("n1", "a1", wire.OpDispatched), attempt("n1", "a2", wire.OpAcknowledged), attempt("n1", "a3", wire.OpDispatched)})
	f.mu.Lock()
	cmds, _ = f.takeLocked("n1", t0.Add(time.Second))
	f.mu.Unlock()
	if len(cmds) != 1 || cmds[0].AttemptID != "a3" {
		t.Fatalf("after the second sync: %+v", cmds)
	}
	if n, _ := f.Node("n1"); n.Queued != 2 || n.Active != 3 {
		t.Fatalf("queued %d active %d, want 2 3", n.Queued, n.Active)
	}
	f.SyncFlights("n1", []Flight{attempt("n1", "a3", wire.OpAcknowledged)})
	if n, _ := f.Node("n1"); n.Queued != 0 || n.Active != 1 || f.InFlight() != 1 {
		t.Fatalf("after finishes: queued %d active %d in flight %d", n.Queued, n.Active, f.InFlight())
	}
}

// TestSyncKeepsLocalChange: a mode this Hub wrote after the store read
// began is not reverted by the read; a read begun after it is taken.
func TestSyncKeepsLocalChange(t *testing.T) {
	f := registered("n1")
	before := f.Changes("n1")
	read := store.Node{NodeID: "n1", BootID: "b1", RegisteredAt: t0, Mode: wire.NodeModeActive}
	f.SetMode("n1", wire.NodeModeDraining) // written while the row was read
	f.Sync(read, nil, before, t0)
	if n, _ := f.Node("n1"); n.Mode != wire.NodeModeDraining {
		t.Fatalf("a stale read reverted the mode to %s", n.Mode)
	}
	read.Mode = wire.NodeModeMaintenance
	f.Sync(read, nil, f.Changes("n1"), t0)
	if n, _ := f.Node("n1"); n.Mode != wire.NodeModeMaintenance {
		t.Fatalf("mode %s, want the stored maintenance", n.Mode)
	}
}
