package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// cw is a configuration write of a new version with content.
func cw(intent, node, content string, now time.Time) ConfigWrite {
	return ConfigWrite{IntentID: intent, NodeID: node, Format: "yaml", Content: content, Action: "configuration_apply",
		CorrelationID: "corr-" + intent, Actor: "op", Now: now, ExpiresAt: now.Add(time.Hour)}
}

func mustWriteConfig(t *testing.T, s *Store, w ConfigWrite) ConfigWriteResult {
	t.Helper()
	res, err := s.WriteConfig(context.Background(), w)
	if err != nil {
		t.Fatalf("WriteConfig %s: %v", w.IntentID, err)
	}
	return res
}

// TestWriteConfigVersions: a content has one version id fleet-wide: a
// new content takes the next number past every one used, the same content
// keeps its number on the same node and on another one; a write of an
// existing version makes none, also on a node that never had it; every
// write bumps the node's generation.
func TestWriteConfigVersions(t *testing.T) { backends(t, testWriteConfigVersions) }

func testWriteConfigVersions(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	steps := []struct {
		w           ConfigWrite
		gen         int64
		version     string
		newVersions int // the node's versions after the write
	}{
		{cw("a1", "n1", "streams: []\n", t0), 1, "v1", 1},
		{cw("a2", "n1", "streams: [a]\n", t0.Add(time.Second)), 2, "v2", 2},
		{cw("b1", "n2", "streams: [b]\n", t0.Add(2*time.Second)), 1, "v3", 1},
		{ConfigWrite{IntentID: "a3", NodeID: "n1", Version: "v1", Now: t0.Add(3 * time.Second)}, 3, "v1", 2},
		{cw("a4", "n1", "streams: []\n", t0.Add(4*time.Second)), 4, "v1", 2},
		{cw("b2", "n2", "streams: [a]\n", t0.Add(5*time.Second)), 2, "v2", 2},
		{ConfigWrite{IntentID: "b3", NodeID: "n2", Version: "v1", Now: t0.Add(6 * time.Second)}, 3, "v1", 3},
		{func() ConfigWrite {
			w := cw("a5", "n1", "streams: []\n", t0.Add(7*time.Second))
			w.Format = "json"
			return w
		}(), 5, "v4", 3},
	}
	for _, st := range steps {
		res := mustWriteConfig(t, s, st.w)
		if res.Generation != st.gen || res.Version != st.version || res.Txn == 0 {
			t.Errorf("%s: generation %d version %q txn %d; want %d %q", st.w.IntentID, res.Generation, res.Version, res.Txn,
				st.gen, st.version)
		}
		in := res.Intent
		if in.Operation != wire.CommandConfigApply || in.Kind != KindConfiguration || in.ResourceID != wire.ConfigResource ||
			in.ConfigVersion != st.version || in.DesiredState != wire.ConfigApplied || in.Generation != st.gen ||
			in.State != wire.OpPending || in.Payload != nil {
			t.Errorf("%s: intent %+v", st.w.IntentID, in)
		}
		r, err := s.GetResource(ctx, st.w.NodeID, KindConfiguration, wire.ConfigResource)
		if err != nil || r.Generation != st.gen || r.ConfigVersion != st.version || r.State != wire.ConfigApplied {
			t.Errorf("%s: resource %+v, %v", st.w.IntentID, r, err)
		}
		page, err := s.ConfigVersions(ctx, st.w.NodeID, Paging{Page: 1, PageSize: 100})
		if err != nil || page.Total != st.newVersions || len(page.Items) != st.newVersions {
			t.Errorf("%s: versions %+v, %v", st.w.IntentID, page, err)
		}
	}
	v, err := s.GetConfigVersion(ctx, "n1", "v2")
	if err != nil || v.Content != "streams: [a]\n" || v.Format != "yaml" || v.Source != wire.ConfigSourceAPI ||
		v.Actor != "op" || v.CorrelationID != "corr-a2" || !v.CreatedAt.Equal(t0.Add(time.Second)) ||
		v.SHA256 != sha256Hex("streams: [a]\n") {
		t.Errorf("n1 v2 = %+v, %v", v, err)
	}
	// The same version on n2 has the same text, kept with n2's write.
	if w, err := s.GetConfigVersion(ctx, "n2", "v2"); err != nil || w.Content != v.Content || w.SHA256 != v.SHA256 ||
		w.CorrelationID != "corr-b2" || w.NodeID != "n2" {
		t.Errorf("n2 v2 = %+v, %v", w, err)
	}
	if w, err := s.GetConfigVersion(ctx, "n2", "v1"); err != nil || w.Content != "streams: []\n" || w.Format != "yaml" {
		t.Errorf("n2 v1 (applied by id from n1) = %+v, %v", w, err)
	}
	// Newest first, paged.
	page, err := s.ConfigVersions(ctx, "n1", Paging{Page: 1, PageSize: 2})
	if err != nil || page.Total != 3 || len(page.Items) != 2 || page.Items[0].Version != "v4" || page.Items[1].Version != "v2" {
		t.Errorf("page 1 = %+v, %v", page, err)
	}
	page, err = s.ConfigVersions(ctx, "n1", Paging{Page: 2, PageSize: 2})
	if err != nil || len(page.Items) != 1 || page.Items[0].Version != "v1" {
		t.Errorf("page 2 = %+v, %v", page, err)
	}
	if page, err := s.ConfigVersions(ctx, "nx", Paging{Page: 1, PageSize: 10}); err != nil || page.Total != 0 || page.Items == nil {
		t.Errorf("unknown node's versions = %+v, %v", page, err)
	}
	if _, err := s.ConfigVersions(ctx, "n1", Paging{Page: 0, PageSize: 10}); !errors.Is(err, ErrInvalid) {
		t.Errorf("page 0: %v", err)
	}
	// Same text in another format, another content: same digest, another version.
	v1, _ := s.GetConfigVersion(ctx, "n1", "v1")
	v4, _ := s.GetConfigVersion(ctx, "n1", "v4")
	if v1.SHA256 != v4.SHA256 || v1.SHA256 == v.SHA256 || v4.Format != "json" {
		t.Errorf("digests v1 %s v2 %s v4 %s (%s)", v1.SHA256, v.SHA256, v4.SHA256, v4.Format)
	}
	// An id no node has is not found, on any node.
	if _, err := s.WriteConfig(ctx, ConfigWrite{IntentID: "c1", NodeID: "n3", Version: "v9", Now: t0}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown version: %v", err)
	}
	// The audit row names the action and the version, never the content.
	audit, err := s.ListAudit(ctx, AuditFilter{NodeID: "n1"}, Paging{Page: 1, PageSize: 10})
	if err != nil || len(audit.Items) != 5 || audit.Items[0].Action != "configuration_apply" ||
		audit.Items[0].ResourceType != KindConfiguration || audit.Items[0].Message != "v4" {
		t.Errorf("audit = %+v, %v", audit.Items, err)
	}
}

// TestConfigVersionsPastLegacy: versions written before the fleet-wide
// numbering keep their per-node numbers, and a new content is numbered
// past all of them, so that no node holds two texts under one id.
func TestConfigVersionsPastLegacy(t *testing.T) { backends(t, testConfigVersionsPastLegacy) }

func testConfigVersionsPastLegacy(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	// As 0007 numbered them: v1..v3 of n1, v1 of n2, no config_contents row.
	err := s.write(ctx, func(ctx context.Context, q querier) error {
		for _, r := range []struct {
			node string
			seq  int
			text string
		}{{"n1", 1, "a: 1\n"}, {"n1", 2, "a: 2\n"}, {"n1", 3, "a: 3\n"}, {"n2", 1, "b: 1\n"}} {
			if _, err := q.ExecContext(ctx, `INSERT INTO config_versions (node_id, seq, format, content, sha256, source,
				created_at) VALUES (?,?,?,?,?,?,?)`, r.node, r.seq, "yaml", r.text, sha256Hex(r.text), wire.ConfigSourceAPI, ms(t0)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res := mustWriteConfig(t, s, cw("x1", "n2", "a: 1\n", t0)); res.Version != "v4" {
		t.Errorf("a legacy content on another node: %s, want v4", res.Version)
	}
	if res := mustWriteConfig(t, s, cw("x2", "n1", "a: 1\n", t0)); res.Version != "v4" {
		t.Errorf("the same content on its legacy node: %s, want v4 (fleet-wide from now on)", res.Version)
	}
	// n2's legacy v1 is its own: not offered to other nodes.
	if _, err := s.WriteConfig(ctx, ConfigWrite{IntentID: "x3", NodeID: "n3", Version: "v1", Now: t0}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a legacy per-node version on another node: %v", err)
	}
	if v, err := s.GetConfigVersion(ctx, "n2", "v1"); err != nil || v.Content != "b: 1\n" {
		t.Errorf("n2 v1 = %+v, %v", v, err)
	}
}

// TestWriteConfigRefused: conflicts, unknown versions and malformed writes
// change nothing.
func TestWriteConfigRefused(t *testing.T) { backends(t, testWriteConfigRefused) }

func testWriteConfigRefused(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustWriteConfig(t, s, cw("a1", "n1", "streams: []\n", t0))
	tests := []struct {
		name string
		w    ConfigWrite
		want error
	}{
		{"if-match stale", func() ConfigWrite { w := cw("x", "n1", "a: 1\n", t0); w.IfMatch = p(0); return w }(), ErrGenerationConflict},
		{"if-match new node", func() ConfigWrite { w := cw("x", "n2", "a: 1\n", t0); w.IfMatch = p(1); return w }(), ErrGenerationConflict},
		{"version absent", ConfigWrite{IntentID: "x", NodeID: "n1", Version: "v2", Now: t0}, ErrNotFound},
		{"version no node has", ConfigWrite{IntentID: "x", NodeID: "n2", Version: "v3", Now: t0}, ErrNotFound},
		{"version malformed", ConfigWrite{IntentID: "x", NodeID: "n1", Version: "v01", Now: t0}, ErrNotFound},
		{"version not an id", ConfigWrite{IntentID: "x", NodeID: "n1", Version: "1", Now: t0}, ErrNotFound},
		{"nothing to apply", ConfigWrite{IntentID: "x", NodeID: "n1", Now: t0}, ErrInvalid},
		{"two things to apply", ConfigWrite{IntentID: "x", NodeID: "n1", Version: "v1", NodeVersion: "v3", Now: t0}, ErrInvalid},
		{"content without format", ConfigWrite{IntentID: "x", NodeID: "n1", Content: "a: 1\n", Now: t0}, ErrInvalid},
		{"bad source", func() ConfigWrite { w := cw("x", "n1", "a: 1\n", t0); w.Source = "cli"; return w }(), ErrInvalid},
		{"no intent id", ConfigWrite{NodeID: "n1", Version: "v1", Now: t0}, ErrInvalid},
		{"no time", ConfigWrite{IntentID: "x", NodeID: "n1", Version: "v1"}, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.WriteConfig(ctx, tt.w); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
	var gc *GenerationConflictError
	w := cw("x", "n1", "a: 1\n", t0)
	w.IfMatch = p(7)
	if _, err := s.WriteConfig(ctx, w); !errors.As(err, &gc) || gc.Current != 1 || gc.Expected != 7 {
		t.Errorf("conflict = %v", err)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM config_versions"); n != 1 {
		t.Errorf("versions after refused writes = %d, want 1", n)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM intents"); n != 1 {
		t.Errorf("intents after refused writes = %d, want 1", n)
	}
	if r, _ := s.GetResource(ctx, "n1", KindConfiguration, wire.ConfigResource); r.Generation != 1 {
		t.Errorf("generation after refused writes = %d", r.Generation)
	}
	w = cw("ok", "n1", "a: 1\n", t0)
	w.IfMatch = p(1)
	if res := mustWriteConfig(t, s, w); res.Generation != 2 || res.Version != "v2" {
		t.Errorf("write at the current generation = %+v", res)
	}
}

// TestWriteConfigSupersedes: a new apply supersedes the node's pending
// apply (taken out of the outbox), not another node's, and not a
// dispatched one.
func TestWriteConfigSupersedes(t *testing.T) { backends(t, testWriteConfigSupersedes) }

func testWriteConfigSupersedes(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustWriteConfig(t, s, cw("a1", "n1", "a: 1\n", t0))
	mustWriteConfig(t, s, cw("b1", "n2", "b: 1\n", t0))
	mustWriteConfig(t, s, cw("a2", "n1", "a: 2\n", t0.Add(time.Second)))
	if err := s.StartAttempt(ctx, AttemptStart{IntentID: "a2", AttemptID: "at2", Now: t0.Add(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	mustWriteConfig(t, s, cw("a3", "n1", "a: 3\n", t0.Add(3*time.Second)))
	for id, want := range map[string]string{"a1": wire.OpSuperseded, "a2": wire.OpDispatched, "a3": wire.OpPending, "b1": wire.OpPending} {
		if in, err := s.GetIntent(ctx, id); err != nil || in.State != want {
			t.Errorf("%s = %q, %v; want %s", id, in.State, err, want)
		}
	}
	out, err := s.PendingOutbox(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, o := range out {
		ids = append(ids, o.IntentID)
	}
	if strings.Join(ids, ",") != "b1,a3" {
		t.Errorf("outbox %v, want b1,a3", ids)
	}
}

// TestWriteConfigNodeVersion: a rollback to a node-local version desires
// no Hub version and carries the node's id in the payload.
func TestWriteConfigNodeVersion(t *testing.T) { backends(t, testWriteConfigNodeVersion) }

func testWriteConfigNodeVersion(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustWriteConfig(t, s, cw("a1", "n1", "a: 1\n", t0))
	res := mustWriteConfig(t, s, ConfigWrite{IntentID: "rb", NodeID: "n1", NodeVersion: "v7", Action: "configuration_rollback",
		Now: t0.Add(time.Second)})
	if res.Version != "" || res.Generation != 2 || string(res.Intent.Payload) != `{"node_version":"v7"}` {
		t.Errorf("result = %+v payload %s", res, res.Intent.Payload)
	}
	in, err := s.GetIntent(ctx, "rb")
	if err != nil || string(in.Payload) != `{"node_version":"v7"}` || in.ConfigVersion != "" {
		t.Errorf("intent = %+v, %v", in, err)
	}
	out, err := s.PendingOutbox(ctx, 10)
	if err != nil || len(out) != 1 || string(out[0].Payload) != `{"node_version":"v7"}` || out[0].ConfigVersion != "" {
		t.Errorf("outbox = %+v, %v", out, err)
	}
	r, _ := s.GetResource(ctx, "n1", KindConfiguration, wire.ConfigResource)
	if r.ConfigVersion != "" || r.Generation != 2 {
		t.Errorf("resource = %+v", r)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM config_versions"); n != 1 {
		t.Errorf("versions = %d, want 1", n)
	}
	evs, _ := s.ListEvents(ctx, EventFilter{OperationID: "rb"}, Paging{Page: 1, PageSize: 10})
	if len(evs.Items) != 1 || evs.Items[0].Kind != wire.EventIntentAccepted || evs.Items[0].Data["node_version"] != "v7" {
		t.Errorf("events = %+v", evs.Items)
	}
}

// TestWriteConfigStoresContentAsGiven: the content is stored verbatim,
// secret references kept, in config_versions only; a resolved value the
// Hub's environment holds is nowhere in the database files.
func TestWriteConfigStoresContentAsGiven(t *testing.T) {
	backends(t, testWriteConfigStoresContentAsGiven)
}

func testWriteConfigStoresContentAsGiven(t *testing.T) {
	ctx := context.Background()
	const value = "hunter2-resolved-value"
	t.Setenv("SVC_SECRET_DB_PASSWORD", value)
	s, path := openTest(t)
	content := "streams:\n  - id: s1\n    sink:\n      password: ${secret:DB_PASSWORD}\n      token: ${env:TOKEN}\n"
	mustWriteConfig(t, s, cw("a1", "n1", content, t0))
	v, err := s.GetConfigVersion(ctx, "n1", "v1")
	if err != nil || v.Content != content {
		t.Fatalf("stored %q, %v; want %q", v.Content, err, content)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM intents WHERE payload <> ''"); n != 0 {
		t.Errorf("%d intents carry a payload", n)
	}
	for _, q := range []string{
		"SELECT COUNT(*) FROM events WHERE data LIKE '%secret%' OR message LIKE '%secret%'",
		"SELECT COUNT(*) FROM audit WHERE message LIKE '%secret%'",
		"SELECT COUNT(*) FROM intents WHERE payload LIKE '%secret%' OR result LIKE '%secret%'",
	} {
		if n := count(t, s, q); n != 0 {
			t.Errorf("%s = %d", q, n)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(path + "*")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(value)) {
			t.Errorf("%s holds the resolved secret", f)
		}
	}
}

// TestWriteConfigCommand: validate and diff are intents of their own kind:
// no resources row, nothing superseded, never the configuration's latest.
func TestWriteConfigCommand(t *testing.T) { backends(t, testWriteConfigCommand) }

func testWriteConfigCommand(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustWriteConfig(t, s, cw("a1", "n1", "a: 1\n", t0))
	payload := []byte(`{"format":"yaml","content":"a: 2\n"}`)
	in, err := s.WriteConfigCommand(ctx, ConfigCommandWrite{IntentID: "val", Operation: wire.CommandConfigValidate, NodeID: "n1",
		Payload: payload, Action: "configuration_validate", Actor: "op", Now: t0.Add(time.Second)})
	if err != nil || in.Kind != KindConfigCommand || in.ResourceID != wire.ConfigResource || in.State != wire.OpPending ||
		string(in.Payload) != string(payload) || in.Generation != 0 {
		t.Fatalf("command = %+v, %v", in, err)
	}
	if _, err := s.WriteConfigCommand(ctx, ConfigCommandWrite{IntentID: "diff", Operation: wire.CommandConfigDiff, NodeID: "n2",
		Payload: []byte(`{}`), Now: t0}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []ConfigCommandWrite{
		{IntentID: "x", Operation: wire.CommandConfigApply, NodeID: "n1", Now: t0},
		{IntentID: "x", Operation: wire.CommandConfigValidate, NodeID: "n1", Payload: []byte("{"), Now: t0},
		{IntentID: "x", Operation: wire.CommandConfigValidate, Now: t0},
	} {
		if _, err := s.WriteConfigCommand(ctx, tt); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", tt, err)
		}
	}
	if a1, _ := s.GetIntent(ctx, "a1"); a1.State != wire.OpPending {
		t.Errorf("apply superseded by a command: %s", a1.State)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM resources"); n != 1 {
		t.Errorf("resources = %d, want 1", n)
	}
	ncs, err := s.NodeConfigs(ctx, []string{"n1"})
	if err != nil || ncs["n1"].Latest == nil || ncs["n1"].Latest.ID != "a1" {
		t.Errorf("node configs = %+v, %v", ncs, err)
	}
	rs, err := s.ResourceStates(ctx, "")
	if err != nil || len(rs) != 1 || rs[0].Latest == nil || rs[0].Latest.ID != "a1" {
		t.Errorf("resource states = %+v, %v", rs, err)
	}
	out, _ := s.PendingOutbox(ctx, 10)
	if len(out) != 3 || out[1].Kind != KindConfigCommand || string(out[1].Payload) != string(payload) {
		t.Errorf("outbox = %+v", out)
	}
	audit, _ := s.ListAudit(ctx, AuditFilter{Action: "configuration_validate"}, Paging{Page: 1, PageSize: 10})
	if len(audit.Items) != 1 || audit.Items[0].ResourceType != KindConfiguration {
		t.Errorf("audit = %+v", audit.Items)
	}
}

// TestNodeConfigs: desired, latest and reported configuration per node,
// with and without reports; a report without configuration keeps the
// stored one.
func TestNodeConfigs(t *testing.T) { backends(t, testNodeConfigs) }

func testNodeConfigs(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	for _, n := range []string{"n1", "n2"} {
		if err := s.RegisterNode(ctx, reg(n, "tok-"+n, t0)); err != nil {
			t.Fatal(err)
		}
	}
	mustWriteConfig(t, s, cw("a1", "n1", "a: 1\n", t0))
	mustWriteConfig(t, s, cw("c1", "n3", "c: 1\n", t0)) // never registered
	rc := &wire.ReportConfiguration{NodeVersion: "v4", HubVersion: "v1", Generation: 1}
	at := t0.Add(time.Second)
	if _, err := s.ApplyReport(ctx, Report{NodeID: "n1", BootID: "b", Seq: 1, Configuration: rc, Now: at}); err != nil {
		t.Fatal(err)
	}
	// n2 reports without configuration (an earlier Agent).
	if _, err := s.ApplyReport(ctx, Report{NodeID: "n2", BootID: "b", Seq: 1, Now: at}); err != nil {
		t.Fatal(err)
	}
	all, err := s.NodeConfigs(ctx, nil)
	if err != nil || len(all) != 3 {
		t.Fatalf("all = %+v, %v", all, err)
	}
	want := ObservedConfig{ReportConfiguration: *rc, ReportedAt: at}
	n1 := all["n1"]
	if n1.NodeID != "n1" || n1.Desired == nil || n1.Desired.Generation != 1 || n1.Desired.ConfigVersion != "v1" ||
		n1.Latest == nil || n1.Latest.ID != "a1" || n1.Observed == nil || *n1.Observed != want {
		t.Errorf("n1 = %+v", n1)
	}
	if n2 := all["n2"]; n2.NodeID != "n2" || n2.Desired != nil || n2.Latest != nil || n2.Observed != nil {
		t.Errorf("n2 = %+v", n2)
	}
	if n3 := all["n3"]; n3.Desired == nil || n3.Latest == nil || n3.Latest.ID != "c1" || n3.Observed != nil {
		t.Errorf("n3 = %+v", n3)
	}
	some, err := s.NodeConfigs(ctx, []string{"n2", "n3", "nx"})
	if err != nil || len(some) != 2 || some["n3"].Latest == nil {
		t.Errorf("some = %+v, %v", some, err)
	}
	if none, err := s.NodeConfigs(ctx, []string{}); err != nil || len(none) != 0 {
		t.Errorf("none = %+v, %v", none, err)
	}
	// A later report without configuration leaves it; one with replaces it.
	if _, err := s.ApplyReport(ctx, Report{NodeID: "n1", BootID: "b", Seq: 2, Now: at.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.GetNode(ctx, "n1"); n.Config == nil || *n.Config != want {
		t.Errorf("node config after a report without one = %+v", n.Config)
	}
	local := &wire.ReportConfiguration{NodeVersion: "v5"}
	if _, err := s.ApplyReport(ctx, Report{NodeID: "n1", BootID: "b", Seq: 3, Configuration: local, Now: at.Add(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	n, _ := s.GetNode(ctx, "n1")
	if n.Config == nil || n.Config.NodeVersion != "v5" || n.Config.HubVersion != "" || n.Config.Generation != 0 ||
		!n.Config.ReportedAt.Equal(at.Add(2*time.Second)) {
		t.Errorf("node config = %+v", n.Config)
	}
	if n, _ := s.GetNode(ctx, "n2"); n.Config != nil {
		t.Errorf("n2 config = %+v", n.Config)
	}
	// A stale report changes nothing.
	if res, _ := s.ApplyReport(ctx, Report{NodeID: "n1", BootID: "b", Seq: 1, Configuration: rc, Now: at.Add(3 * time.Second)}); !res.Stale {
		t.Errorf("stale report applied")
	}
	if n, _ := s.GetNode(ctx, "n1"); n.Config.NodeVersion != "v5" {
		t.Errorf("stale report changed the configuration: %+v", n.Config)
	}
	// The resource views carry the observation too.
	rs, err := s.ResourceStates(ctx, "n1")
	if err != nil || len(rs) != 1 || rs[0].ObservedConfig == nil || rs[0].ObservedConfig.NodeVersion != "v5" ||
		rs[0].Observed != nil || rs[0].ObservedJob != nil {
		t.Errorf("resource states = %+v, %v", rs, err)
	}
	one, err := s.GetResourceState(ctx, "n1", KindConfiguration, wire.ConfigResource)
	if err != nil || one.ObservedConfig == nil || one.ObservedConfig.NodeVersion != "v5" || one.Latest == nil {
		t.Errorf("resource state = %+v, %v", one, err)
	}
	if rs, _ := s.ResourceStates(ctx, "n3"); len(rs) != 1 || rs[0].ObservedConfig != nil {
		t.Errorf("unregistered node's state = %+v", rs)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil || len(snap.Resources) != 2 || len(snap.Nodes) != 2 || snap.Nodes[0].Config == nil {
		t.Errorf("snapshot = %+v, %v", snap, err)
	}
}

// TestSweepKeepsConfiguration: retention reclaims terminal configuration
// intents as any other, and never a version or a rollout.
func TestSweepKeepsConfiguration(t *testing.T) { backends(t, testSweepKeepsConfiguration) }

func testSweepKeepsConfiguration(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustWriteConfig(t, s, cw("a1", "n1", "a: 1\n", t0))
	mustWriteConfig(t, s, cw("a2", "n1", "a: 2\n", t0))
	if _, err := s.WriteConfigCommand(ctx, ConfigCommandWrite{IntentID: "val", Operation: wire.CommandConfigValidate, NodeID: "n1",
		Now: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CancelIntent(ctx, Cancellation{IntentID: "val", Now: t0}); err != nil {
		t.Fatal(err)
	}
	r := testRollout("r1", t0, "n1")
	r.State, r.FinishedAt = wire.RolloutSucceeded, t0
	if err := s.CreateRollout(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := s.Sweep(ctx, t0.Add(40*24*time.Hour))
	if err != nil || got.Intents != 2 {
		t.Fatalf("sweep = %+v, %v; want 2 intents", got, err)
	}
	for q, want := range map[string]int{
		"SELECT COUNT(*) FROM config_versions": 2,
		"SELECT COUNT(*) FROM rollouts":        1,
		"SELECT COUNT(*) FROM rollout_nodes":   1,
		"SELECT COUNT(*) FROM intents":         1, // a2, pending
	} {
		if n := count(t, s, q); n != want {
			t.Errorf("%s = %d, want %d", q, n, want)
		}
	}
}
