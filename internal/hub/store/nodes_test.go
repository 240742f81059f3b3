package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
	"github.com/google/go-cmp/cmp"
)

func reg(node, token string, now time.Time) Registration {
	return Registration{NodeID: node, BootID: "boot-1", Version: "0.6.0", ProtocolVersion: wire.ProtocolVersion,
		Capabilities: []string{"network_shuffle"}, DataAddress: "10.0.0.1:7000", SessionToken: token,
		SessionExpiresAt: now.Add(time.Hour), LeaseExpiresAt: now.Add(15 * time.Second), Now: now,
		CredentialDigest: hashToken("credential-" + node), SessionBinding: []byte("binding")}
}

func TestNodesAndSessions(t *testing.T) { backends(t, testNodesAndSessions) }

func testNodesAndSessions(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	const tok1, tok2 = "SECRET-session-token-one-0123456789", "SECRET-session-token-two-9876543210"
	if err := s.RegisterNode(ctx, reg("n1", tok1, t0)); err != nil {
		t.Fatal(err)
	}
	if se, err := s.LookupSession(ctx, tok1, t0.Add(time.Minute)); err != nil || se.NodeID != "n1" {
		t.Fatalf("lookup = %+v, %v", se, err)
	}
	if _, err := s.LookupSession(ctx, tok1, t0.Add(time.Hour)); !errors.Is(err, ErrSessionExpired) {
		t.Errorf("expired lookup: %v", err)
	}
	if err := s.SetNodeMode(ctx, ModeChange{NodeID: "n1", Mode: wire.NodeModeDraining, Actor: "op", CorrelationID: "c1", Now: t0}); err != nil {
		t.Fatal(err)
	}
	// Re-register: new session replaces the old, mode is kept.
	if err := s.RegisterNode(ctx, reg("n1", tok2, t0.Add(time.Minute))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LookupSession(ctx, tok1, t0.Add(time.Minute)); !errors.Is(err, ErrNotFound) {
		t.Errorf("replaced session still valid: %v", err)
	}
	if err := s.Heartbeat(ctx, "n1", []string{"a", "b"}, "", "", t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	n, err := s.GetNode(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	want := Node{NodeID: "n1", BootID: "boot-1", Version: "0.6.0", ProtocolVersion: wire.ProtocolVersion, Capabilities: []string{"a", "b"},
		RegisteredAt: t0.Add(time.Minute), LeaseExpiresAt: t0.Add(2 * time.Minute), Mode: wire.NodeModeDraining, SessionExpiresAt: t0.Add(61 * time.Minute)}
	if d := cmp.Diff(want, n); d != "" {
		t.Errorf("node (-want +got):\n%s", d)
	}
	if err := s.Heartbeat(ctx, "nx", nil, "", "", t0); !errors.Is(err, ErrNotFound) {
		t.Errorf("heartbeat unknown: %v", err)
	}
	if err := s.SetNodeMode(ctx, ModeChange{NodeID: "n1", Mode: "bogus", Now: t0}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad mode: %v", err)
	}
	if err := s.SetNodeMode(ctx, ModeChange{NodeID: "nx", Mode: wire.NodeModeActive, Now: t0}); !errors.Is(err, ErrNotFound) {
		t.Errorf("mode of unknown: %v", err)
	}
	ev, _ := s.ListEvents(ctx, EventFilter{Kind: wire.EventNodeMaintenanceChanged}, Paging{1, 10})
	if ev.Total != 1 || ev.Items[0].Actor != "op" || ev.Items[0].CorrelationID != "c1" || ev.Items[0].Data["to"] != wire.NodeModeDraining {
		t.Errorf("mode events %+v", ev)
	}
	if au, _ := s.ListAudit(ctx, AuditFilter{ResourceID: "n1"}, Paging{1, 10}); au.Total != 1 {
		t.Errorf("mode audit %+v", au)
	}
	if onPostgres(t) {
		// The raw tokens are in no row of any table.
		tables := columns(t, s.rdb, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
		if len(tables) < 10 {
			t.Fatalf("tables %v", tables)
		}
		for _, table := range tables {
			for _, tok := range []string{tok1, tok2, "SECRET"} {
				if n := count(t, s, "SELECT COUNT(*) FROM "+table+" t WHERE CAST(t AS TEXT) LIKE ?", "%"+tok+"%"); n != 0 {
					t.Errorf("%d rows of %s hold the raw token %q", n, table, tok)
				}
			}
		}
		return
	}
	// The raw tokens are nowhere on disk (db, WAL, shm).
	_ = s.Close()
	files, _ := filepath.Glob(path + "*")
	if len(files) == 0 {
		t.Fatal("no database files")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range []string{tok1, tok2, "SECRET"} {
			if bytes.Contains(b, []byte(tok)) {
				t.Errorf("%s holds the raw token %q", filepath.Base(f), tok)
			}
		}
	}
}

func TestReports(t *testing.T) { backends(t, testReports) }

func testReports(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if _, err := s.ApplyReport(ctx, Report{NodeID: "n1", BootID: "b1", Seq: 1, Now: t0}); !errors.Is(err, ErrNotFound) {
		t.Errorf("report of unknown node: %v", err)
	}
	_ = s.RegisterNode(ctx, reg("n1", "tok", t0))
	obs := func(state string) []ObservedStream {
		return []ObservedStream{{StreamID: "s1", State: state, Generation: 3, ConfigVersion: "v2"}}
	}
	tests := []struct {
		boot      string
		seq       int64
		state     string
		wantStale bool
		wantBoot  bool
		wantState string
	}{
		{"b1", 5, "starting", false, false, "starting"},
		{"b1", 5, "failed", true, false, "starting"},  // same seq
		{"b1", 4, "failed", true, false, "starting"},  // older
		{"b1", 6, "running", false, false, "running"}, // newer
		{"b2", 1, "stopped", false, true, "stopped"},  // new boot, seq restarts
		{"b2", 1, "running", true, false, "stopped"},
	}
	for i, tc := range tests {
		res, err := s.ApplyReport(ctx, Report{NodeID: "n1", BootID: tc.boot, Seq: tc.seq, Streams: obs(tc.state), ConfigVersion: "v2",
			Metrics: map[string]float64{"streams_running": float64(i)}, Now: t0.Add(time.Duration(i) * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := s.ObservedStreams(ctx, "n1")
		if res.Stale != tc.wantStale || res.NewBoot != tc.wantBoot || len(got) != 1 || got[0].State != tc.wantState {
			t.Errorf("report %d (%s,%d): %+v, observed %+v; want stale %v new boot %v state %s", i, tc.boot, tc.seq, res, got, tc.wantStale, tc.wantBoot, tc.wantState)
		}
	}
	n, err := s.GetNode(ctx, "n1")
	if err != nil || n.Restarts != 1 || n.ConfigVersion != "v2" || n.Metrics["streams_running"] != 4 {
		t.Errorf("node after reports = %+v, %v; want 1 restart, config v2, metric 4", n, err)
	}
	evs, _ := s.ListEvents(ctx, EventFilter{Kind: wire.EventNodeRestarted}, Paging{Page: 1, PageSize: 10})
	if evs.Total != 1 {
		t.Errorf("node_restarted events = %d, want 1", evs.Total)
	}
	if _, err := s.ApplyReport(ctx, Report{NodeID: "n1", BootID: "b3", Seq: 1, Streams: make([]ObservedStream, MaxReportStreams+1)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("oversized report: %v", err)
	}
}
