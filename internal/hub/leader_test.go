package hub

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

func (th *testHub) ha(t *testing.T) HA {
	t.Helper()
	return decode[System](t, th.do(t, "GET", APIPrefix+"/system", "", "Authorization", "Bearer "+testToken)).HA
}

// metricLine returns the sample line of an unlabelled series of the open
// /metrics.
func (th *testHub) metricLine(t *testing.T, name string) string {
	t.Helper()
	r := th.do(t, "GET", "/metrics", "")
	for _, l := range strings.Split(string(r.body), "\n") {
		if strings.HasPrefix(l, name+" ") {
			return l
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return ""
}

// TestLeaderOnSQLite: a Hub on its own SQLite file leads from the start,
// at an epoch one higher at every start, and says so in /system and
// /metrics.
func TestLeaderOnSQLite(t *testing.T) {
	path := dbPath(t)
	for want := int64(1); want <= 2; want++ {
		th := serve(t, path, "", true)
		ha := th.ha(t)
		if ha.Role != roleLeader || ha.Epoch != want || ha.Leader == nil || ha.Leader.ID != th.h.lead.id || ha.Leader.Address != "127.0.0.1:0" {
			t.Fatalf("start %d: ha %+v (leader %+v)", want, ha, ha.Leader)
		}
		if l := th.metricLine(t, "svc_hub_leader"); l != "svc_hub_leader 1" {
			t.Errorf("start %d: %s", want, l)
		}
		if l := th.metricLine(t, "svc_hub_lease_epoch"); l != "svc_hub_lease_epoch "+itoa(want) {
			t.Errorf("start %d: %s", want, l)
		}
		th.stop()
	}
}

// TestLeaderStandbyTakeover plays a Hub on a database another Hub uses:
// it stands by (ready, serving, not reconciling) while the other holds the
// lease, takes over once it lapsed, steps down when deposed, and releases
// the lease when it stops.
func TestLeaderStandbyTakeover(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	const ttl = 5 * time.Second
	other := func(st *store.Store, now time.Time) store.Lease {
		t.Helper()
		l, err := st.AcquireLease(ctx, store.LeaseClaim{HolderID: "hub-b", Address: "http://hub-b.test:8090", Now: now, TTL: ttl})
		if err != nil {
			t.Fatalf("hub-b claims: %v", err)
		}
		return l
	}
	st, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	other(st, c0)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: c0}
	th := serveOptions(t, true, Options{
		Settings: Settings{Address: "127.0.0.1:0", Storage: path, LeaseTTL: ttl, AdvertiseURL: "http://hub-a.test:8090"},
		Logger:   slog.New(slog.DiscardHandler), Version: "test", Now: clock.Now, HubID: "hub-a", sharedLease: true,
	})
	h := th.h
	eventually(t, "hub-a sees hub-b's lease", func() bool { return th.ha(t).Epoch == 1 })
	ha := th.ha(t)
	if ha.Role != roleStandby || ha.Leader == nil || ha.Leader.ID != "hub-b" || ha.Leader.Address != "http://hub-b.test:8090" {
		t.Fatalf("standby: %+v %+v", ha, ha.Leader)
	}
	if r := th.do(t, "GET", "/readiness", ""); r.status != http.StatusOK {
		t.Fatalf("standby readiness %d %s", r.status, r.body)
	}
	if l := th.metricLine(t, "svc_hub_leader"); l != "svc_hub_leader 0" {
		t.Errorf("standby: %s", l)
	}
	// A standby accepts operator writes; it dispatches nothing.
	a := newTestAgent(th, "n1")
	if reg := a.register(t, "", 15*time.Second); reg.Epoch != 1 {
		t.Fatalf("register on the standby: epoch %d, want 1", reg.Epoch)
	}
	th.put(t, "n1", "s1", `{"state":"running","config_version":"v1"}`)
	if cmds := a.commands(t, 300*time.Millisecond); len(cmds) != 0 {
		t.Fatalf("the standby dispatched %+v", cmds)
	}

	// hub-b's lease lapses: hub-a takes over at the next epoch and
	// dispatches the pending intent with it.
	clock.set(c0.Add(ttl))
	eventually(t, "hub-a leads", func() bool { return th.ha(t).Role == roleLeader })
	ha = th.ha(t)
	if ha.Epoch != 2 || ha.Leader == nil || ha.Leader.ID != "hub-a" || ha.Leader.Address != "http://hub-a.test:8090" {
		t.Fatalf("leader: %+v %+v", ha, ha.Leader)
	}
	var cmds []wire.Command
	eventually(t, "the new leader's command", func() bool {
		cmds = a.commands(t, 200*time.Millisecond)
		return len(cmds) > 0
	})
	if len(cmds) != 1 || cmds[0].Epoch != 2 || cmds[0].ResourceID != "s1" {
		t.Fatalf("commands of the leader: %+v", cmds)
	}

	// hub-b takes the lease over (its clock is past hub-a's lease): hub-a
	// steps down at its next claim and drops what it had in flight; its
	// epoch's writes are fenced.
	b := other(h.st, c0.Add(time.Hour))
	eventually(t, "hub-a stands by", func() bool { return th.ha(t).Role == roleStandby })
	if ha := th.ha(t); ha.Epoch != b.Epoch || b.Epoch != 3 || ha.Leader == nil || ha.Leader.ID != "hub-b" {
		t.Fatalf("deposed: %+v, hub-b's lease %+v", ha, b)
	}
	if n := h.fleet.InFlight(); n != 0 {
		t.Errorf("%d attempts in flight on the deposed Hub", n)
	}
	if err := h.st.AppendEvents(store.WithEpoch(ctx, 2), []wire.Event{{Kind: wire.EventNodeOnline, OccurredAt: wire.At(c0), NodeID: "n1"}}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a write at the deposed epoch: %v", err)
	}
	if r := th.do(t, "GET", "/readiness", ""); r.status != http.StatusOK {
		t.Fatalf("deposed readiness %d %s", r.status, r.body)
	}

	// hub-b releases: hub-a takes over at once, and releases when it stops.
	if err := h.st.ReleaseLease(ctx, "hub-b", b.Epoch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "hub-a leads again", func() bool { return th.ha(t).Role == roleLeader })
	if ha := th.ha(t); ha.Epoch != 4 {
		t.Fatalf("after the release: %+v", ha)
	}
	th.stop()
	st, err = store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if l, err := st.GetLease(ctx); err != nil || l.HolderID != "" || l.Epoch != 4 {
		t.Fatalf("lease after a clean stop: %+v, %v", l, err)
	}
}
