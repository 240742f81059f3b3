package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/wire"
	"github.com/google/go-cmp/cmp"
)

const testSecret = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3I"

// ids returns an id maker: prefix-1, prefix-2, ...
func ids(prefix string) func() string {
	n := 0
	return func() string { n++; return prefix + "-" + strconv.Itoa(n) }
}

// splitNew is the creation of job id split over the nodes of taskNodes,
// coordinated by coord.
func splitNew(id, coord string, taskNodes map[string]string) JobWrite {
	w := jobNew(id, coord, t0)
	ports := map[string]string{}
	for _, n := range taskNodes {
		ports[n] = n + ":7000"
	}
	w.Split = &JobSplit{TaskNodes: taskNodes, NodeDataPorts: ports, DataSecret: testSecret}
	w.NewIntentID = ids("x")
	return w
}

// TestWriteJobSplit creates a job split over three nodes, stops it, then
// moves it to two nodes of which one is new: every node it runs on holds
// its desired state at the job's generation with its own intent, the node
// it leaves gets a fence, and the secret is in the jobs row only.
func TestWriteJobSplit(t *testing.T) { backends(t, testWriteJobSplit) }

func testWriteJobSplit(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	tasks := map[string]string{"a#0": "n1", "b#0": "n2", "b#1": "n3", "c#0": "n1"}
	res := mustWriteJob(t, s, splitNew("j1", "n1", tasks))
	if len(res.Peers) != 2 || res.Peers[0].NodeID != "n2" || res.Peers[0].ID != "x-1" || res.Peers[1].NodeID != "n3" ||
		res.Peers[1].ID != "x-2" || len(res.Fences) != 0 || res.FenceIntent != nil {
		t.Fatalf("create = %+v", res)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		r, err := s.GetResource(ctx, n, KindJob, "j1")
		if err != nil || r.State != wire.JobRunning || r.Generation != 1 || r.ConfigVersion != "1" {
			t.Errorf("resource at %s = %+v, %v", n, r, err)
		}
	}
	if p := res.Peers[0]; p.Operation != wire.CommandJobStart || string(p.Payload) != string(res.Intent.Payload) || p.Generation != 1 {
		t.Errorf("peer intent = %+v", p)
	}
	j, err := s.GetJob(ctx, "j1")
	if err != nil || j.Placement != wire.PlacementSplit || !cmp.Equal(j.TaskNodes, tasks) || j.NodeDataPorts["n2"] != "n2:7000" ||
		!cmp.Equal(j.Nodes(), []string{"n1", "n2", "n3"}) {
		t.Fatalf("job = %+v, %v", j, err)
	}
	splits, err := s.JobSplits(ctx, []string{"j1", "nope"})
	if err != nil || len(splits) != 1 || splits["j1"].DataSecret != testSecret || !cmp.Equal(splits["j1"].TaskNodes, tasks) {
		t.Fatalf("splits = %+v, %v", splits, err)
	}

	stop := jobSet("stop", "j1", wire.JobStopped, t0.Add(1))
	stop.NewIntentID = ids("stop")
	mustWriteJob(t, s, stop)
	js, err := s.GetJobState(ctx, "j1")
	if err != nil || js.Latest == nil || js.Latest.ID != "stop" || len(js.Peers) != 2 {
		t.Fatalf("state after stop = %+v, %v", js, err)
	}
	for _, p := range js.Peers {
		if p.Latest == nil || p.Latest.Operation != wire.CommandJobStop || p.Latest.Generation != 2 {
			t.Errorf("peer %s latest = %+v", p.NodeID, p.Latest)
		}
	}
	if n := count(t, s, "SELECT COUNT(*) FROM intents WHERE resource_id = 'j1' AND state = 'superseded'"); n != 3 {
		t.Errorf("superseded intents = %d, want the 3 starts", n)
	}

	move := jobSet("move", "j1", wire.JobStopped, t0.Add(2))
	move.Action, move.NodeID = "job_move", "n4"
	move.Split = &JobSplit{TaskNodes: map[string]string{"a#0": "n4", "b#0": "n2", "b#1": "n4", "c#0": "n4"},
		NodeDataPorts: map[string]string{"n2": "n2:7000", "n4": "n4:7000"}, DataSecret: "new-secret"}
	move.FenceIntentID, move.NewIntentID = "fence", ids("m")
	res = mustWriteJob(t, s, move)
	if len(res.Peers) != 1 || res.Peers[0].NodeID != "n2" || res.Peers[0].ID != "m-1" || len(res.Fences) != 2 ||
		res.Fences[0].NodeID != "n1" || res.Fences[0].ID != "fence" || res.Fences[1].ID != "m-2" || res.Fences[1].NodeID != "n3" || res.FenceIntent == nil || !res.Fences[0].ExpiresAt.IsZero() {
		t.Fatalf("move = %+v", res)
	}
	for n, want := range map[string]string{"n1": wire.JobStopped, "n2": wire.JobStopped, "n3": wire.JobStopped, "n4": wire.JobStopped} {
		if r, err := s.GetResource(ctx, n, KindJob, "j1"); err != nil || r.State != want || r.Generation != 3 {
			t.Errorf("resource at %s = %+v, %v", n, r, err)
		}
	}
	if splits, _ := s.JobSplits(ctx, []string{"j1"}); splits["j1"].DataSecret != "new-secret" {
		t.Errorf("move kept the old secret")
	}
	if n := count(t, s, "SELECT COUNT(*) FROM intents WHERE payload LIKE '%secret%' OR payload LIKE ?", "%"+testSecret+"%"); n != 0 {
		t.Errorf("%d intents carry the secret", n)
	}
	var ev int
	for _, table := range []string{"events", "audit"} {
		rows, err := s.rdb.Query("SELECT * FROM " + table)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				if b, ok := v.([]byte); ok {
					v = string(b)
				}
				if str, ok := v.(string); ok && (strings.Contains(str, testSecret) || strings.Contains(str, "new-secret")) {
					t.Errorf("%s row carries the secret: %v", table, vals)
				}
			}
			ev++
		}
		rows.Close()
	}
	if ev == 0 {
		t.Errorf("no events or audit rows were looked at")
	}

	tests := []struct {
		name string
		w    JobWrite
	}{
		{"coordinator runs no task", func() JobWrite { w := splitNew("j2", "n9", tasks); return w }()},
		{"no ids", func() JobWrite { w := splitNew("j3", "n1", tasks); w.NewIntentID = nil; return w }()},
		{"no secret", func() JobWrite { w := splitNew("j4", "n1", tasks); w.Split.DataSecret = ""; return w }()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.WriteJob(ctx, tc.w); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if _, err := s.GetJob(ctx, tc.w.JobID); !errors.Is(err, ErrNotFound) {
				t.Errorf("refused write left its job: %v", err)
			}
		})
	}
}

// TestMigrateSplitPlacement opens a version 5 database holding a job, its
// version, resource row and intent: the job reads back colocated on its
// node, and a split write works at once.
func TestMigrateSplitPlacement(t *testing.T) {
	ctx := context.Background()
	s := openFromVersion(t, 5,
		`INSERT INTO jobs (job_id, node_id, strategy, requested, version, generation, desired_state, created_at, updated_at)
			VALUES ('j1', 'n1', 'requested', '["n1"]', 1, 2, 'running', 1000, 1000)`,
		`INSERT INTO job_versions (job_id, version, spec, plan, created_at) VALUES ('j1', 1, '{"id":"j1"}', '{}', 1000)`,
		`INSERT INTO resources (node_id, resource_kind, resource_id, state, config_version, generation, updated_at)
			VALUES ('n1', 'job', 'j1', 'running', '1', 2, 1000)`,
		`INSERT INTO intents (id, operation, node_id, resource_kind, resource_id, generation, desired_state, config_version, state,
			created_at, updated_at, payload) VALUES ('cur', 'job_start', 'n1', 'job', 'j1', 2, 'running', '1', 'succeeded', 1000, 1000,
			'{"state":"running","job_version":1}')`,
	)
	js, err := s.GetJobState(ctx, "j1")
	if err != nil || js.Job.Placement != wire.PlacementColocated || js.Job.TaskNodes != nil || js.Peers != nil ||
		!cmp.Equal(js.Job.Nodes(), []string{"n1"}) || js.Latest == nil || js.Latest.ID != "cur" {
		t.Fatalf("job after migration = %+v, %v", js, err)
	}
	if splits, err := s.JobSplits(ctx, []string{"j1"}); err != nil || len(splits) != 0 {
		t.Errorf("splits of a colocated job = %+v, %v", splits, err)
	}
	mustWriteJob(t, s, jobSet("stop", "j1", wire.JobStopped, t0))
	mustWriteJob(t, s, splitNew("j2", "n1", map[string]string{"a#0": "n1", "a#1": "n2"}))
	states, err := s.JobStates(ctx)
	if err != nil || len(states) != 2 || states[0].Job.Generation != 3 || len(states[1].Peers) != 1 ||
		states[1].Peers[0].Latest == nil || states[1].Peers[0].Latest.ID != "x-1" {
		t.Fatalf("states = %+v, %v", states, err)
	}
}
