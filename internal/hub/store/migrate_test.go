package store

import (
	"context"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/wire"
)

// TestMigratePendingIndex builds a database at schema version 2, as the
// builds before migration 3 left it, with a pending and a finished intent
// of one resource, and opens it with this build: the pending-only index
// replaces intents_resource, the next write supersedes the pending intent
// through it, and the finished one keeps its state.
func TestMigratePendingIndex(t *testing.T) {
	ctx := context.Background()
	s := openFromVersion(t, 2,
		`INSERT INTO resources (node_id, resource_kind, resource_id, state, generation, updated_at) VALUES ('n1', 'stream', 's1', 'running', 2, 1000)`,
		`INSERT INTO intents (id, operation, node_id, resource_kind, resource_id, generation, desired_state, state, created_at, updated_at)
			VALUES ('old', 'stream_desired_state', 'n1', 'stream', 's1', 1, 'stopped', 'succeeded', 900, 950),
			       ('cur', 'stream_desired_state', 'n1', 'stream', 's1', 2, 'running', 'pending', 1000, 1000)`,
		`INSERT INTO outbox (intent_id, node_id, created_at) VALUES ('cur', 'n1', 1000)`,
	)
	if n := count(t, s, "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'index' AND name = 'intents_resource'"); n != 0 {
		t.Errorf("intents_resource still there")
	}
	if n := count(t, s, "SELECT COUNT(*) FROM intents WHERE node_id = 'n1' AND resource_kind = 'stream' AND resource_id = 's1' AND state = 'pending'"); n != 1 {
		t.Errorf("pending intents of the resource after migration = %d, want 1", n)
	}
	res, err := s.WriteDesired(ctx, dw("new", "n1", "s1", t0))
	if err != nil || res.Generation != 3 || res.Superseded != 1 {
		t.Fatalf("write after migration = %+v, %v; want generation 3 superseding 1", res, err)
	}
	for id, want := range map[string]string{"old": wire.OpSucceeded, "cur": wire.OpSuperseded, "new": wire.OpPending} {
		if in, err := s.GetIntent(ctx, id); err != nil || in.State != want {
			t.Errorf("intent %s = %q, %v; want %s", id, in.State, err, want)
		}
	}
	if n := count(t, s, "SELECT COUNT(*) FROM outbox WHERE intent_id = 'cur' AND processed_at IS NULL"); n != 0 {
		t.Errorf("superseded intent still in the outbox")
	}
}

// TestSupersedeUsesPendingIndex checks that a write looks up the pending
// intents it supersedes in the pending-only index, not in an index of every
// intent's state.
func TestSupersedeUsesPendingIndex(t *testing.T) {
	s, _ := openTest(t)
	rows, err := s.rdb.Query(`EXPLAIN QUERY PLAN SELECT seq, id FROM intents WHERE node_id = 'n1' AND resource_kind = 'stream'
		AND resource_id = 's1' AND state = 'pending'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if got := strings.Join(plan, "; "); !strings.Contains(got, "intents_pending") {
		t.Errorf("plan %q does not use intents_pending", got)
	}
}

// TestMigrateJobs builds a database at schema version 4 with a node, a
// stream's desired state and its intents, and opens it with this build:
// the rows stay, the intents carry an empty payload, and jobs can be
// written and observed at once.
func TestMigrateJobs(t *testing.T) {
	ctx := context.Background()
	s := openFromVersion(t, 4,
		`INSERT INTO nodes (node_id, boot_id, registered_at, report_boot_id, report_seq) VALUES ('n1', 'b1', 1000, 'b1', 7)`,
		`INSERT INTO resources (node_id, resource_kind, resource_id, state, config_version, generation, updated_at)
			VALUES ('n1', 'stream', 's1', 'running', 'v3', 2, 1000)`,
		`INSERT INTO intents (id, operation, node_id, resource_kind, resource_id, generation, desired_state, state, created_at, updated_at)
			VALUES ('old', 'stream_desired_state', 'n1', 'stream', 's1', 1, 'stopped', 'succeeded', 900, 950),
			       ('cur', 'stream_desired_state', 'n1', 'stream', 's1', 2, 'running', 'pending', 1000, 1000)`,
		`INSERT INTO outbox (intent_id, node_id, created_at) VALUES ('cur', 'n1', 1000)`,
	)
	if n := count(t, s, "SELECT COUNT(*) FROM intents WHERE payload = ''"); n != 2 {
		t.Errorf("intents with an empty payload = %d, want 2", n)
	}
	for id, want := range map[string]string{"old": wire.OpSucceeded, "cur": wire.OpPending} {
		if in, err := s.GetIntent(ctx, id); err != nil || in.State != want || in.Payload != nil {
			t.Errorf("intent %s = %+v, %v; want %s without a payload", id, in, err, want)
		}
	}
	if out, err := s.OutboxFor(ctx, []string{"n1"}, t0, 10); err != nil || len(out) != 1 || out[0].IntentID != "cur" || out[0].Payload != nil {
		t.Errorf("outbox = %+v, %v", out, err)
	}
	if n, err := s.GetNode(ctx, "n1"); err != nil || n.ReportSeq != 7 {
		t.Errorf("node = %+v, %v", n, err)
	}
	mustWriteJob(t, s, jobNew("j1", "n1", t0))
	if res, err := s.ApplyJobReport(ctx, JobReport{NodeID: "n1", BootID: "b1", Seq: 1, Jobs: []ObservedJob{obs("j1", wire.JobRunning, 1)},
		Now: t0}); err != nil || res.Stale {
		t.Errorf("first job observations after migration = %+v, %v", res, err)
	}
	rs, err := s.ResourceStates(ctx, "n1")
	if err != nil || len(rs) != 2 || rs[0].ObservedJob == nil || rs[1].Latest == nil || rs[1].Latest.ID != "cur" {
		t.Errorf("resource states = %+v, %v", rs, err)
	}
}
