package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/hub/rollout"
	"github.com/flowplane/flowplane/internal/wire"
)

// testRollout is a pending rollout of one configuration over nodes, one
// node per wave.
func testRollout(id string, now time.Time, nodes ...string) Rollout {
	r := Rollout{Rollout: rollout.Rollout{ID: id, State: wire.RolloutPending,
		Plan:      rollout.Plan{GateTimeout: 2 * time.Minute, Soak: 10 * time.Second, Pause: time.Second, MaxFailures: 1},
		UpdatedAt: now},
		Format: "yaml", Content: "streams: [new]\n", SHA256: sha256Hex("streams: [new]\n"), Actor: "op",
		CorrelationID: "corr-" + id, CreatedAt: now}
	for i, n := range nodes {
		r.Plan.Waves = append(r.Plan.Waves, []string{n})
		r.Nodes = append(r.Nodes, rollout.Node{NodeID: n, Wave: i + 1, Phase: wire.RolloutNodeWaiting, UpdatedAt: now})
	}
	return r
}

func TestRolloutCreateGetList(t *testing.T) { backends(t, testRolloutCreateGetList) }

func testRolloutCreateGetList(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	r1 := testRollout("r1", t0, "n2", "n1", "n3")
	if err := s.CreateRollout(ctx, r1); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateRollout(ctx, testRollout("r1", t0, "n1")); !errors.Is(err, ErrExists) {
		t.Errorf("second r1: %v, want ErrExists", err)
	}
	for _, bad := range []Rollout{testRollout("", t0, "n1"), testRollout("rx", time.Time{}, "n1"), testRollout("rx", t0, "n1", "n1")} {
		if err := s.CreateRollout(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", bad.ID, err)
		}
	}
	got, err := s.GetRollout(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	want := r1
	want.Revision = 1
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("GetRollout (-want +got):\n%s", d)
	}
	if _, err := s.GetRollout(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown rollout: %v", err)
	}
	r2 := testRollout("r2", t0.Add(time.Minute), "n1")
	r2.State = wire.RolloutSucceeded
	r3 := testRollout("r3", t0.Add(2*time.Minute), "n1", "n2")
	r3.ConfigVersion, r3.SourceNodeID, r3.Content, r3.Format = "v3", "n1", "", ""
	for _, r := range []Rollout{r2, r3} {
		if err := s.CreateRollout(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(rs []Rollout) (out []string) {
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	tests := []struct {
		f     RolloutFilter
		p     Paging
		total int
		want  []string
	}{
		{RolloutFilter{}, Paging{Page: 1, PageSize: 10}, 3, []string{"r3", "r2", "r1"}},
		{RolloutFilter{}, Paging{Page: 2, PageSize: 2}, 3, []string{"r1"}},
		{RolloutFilter{State: wire.RolloutPending}, Paging{Page: 1, PageSize: 10}, 2, []string{"r3", "r1"}},
		{RolloutFilter{State: wire.RolloutFailed}, Paging{Page: 1, PageSize: 10}, 0, nil},
	}
	for _, tt := range tests {
		page, err := s.ListRollouts(ctx, tt.f, tt.p)
		if err != nil || page.Total != tt.total || !cmp.Equal(ids(page.Items), tt.want) {
			t.Errorf("%+v %+v: total %d items %v, %v; want %d %v", tt.f, tt.p, page.Total, ids(page.Items), err, tt.total, tt.want)
		}
	}
	page, _ := s.ListRollouts(ctx, RolloutFilter{}, Paging{Page: 1, PageSize: 10})
	if d := cmp.Diff(want, page.Items[2]); d != "" {
		t.Errorf("listed r1 (-want +got):\n%s", d)
	}
	if page.Items[0].ConfigVersion != "v3" || page.Items[0].SourceNodeID != "n1" || len(page.Items[0].Nodes) != 2 {
		t.Errorf("r3 = %+v", page.Items[0])
	}
	if _, err := s.ListRollouts(ctx, RolloutFilter{}, Paging{Page: 1, PageSize: 0}); !errors.Is(err, ErrInvalid) {
		t.Errorf("page size 0: %v", err)
	}
	evs, _ := s.ListEvents(ctx, EventFilter{Kind: wire.EventRolloutChanged, ResourceID: "r1"}, Paging{Page: 1, PageSize: 10})
	if len(evs.Items) != 1 || evs.Items[0].Data["state"] != wire.RolloutPending {
		t.Errorf("events = %+v", evs.Items)
	}
	audit, _ := s.ListAudit(ctx, AuditFilter{Action: "rollout_create"}, Paging{Page: 1, PageSize: 10})
	if len(audit.Items) != 3 || audit.Items[2].ResourceID != "r1" || audit.Items[2].Outcome != OutcomeAccepted {
		t.Errorf("audit = %+v", audit.Items)
	}
}

// TestSaveRollout: a step commits the rollout with its applies, events and
// audit rows at revision+1; the nodes' generation, operation and target
// come from the writes; a stale revision is a conflict.
func TestSaveRollout(t *testing.T) { backends(t, testSaveRollout) }

func testSaveRollout(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustWriteConfig(t, s, cw("pre", "n2", "streams: [old]\n", t0)) // n2 at generation 1, v1
	r := testRollout("r1", t0, "n1", "n2")
	r.Plan.Waves = [][]string{{"n1", "n2"}}
	r.Nodes[1].Wave = 1
	if err := s.CreateRollout(ctx, r); err != nil {
		t.Fatal(err)
	}
	cur, _ := s.GetRollout(ctx, "r1")
	step := cur
	now := t0.Add(time.Second)
	step.State, step.CurrentWave, step.UpdatedAt = wire.RolloutRunning, 1, now
	step.Nodes = []rollout.Node{
		{NodeID: "n1", Wave: 1, Phase: wire.RolloutNodeApplying, AppliedAt: now, UpdatedAt: now},
		{NodeID: "n2", Wave: 1, Phase: wire.RolloutNodeApplying, VersionBefore: "v1", NodeVersionBefore: "v9", AppliedAt: now, UpdatedAt: now},
	}
	apply := func(id, node string) ConfigWrite {
		return ConfigWrite{IntentID: id, NodeID: node, Format: r.Format, Content: r.Content, Action: "rollout_apply",
			CorrelationID: r.CorrelationID, Actor: "hub", Now: now}
	}
	ev := event(wire.EventRolloutChanged, now, "", "r1", "", r.CorrelationID, "hub", "hub", "", "wave 1 started")
	res, err := s.SaveRollout(ctx, RolloutUpdate{Rollout: step, Applies: []ConfigWrite{apply("i1", "n1"), apply("i2", "n2")},
		Events: []wire.Event{ev}, Audit: []AuditRecord{{OccurredAt: wire.At(now), Actor: "hub", Action: "rollout_wave",
			ResourceType: "rollout", ResourceID: "r1", Outcome: OutcomeAccepted}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rollout.Revision != 2 || len(res.Intents) != 2 || res.Txn == 0 {
		t.Fatalf("result = %+v", res)
	}
	wantNodes := []rollout.Node{
		// One content, one version on both nodes (fleet-wide numbering).
		{NodeID: "n1", Wave: 1, Phase: wire.RolloutNodeApplying, Generation: 1, OperationID: "i1", VersionTarget: "v2",
			AppliedAt: now, UpdatedAt: now},
		{NodeID: "n2", Wave: 1, Phase: wire.RolloutNodeApplying, VersionBefore: "v1", NodeVersionBefore: "v9", Generation: 2,
			OperationID: "i2", VersionTarget: "v2", AppliedAt: now, UpdatedAt: now},
	}
	if d := cmp.Diff(wantNodes, res.Rollout.Nodes); d != "" {
		t.Errorf("saved nodes (-want +got):\n%s", d)
	}
	got, _ := s.GetRollout(ctx, "r1")
	if d := cmp.Diff(res.Rollout, got); d != "" {
		t.Errorf("stored rollout differs from the result (-result +stored):\n%s", d)
	}
	if got.State != wire.RolloutRunning || got.CurrentWave != 1 || got.Content != r.Content || got.Actor != "op" {
		t.Errorf("stored = %+v", got)
	}
	v, err := s.GetConfigVersion(ctx, "n2", "v2")
	if err != nil || v.Source != wire.ConfigSourceRollout || v.RolloutID != "r1" || v.Content != r.Content {
		t.Errorf("n2 v2 = %+v, %v", v, err)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM events WHERE kind = 'rollout_changed' AND message = 'wave 1 started'"); n != 1 {
		t.Errorf("step events = %d", n)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM audit WHERE action = 'rollout_wave'"); n != 1 {
		t.Errorf("step audit rows = %d", n)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM audit WHERE action = 'rollout_apply'"); n != 2 {
		t.Errorf("apply audit rows = %d", n)
	}

	// A writer that read revision 1 conflicts and writes nothing.
	stale := step
	stale.State = wire.RolloutPaused
	if _, err := s.SaveRollout(ctx, RolloutUpdate{Rollout: stale, Applies: []ConfigWrite{apply("i3", "n1")}}); !errors.Is(err, ErrRolloutConflict) {
		t.Errorf("stale save: %v, want ErrRolloutConflict", err)
	}
	if _, err := s.GetIntent(ctx, "i3"); !errors.Is(err, ErrNotFound) {
		t.Errorf("stale save's apply written: %v", err)
	}

	// A rollback re-applies the versions before and keeps the targets.
	rb := got
	rb.State = wire.RolloutRolledBack
	rb.Nodes[0].Phase, rb.Nodes[1].Phase = wire.RolloutNodeRollingBack, wire.RolloutNodeRollingBack
	res, err = s.SaveRollout(ctx, RolloutUpdate{Rollout: rb, Applies: []ConfigWrite{
		{IntentID: "b1", NodeID: "n1", NodeVersion: "v2", Action: ActionRolloutRollback, Now: now},
		{IntentID: "b2", NodeID: "n2", Version: "v1", Action: ActionRolloutRollback, Now: now},
	}})
	if err != nil {
		t.Fatal(err)
	}
	n1, n2 := res.Rollout.Nodes[0], res.Rollout.Nodes[1]
	if res.Rollout.Revision != 3 || n1.Generation != 2 || n1.OperationID != "b1" || n1.VersionTarget != "v2" ||
		n2.Generation != 3 || n2.OperationID != "b2" || n2.VersionTarget != "v2" {
		t.Errorf("after rollback = %+v", res.Rollout)
	}
	if r, _ := s.GetResource(ctx, "n2", KindConfiguration, wire.ConfigResource); r.ConfigVersion != "v1" || r.Generation != 3 {
		t.Errorf("n2 desired after rollback = %+v", r)
	}
	act, err := s.ActiveRollouts(ctx)
	if err != nil || len(act) != 1 || act[0].ID != "r1" {
		t.Errorf("active while rolling back = %+v, %v", act, err)
	}
	done := res.Rollout
	done.Nodes[0].Phase, done.Nodes[1].Phase = wire.RolloutNodeRolledBack, wire.RolloutNodeRolledBack
	if _, err := s.SaveRollout(ctx, RolloutUpdate{Rollout: done}); err != nil {
		t.Fatal(err)
	}
	if act, err := s.ActiveRollouts(ctx); err != nil || len(act) != 0 {
		t.Errorf("active after rollback = %+v, %v", act, err)
	}
	if _, err := s.SaveRollout(ctx, RolloutUpdate{Rollout: testRollout("nope", t0, "n1")}); !errors.Is(err, ErrNotFound) {
		t.Errorf("save of an unknown rollout: %v", err)
	}
}

// TestSaveRolloutAtomic: an apply that fails rolls the whole save back:
// no intent, no version, no event, the rollout at its revision.
func TestSaveRolloutAtomic(t *testing.T) { backends(t, testSaveRolloutAtomic) }

func testSaveRolloutAtomic(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	r := testRollout("r1", t0, "n1", "n2")
	if err := s.CreateRollout(ctx, r); err != nil {
		t.Fatal(err)
	}
	before := map[string]int{}
	tables := []string{"intents", "outbox", "config_versions", "events", "audit", "resources"}
	for _, tb := range tables {
		before[tb] = count(t, s, "SELECT COUNT(*) FROM "+tb)
	}
	cur, _ := s.GetRollout(ctx, "r1")
	step := cur
	step.State = wire.RolloutRunning
	tests := []struct {
		name    string
		applies []ConfigWrite
		want    error
	}{
		{"unknown version", []ConfigWrite{
			{IntentID: "i1", NodeID: "n1", Format: "yaml", Content: r.Content, Now: t0},
			{IntentID: "i2", NodeID: "n2", Version: "v5", Now: t0},
		}, ErrNotFound},
		{"if-match", []ConfigWrite{
			{IntentID: "i1", NodeID: "n1", Format: "yaml", Content: r.Content, Now: t0},
			{IntentID: "i2", NodeID: "n2", Format: "yaml", Content: r.Content, IfMatch: p(4), Now: t0},
		}, ErrGenerationConflict},
		{"duplicate intent id", []ConfigWrite{
			{IntentID: "i1", NodeID: "n1", Format: "yaml", Content: r.Content, Now: t0},
			{IntentID: "i1", NodeID: "n2", Format: "yaml", Content: r.Content, Now: t0},
		}, nil},
		{"not a target", []ConfigWrite{{IntentID: "i1", NodeID: "n9", Format: "yaml", Content: r.Content, Now: t0}}, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.SaveRollout(ctx, RolloutUpdate{Rollout: step, Applies: tt.applies,
				Events: []wire.Event{event(wire.EventRolloutChanged, t0, "", "r1", "", "", "", "", "", "step")}})
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			for _, tb := range tables {
				if n := count(t, s, "SELECT COUNT(*) FROM "+tb); n != before[tb] {
					t.Errorf("%s: %d rows, %d before", tb, n, before[tb])
				}
			}
			if got, _ := s.GetRollout(ctx, "r1"); got.Revision != 1 || got.State != wire.RolloutPending {
				t.Errorf("rollout = revision %d state %s", got.Revision, got.State)
			}
		})
	}
	// The same step with good applies commits.
	if _, err := s.SaveRollout(ctx, RolloutUpdate{Rollout: step, Applies: []ConfigWrite{
		{IntentID: "i1", NodeID: "n1", Format: "yaml", Content: r.Content, Now: t0}}}); err != nil {
		t.Fatal(err)
	}
}

func TestActiveRollouts(t *testing.T) { backends(t, testActiveRollouts) }

func testActiveRollouts(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	states := []struct {
		id, state, phase string
		active           bool
	}{
		{"a-pending", wire.RolloutPending, wire.RolloutNodeWaiting, true},
		{"b-running", wire.RolloutRunning, wire.RolloutNodeApplying, true},
		{"c-paused", wire.RolloutPaused, wire.RolloutNodeSoaking, true},
		{"d-succeeded", wire.RolloutSucceeded, wire.RolloutNodePassed, false},
		{"e-failed", wire.RolloutFailed, wire.RolloutNodeFailed, false},
		{"f-cancelled", wire.RolloutCancelled, wire.RolloutNodeSkipped, false},
		{"g-rolling-back", wire.RolloutRolledBack, wire.RolloutNodeRollingBack, true},
		{"h-rolled-back", wire.RolloutRolledBack, wire.RolloutNodeRolledBack, false},
	}
	var want []string
	for i, st := range states {
		r := testRollout(st.id, t0.Add(time.Duration(i)*time.Second), "n1", "n2")
		r.State = st.state
		r.Nodes[1].Phase = st.phase
		if err := s.CreateRollout(ctx, r); err != nil {
			t.Fatal(err)
		}
		if st.active {
			want = append(want, st.id)
		}
	}
	act, err := s.ActiveRollouts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range act {
		got = append(got, r.ID)
		if len(r.Nodes) != 2 {
			t.Errorf("%s nodes = %+v", r.ID, r.Nodes)
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("active (-want +got):\n%s", d)
	}
}
