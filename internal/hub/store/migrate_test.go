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

// TestMigrateConfiguration builds a database at schema version 6 with rows
// of every kind (nodes, stream and job resources, their intents, job and
// job-command intents, outbox, observations, a split job) and opens it
// with this build: the resources table is rebuilt with the wider kind
// CHECK (still WITHOUT ROWID, still refusing unknown kinds), every row
// stays, nodes have no reported configuration, and configurations can be
// written and read beside the old resources.
func TestMigrateConfiguration(t *testing.T) {
	ctx := context.Background()
	s := openFromVersion(t, 6,
		`INSERT INTO nodes (node_id, boot_id, registered_at, report_boot_id, report_seq, config_version) VALUES
			('n1', 'b1', 1000, 'b1', 7, 'v4'), ('n2', 'b2', 1000, '', 0, '')`,
		`INSERT INTO resources (node_id, resource_kind, resource_id, state, config_version, generation, action_id, updated_at) VALUES
			('n1', 'stream', 's1', 'running', 'v3', 2, 'act', 1000),
			('n1', 'job', 'j1', 'running', '1', 3, '', 1100),
			('n2', 'job', 'j1', 'stopped', '1', 3, '', 1100)`,
		`INSERT INTO intents (id, operation, node_id, resource_kind, resource_id, generation, desired_state, config_version, state,
			created_at, updated_at, payload) VALUES
			('s-old', 'stream_desired_state', 'n1', 'stream', 's1', 1, 'stopped', 'v3', 'succeeded', 900, 950, ''),
			('s-cur', 'stream_desired_state', 'n1', 'stream', 's1', 2, 'running', 'v3', 'pending', 1000, 1000, ''),
			('j-cur', 'job_start', 'n1', 'job', 'j1', 3, 'running', '1', 'succeeded', 1100, 1100, '{"state":"running","job_version":1}'),
			('j-fence', 'job_stop', 'n2', 'job', 'j1', 3, 'stopped', '1', 'pending', 1100, 1100, '{"state":"stopped","job_version":1}'),
			('j-cp', 'job_checkpoint', 'n1', 'job_command', 'j1', 3, '', '', 'pending', 1200, 1200, '{}')`,
		`INSERT INTO outbox (intent_id, node_id, created_at) VALUES ('s-cur', 'n1', 1000), ('j-fence', 'n2', 1100), ('j-cp', 'n1', 1200)`,
		`INSERT INTO observed_streams (node_id, stream_id, state, generation, config_version, updated_at)
			VALUES ('n1', 's1', 'running', 2, 'v3', 1000)`,
		`INSERT INTO jobs (job_id, node_id, strategy, requested, version, generation, desired_state, created_at, updated_at)
			VALUES ('j1', 'n1', 'requested', '["n1"]', 1, 3, 'running', 1000, 1100)`,
		`INSERT INTO job_versions (job_id, version, spec, plan, created_at) VALUES ('j1', 1, '{"id":"j1"}', '{}', 1000)`,
		`INSERT INTO observed_jobs (node_id, job_id, state, generation, version, updated_at) VALUES ('n1', 'j1', 'running', 3, 1, 1100)`,
	)
	var ddl string
	if err := s.rdb.QueryRow("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'resources'").Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ddl, "'configuration'") || !strings.Contains(ddl, "WITHOUT ROWID") || !strings.Contains(ddl, `CREATE TABLE "resources"`) {
		t.Errorf("resources after migration: %s", ddl)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'resources_new'"); n != 0 {
		t.Errorf("resources_new left")
	}
	err := s.write(ctx, func(ctx context.Context, q querier) error {
		_, err := q.ExecContext(ctx, `INSERT INTO resources (node_id, resource_kind, resource_id, state, generation, updated_at)
			VALUES ('n1', 'bogus', 'x', 'running', 1, 1)`)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "CHECK") {
		t.Errorf("unknown kind inserted: %v", err)
	}
	r, err := s.GetResource(ctx, "n1", KindStream, "s1")
	if err != nil || r.State != "running" || r.ConfigVersion != "v3" || r.Generation != 2 || r.ActionID != "act" || !r.UpdatedAt.Equal(tm(1000)) {
		t.Errorf("stream resource = %+v, %v", r, err)
	}
	for _, n := range []string{"n1", "n2"} {
		if node, err := s.GetNode(ctx, n); err != nil || node.Config != nil {
			t.Errorf("node %s = %+v, %v", n, node, err)
		}
	}
	// The old resources keep working beside the configuration.
	res, err := s.WriteDesired(ctx, dw("s-new", "n1", "s1", t0))
	if err != nil || res.Generation != 3 || res.Superseded != 1 {
		t.Errorf("stream write after migration = %+v, %v", res, err)
	}
	mustWriteConfig(t, s, cw("c1", "n1", "streams: []\n", t0))
	if _, err := s.ApplyReport(ctx, Report{NodeID: "n1", BootID: "b1", Seq: 8, ConfigVersion: "v5",
		Streams:       []ObservedStream{{StreamID: "s1", State: "running", Generation: 2, ConfigVersion: "v3"}},
		Configuration: &wire.ReportConfiguration{NodeVersion: "v5", HubVersion: "v1", Generation: 1}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	rs, err := s.ResourceStates(ctx, "")
	if err != nil || len(rs) != 4 {
		t.Fatalf("resource states = %+v, %v", rs, err)
	}
	kinds := map[string]ResourceState{}
	for _, r := range rs {
		kinds[r.NodeID+"/"+r.Kind] = r
	}
	if c := kinds["n1/configuration"]; c.ObservedConfig == nil || c.ObservedConfig.HubVersion != "v1" || c.Latest == nil || c.Latest.ID != "c1" {
		t.Errorf("configuration state = %+v", c)
	}
	if st := kinds["n1/stream"]; st.Observed == nil || st.Latest == nil || st.Latest.ID != "s-new" || st.ObservedConfig != nil {
		t.Errorf("stream state = %+v", st)
	}
	if j := kinds["n1/job"]; j.ObservedJob == nil || j.Latest == nil || j.Latest.ID != "j-cur" || j.ObservedConfig != nil {
		t.Errorf("job state = %+v", j)
	}
	if j := kinds["n2/job"]; j.Latest == nil || j.Latest.ID != "j-fence" {
		t.Errorf("fence state = %+v", j)
	}
	out, err := s.PendingOutbox(ctx, 10)
	if err != nil || len(out) != 4 || out[0].IntentID != "j-fence" || out[1].IntentID != "j-cp" || out[2].IntentID != "s-new" ||
		out[3].IntentID != "c1" {
		t.Errorf("outbox = %+v, %v", out, err)
	}
	if js, err := s.GetJobState(ctx, "j1"); err != nil || js.Latest == nil || js.Latest.ID != "j-cur" {
		t.Errorf("job state = %+v, %v", js, err)
	}
}

// TestMigrateActorKind builds a database at schema version 9, before
// actor kinds were kept, with an actor on an intent, an event, an audit
// row, a configuration version and a rollout, and opens it with this
// build: every row reads with its actor and an empty kind, and new rows
// keep their kind beside the old ones.
func TestMigrateActorKind(t *testing.T) {
	ctx := context.Background()
	s := openFromVersion(t, 9,
		`INSERT INTO intents (id, operation, node_id, resource_kind, resource_id, generation, desired_state, actor, state,
			created_at, updated_at) VALUES ('old', 'stream_desired_state', 'n1', 'stream', 's1', 1, 'running', 'alice', 'succeeded', 900, 950)`,
		`INSERT INTO events (kind, occurred_at, node_id, resource_id, actor) VALUES ('intent_accepted', 900, 'n1', 's1', 'alice')`,
		`INSERT INTO audit (occurred_at, actor, action, resource_type, resource_id, node_id, outcome)
			VALUES (900, 'alice', 'stream_desired_state', 'stream', 's1', 'n1', 'accepted')`,
		`INSERT INTO config_versions (node_id, seq, format, content, sha256, source, actor, created_at)
			VALUES ('n1', 1, 'yaml', 'streams: []', 'x', 'api', 'alice', 900)`,
		`INSERT INTO rollouts (rollout_id, revision, state, actor, created_at, updated_at) VALUES ('r1', 1, 'succeeded', 'alice', 900, 950)`,
	)
	type who struct{ Actor, Kind string }
	old := who{"alice", ""}
	in, err := s.GetIntent(ctx, "old")
	if err != nil || (who{in.Actor, in.ActorKind}) != old {
		t.Errorf("old intent = %+v, %v", in, err)
	}
	evs, err := s.ListEvents(ctx, EventFilter{}, Paging{Page: 1, PageSize: 10})
	if err != nil || len(evs.Items) != 1 || (who{evs.Items[0].Actor, evs.Items[0].ActorKind}) != old {
		t.Errorf("old events = %+v, %v", evs, err)
	}
	au, err := s.ListAudit(ctx, AuditFilter{}, Paging{Page: 1, PageSize: 10})
	if err != nil || len(au.Items) != 1 || (who{au.Items[0].Actor, au.Items[0].ActorKind}) != old {
		t.Errorf("old audit = %+v, %v", au, err)
	}
	cv, err := s.GetConfigVersion(ctx, "n1", "v1")
	if err != nil || (who{cv.Actor, cv.ActorKind}) != old {
		t.Errorf("old configuration version = %+v, %v", cv, err)
	}
	ro, err := s.GetRollout(ctx, "r1")
	if err != nil || (who{ro.Actor, ro.ActorKind}) != old {
		t.Errorf("old rollout = %+v, %v", ro, err)
	}

	w := dw("new", "n1", "s1", t0)
	w.Actor, w.ActorKind = "bob", "oidc"
	if _, err := s.WriteDesired(ctx, w); err != nil {
		t.Fatal(err)
	}
	in, err = s.GetIntent(ctx, "new")
	if err != nil || (who{in.Actor, in.ActorKind}) != (who{"bob", "oidc"}) {
		t.Errorf("new intent = %+v, %v", in, err)
	}
	au, err = s.ListAudit(ctx, AuditFilter{Actor: "bob"}, Paging{Page: 1, PageSize: 10})
	if err != nil || len(au.Items) != 1 || au.Items[0].ActorKind != "oidc" {
		t.Errorf("new audit = %+v, %v", au, err)
	}
	evs, err = s.ListEvents(ctx, EventFilter{OperationID: "new"}, Paging{Page: 1, PageSize: 10})
	if err != nil || len(evs.Items) != 1 || evs.Items[0].ActorKind != "oidc" {
		t.Errorf("new events = %+v, %v", evs, err)
	}
}
