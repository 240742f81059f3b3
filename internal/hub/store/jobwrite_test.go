package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/hub/placement"
	"github.com/flowplane/flowplane/internal/wire"
	"github.com/google/go-cmp/cmp"
)

// jobNew is the creation of job id on node, running, at version 1.
func jobNew(id, node string, now time.Time) JobWrite {
	return JobWrite{IntentID: "create-" + id, Operation: wire.CommandJobStart, Action: "job_create", JobID: id, NodeID: node,
		Create: &JobCreate{Strategy: "requested", Requested: []string{node},
			Version: JobVersion{Version: 1, Spec: json.RawMessage(`{"id":"` + id + `"}`), Plan: json.RawMessage(`{"tasks":1}`)}},
		State: wire.JobRunning, ActionID: "act-1", Payload: json.RawMessage(`{"state":"running","job_version":1}`),
		CorrelationID: "corr-" + id, Actor: "op", Now: now, ExpiresAt: now.Add(time.Hour), Spread: placement.Spread}
}

// jobSet is a desired-state write of job id, kept on its node.
func jobSet(intent, id, state string, now time.Time) JobWrite {
	op := wire.CommandJobStart
	if state == wire.JobStopped {
		op = wire.CommandJobStop
	}
	return JobWrite{IntentID: intent, Operation: op, Action: op, JobID: id, State: state, ActionID: "act-" + intent,
		Payload: json.RawMessage(`{"state":"` + state + `"}`), CorrelationID: "corr-" + intent, Actor: "op",
		Now: now, ExpiresAt: now.Add(time.Hour), Spread: placement.Spread}
}

func mustWriteJob(t *testing.T, s *Store, w JobWrite) JobWriteResult {
	t.Helper()
	res, err := s.WriteJob(context.Background(), w)
	if err != nil {
		t.Fatalf("WriteJob %s: %v", w.IntentID, err)
	}
	return res
}

func TestWriteJobCreate(t *testing.T) { backends(t, testWriteJobCreate) }

func testWriteJobCreate(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	res := mustWriteJob(t, s, jobNew("j1", "n1", t0))
	if res.Generation != 1 || res.FenceIntent != nil || res.Txn == 0 {
		t.Errorf("create = %+v", res)
	}
	j, err := s.GetJob(ctx, "j1")
	if err != nil {
		t.Fatal(err)
	}
	want := Job{ID: "j1", NodeID: "n1", Strategy: "requested", Requested: []string{"n1"}, Version: 1, Generation: 1,
		DesiredState: wire.JobRunning, ActionID: "act-1", Placement: wire.PlacementColocated, CreatedAt: t0, UpdatedAt: t0}
	if d := cmp.Diff(want, j); d != "" {
		t.Errorf("job (-want +got):\n%s", d)
	}
	r, err := s.GetResource(ctx, "n1", KindJob, "j1")
	if err != nil || r.State != wire.JobRunning || r.Generation != 1 || r.ConfigVersion != "1" || r.ActionID != "act-1" {
		t.Errorf("resource = %+v, %v", r, err)
	}
	wantIntent := Intent{Seq: res.Intent.Seq, ID: "create-j1", Operation: wire.CommandJobStart, NodeID: "n1", Kind: KindJob,
		ResourceID: "j1", Generation: 1, DesiredState: wire.JobRunning, ConfigVersion: "1", ActionID: "act-1",
		CorrelationID: "corr-j1", Actor: "op", State: wire.OpPending, Payload: json.RawMessage(`{"state":"running","job_version":1}`),
		CreatedAt: t0, UpdatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if d := cmp.Diff(wantIntent, res.Intent); d != "" {
		t.Errorf("result intent (-want +got):\n%s", d)
	}
	if got, err := s.GetIntent(ctx, "create-j1"); err != nil || !cmp.Equal(wantIntent, got) {
		t.Errorf("stored intent differs: %v\n%s", err, cmp.Diff(wantIntent, got))
	}
	v, err := s.GetJobVersion(ctx, "j1", 1)
	if err != nil || string(v.Spec) != `{"id":"j1"}` || string(v.Plan) != `{"tasks":1}` || !v.CreatedAt.Equal(t0) {
		t.Errorf("version 1 = %+v, %v", v, err)
	}
	audit, _ := s.ListAudit(ctx, AuditFilter{ResourceID: "j1"}, Paging{1, 10})
	if audit.Total != 1 || audit.Items[0].Action != "job_create" || audit.Items[0].ResourceType != KindJob ||
		audit.Items[0].Outcome != OutcomeAccepted || audit.Items[0].NodeID != "n1" {
		t.Errorf("audit %+v", audit.Items)
	}
	ev, _ := s.ListEvents(ctx, EventFilter{Kind: wire.EventIntentAccepted, ResourceID: "j1"}, Paging{1, 10})
	wantData := map[string]any{"generation": 1.0, "desired_state": "running", "version": 1.0}
	if ev.Total != 1 || ev.Items[0].OperationID != "create-j1" || !cmp.Equal(wantData, ev.Items[0].Data) {
		t.Errorf("events %+v", ev.Items)
	}

	tests := []struct {
		name string
		w    JobWrite
		want error
	}{
		{"create a known id", func() JobWrite { w := jobNew("j1", "n2", t0); w.IntentID = "x0"; return w }(), ErrExists},
		{"write an unknown job", jobSet("x1", "nope", wire.JobStopped, t0), ErrNotFound},
		{"no state", func() JobWrite { w := jobSet("x2", "j1", "", t0); return w }(), ErrInvalid},
		{"payload not JSON", func() JobWrite { w := jobSet("x3", "j1", wire.JobStopped, t0); w.Payload = []byte("{"); return w }(), ErrInvalid},
		{"unknown version", func() JobWrite { w := jobSet("x4", "j1", wire.JobStopped, t0); w.Version = 9; return w }(), ErrInvalid},
		{"unknown rollback", func() JobWrite { w := jobSet("x5", "j1", wire.JobStopped, t0); w.RollBack = "u9"; return w }(), ErrNotFound},
		{"move without fence", func() JobWrite { w := jobSet("x6", "j1", wire.JobStopped, t0); w.NodeID = "n2"; return w }(), ErrInvalid},
		{"no spread", func() JobWrite { w := jobSet("x7", "j1", wire.JobStopped, t0); w.Spread = nil; return w }(), ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.WriteJob(ctx, tc.w); !errors.Is(err, tc.want) || errors.Is(err, ErrStorage) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if _, err := s.GetIntent(ctx, tc.w.IntentID); !errors.Is(err, ErrNotFound) {
				t.Errorf("refused write left its intent: %v", err)
			}
		})
	}
	if j2, _ := s.GetJob(ctx, "j1"); j2.Generation != 1 || j2.NodeID != "n1" {
		t.Errorf("refused writes changed the job: %+v", j2)
	}
}

func TestWriteJobIfMatch(t *testing.T) { backends(t, testWriteJobIfMatch) }

func testWriteJobIfMatch(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	create := jobNew("j1", "n1", t0)
	create.IfMatch = p(0)
	mustWriteJob(t, s, create)
	tests := []struct {
		name    string
		ifMatch *int64
		wantGen int64
		wantCur int64 // when a conflict
	}{
		{"absent", nil, 2, 0},
		{"current", p(2), 3, 0},
		{"stale", p(2), 0, 3},
		{"future", p(9), 0, 3},
		{"current again", p(3), 4, 0},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := jobSet(fmt.Sprint("i", i), "j1", wire.JobStopped, t0)
			w.IfMatch = tc.ifMatch
			res, err := s.WriteJob(ctx, w)
			if tc.wantCur != 0 {
				var gc *GenerationConflictError
				if !errors.As(err, &gc) || !errors.Is(err, ErrGenerationConflict) || gc.Current != tc.wantCur || gc.Expected != *tc.ifMatch {
					t.Fatalf("err = %v, want conflict current %d", err, tc.wantCur)
				}
				return
			}
			if err != nil || res.Generation != tc.wantGen {
				t.Fatalf("= %+v, %v; want generation %d", res, err, tc.wantGen)
			}
		})
	}
	again := jobNew("j2", "n1", t0)
	again.IfMatch = p(1)
	if _, err := s.WriteJob(ctx, again); !errors.Is(err, ErrGenerationConflict) {
		t.Errorf("create with If-Match 1: %v, want a conflict", err)
	}
}

// TestWriteJobMove moves a job n1 -> n2 -> n3 -> n1: the generation keeps
// increasing, each move leaves the old node desired stopped at the new
// generation with a never-expiring fence intent in its outbox, a later
// move leaves an earlier fence alone, and coming back to a node supersedes
// its fence.
func TestWriteJobMove(t *testing.T) { backends(t, testWriteJobMove) }

func testWriteJobMove(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustWriteJob(t, s, jobNew("j1", "n1", t0))
	move := func(intent, fence, node string, gen int64) JobWriteResult {
		t.Helper()
		w := jobSet(intent, "j1", wire.JobRunning, t0.Add(time.Minute))
		w.Action, w.NodeID, w.FenceIntentID, w.IfMatch = "job_move", node, fence, p(gen-1)
		res := mustWriteJob(t, s, w)
		if res.Generation != gen {
			t.Fatalf("move to %s: generation %d, want %d", node, res.Generation, gen)
		}
		return res
	}
	res := move("m2", "f1", "n2", 2)
	if res.Intent.NodeID != "n2" || res.Intent.Generation != 2 || res.FenceIntent == nil {
		t.Fatalf("move result %+v", res)
	}
	f := *res.FenceIntent
	if f.ID != "f1" || f.NodeID != "n1" || f.Operation != wire.CommandJobStop || f.DesiredState != wire.JobStopped ||
		f.Generation != 2 || !f.ExpiresAt.IsZero() || string(f.Payload) != fmt.Sprintf(fencePayload, f.ConfigVersion) {
		t.Errorf("fence %+v", f)
	}
	if got, err := s.GetIntent(ctx, "f1"); err != nil || !cmp.Equal(f, got) {
		t.Errorf("stored fence differs: %v\n%s", err, cmp.Diff(f, got))
	}
	wantStates := func(step string, want map[string]string) {
		t.Helper()
		for id, st := range want {
			if in, err := s.GetIntent(ctx, id); err != nil || in.State != st {
				t.Errorf("%s: intent %s = %s, %v; want %s", step, id, in.State, err, st)
			}
		}
	}
	wantStates("n1->n2", map[string]string{"create-j1": wire.OpSuperseded, "f1": wire.OpPending, "m2": wire.OpPending})
	old, _ := s.GetResource(ctx, "n1", KindJob, "j1")
	cur, _ := s.GetResource(ctx, "n2", KindJob, "j1")
	if old.State != wire.JobStopped || old.Generation != 2 || cur.State != wire.JobRunning || cur.Generation != 2 {
		t.Errorf("resources after the move: old %+v, new %+v", old, cur)
	}
	// The fence waits for n1 whenever it comes back: never expired, in
	// n1's outbox only.
	far := t0.Add(365 * 24 * time.Hour)
	if out, _ := s.OutboxFor(ctx, []string{"n1"}, t0, 10); len(out) != 1 || out[0].IntentID != "f1" || out[0].NodeID != "n1" {
		t.Errorf("n1 outbox %+v", out)
	}
	if out, _ := s.OutboxFor(ctx, nil, far, 10); len(out) != 1 || out[0].IntentID != "m2" {
		t.Errorf("expired outbox a year later %+v, want only m2", out)
	}
	if j, _ := s.GetJob(ctx, "j1"); j.NodeID != "n2" || j.Generation != 2 {
		t.Errorf("job after the move %+v", j)
	}

	move("m3", "f2", "n3", 3)
	wantStates("n2->n3", map[string]string{"f1": wire.OpPending, "m2": wire.OpSuperseded, "f2": wire.OpPending, "m3": wire.OpPending})
	move("m4", "f3", "n1", 4)
	wantStates("n3->n1", map[string]string{"f1": wire.OpSuperseded, "f2": wire.OpPending, "m3": wire.OpSuperseded,
		"f3": wire.OpPending, "m4": wire.OpPending})
	for node, want := range map[string]Resource{
		"n1": {State: wire.JobRunning, Generation: 4}, "n2": {State: wire.JobStopped, Generation: 3}, "n3": {State: wire.JobStopped, Generation: 4},
	} {
		r, _ := s.GetResource(ctx, node, KindJob, "j1")
		if r.State != want.State || r.Generation != want.Generation {
			t.Errorf("resource at %s = %s gen %d, want %s gen %d", node, r.State, r.Generation, want.State, want.Generation)
		}
	}
	st, err := s.GetJobState(ctx, "j1")
	if err != nil || st.Job.NodeID != "n1" || st.Latest == nil || st.Latest.ID != "m4" {
		t.Errorf("job state %+v, %v", st, err)
	}
	// A write without a node keeps the job where it is.
	if res := mustWriteJob(t, s, jobSet("s5", "j1", wire.JobStopped, t0)); res.FenceIntent != nil || res.Intent.NodeID != "n1" {
		t.Errorf("stop = %+v", res)
	}
}

func TestWriteJobPayloadRoundTrip(t *testing.T) { backends(t, testWriteJobPayloadRoundTrip) }

func testWriteJobPayloadRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	w := jobNew("j1", "n1", t0)
	w.Payload = json.RawMessage(`{"state":"running","spec":{"id":"j1","parallelism":4},"job_version":1,"recovery":"none"}`)
	mustWriteJob(t, s, w)
	if _, err := s.WriteDesired(ctx, dw("st1", "n1", "s1", t0)); err != nil {
		t.Fatal(err)
	}
	out, err := s.OutboxFor(ctx, []string{"n1"}, t0, 10)
	if err != nil || len(out) != 2 {
		t.Fatalf("outbox %+v, %v", out, err)
	}
	if string(out[0].Payload) != string(w.Payload) || out[0].Kind != KindJob || out[0].ConfigVersion != "1" {
		t.Errorf("job outbox entry %+v", out[0])
	}
	if out[1].Payload != nil {
		t.Errorf("stream outbox payload %q, want none", out[1].Payload)
	}
	if st, _ := s.GetIntent(ctx, "st1"); st.Payload != nil {
		t.Errorf("stream intent payload %q", st.Payload)
	}
	if err := s.StartAttempt(ctx, AttemptStart{IntentID: "create-j1", AttemptID: "a1", Now: t0, ExpiresAt: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	act, err := s.ActiveCommands(ctx)
	if err != nil || len(act) != 1 || string(act[0].Intent.Payload) != string(w.Payload) {
		t.Errorf("active commands %+v, %v", act, err)
	}
}

// TestWriteJobOneTransaction fails a move after its intent is written:
// nothing of it stays.
func TestWriteJobOneTransaction(t *testing.T) { backends(t, testWriteJobOneTransaction) }

func testWriteJobOneTransaction(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustWriteJob(t, s, jobNew("j1", "n1", t0))
	boom := errors.New("injected")
	var failing sync.Map
	s.hook = func(point string) error {
		if _, ok := failing.Load(point); ok {
			return boom
		}
		return nil
	}
	failing.Store("after_intent", true)
	w := jobSet("m2", "j1", wire.JobRunning, t0)
	w.NodeID, w.FenceIntentID = "n2", "f2"
	if _, err := s.WriteJob(ctx, w); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want injected", err)
	}
	failing.Delete("after_intent")
	if j, _ := s.GetJob(ctx, "j1"); j.Generation != 1 || j.NodeID != "n1" {
		t.Errorf("failed move changed the job: %+v", j)
	}
	for q, want := range map[string]int{
		"SELECT COUNT(*) FROM intents": 1, "SELECT COUNT(*) FROM outbox": 1, "SELECT COUNT(*) FROM audit": 1,
		"SELECT COUNT(*) FROM resources": 1, "SELECT COUNT(*) FROM intents WHERE state = 'pending'": 1,
	} {
		if n := count(t, s, q); n != want {
			t.Errorf("%s = %d, want %d", q, n, want)
		}
	}
}

func TestWriteJobUpgradeAndRollBack(t *testing.T) { backends(t, testWriteJobUpgradeAndRollBack) }

func testWriteJobUpgradeAndRollBack(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustWriteJob(t, s, jobNew("j1", "n1", t0))
	mustWriteJob(t, s, jobSet("stop", "j1", wire.JobStopped, t0.Add(time.Minute)))
	t1 := t0.Add(2 * time.Minute)
	sp := &wire.ArtifactRef{Kind: wire.ArtifactSavepoint, ID: 7}
	up := jobSet("up", "j1", wire.JobRunning, t1)
	up.Action, up.Version, up.SetRestore = "job_upgrade", 2, true
	up.NewVersion = &JobVersion{Version: 2, Spec: json.RawMessage(`{"id":"j1","v":2}`), UpgradeID: "u1"}
	up.Upgrade = &Upgrade{UpgradeID: "u1", FromVersion: 1, ToVersion: 2, Mode: wire.UpgradeSavepoint, Strict: true, Restore: sp}
	up.Restore = &wire.JobRestore{Recovery: wire.RecoveryArtifact, Artifact: sp}
	if res := mustWriteJob(t, s, up); res.Generation != 3 || res.Intent.ConfigVersion != "2" {
		t.Errorf("upgrade = %+v", res)
	}
	st, err := s.GetJobState(ctx, "j1")
	if err != nil || st.Job.Version != 2 || st.Version.Version != 2 || st.Version.UpgradeID != "u1" || !cmp.Equal(up.Restore, st.Job.Restore) {
		t.Errorf("job state after the upgrade %+v, %v", st, err)
	}
	if r, _ := s.GetResource(ctx, "n1", KindJob, "j1"); r.ConfigVersion != "2" {
		t.Errorf("resource config version %q, want 2", r.ConfigVersion)
	}
	wantUp := Upgrade{UpgradeID: "u1", JobID: "j1", FromVersion: 1, ToVersion: 2, Mode: wire.UpgradeSavepoint, Strict: true,
		Restore: sp, State: wire.UpgradeApplied, OperationID: "up", CreatedAt: wire.At(t1)}
	if u, err := s.GetUpgrade(ctx, "j1", "u1"); err != nil || !cmp.Equal(wantUp, u) {
		t.Errorf("upgrade record: %v\n%s", err, cmp.Diff(wantUp, u))
	}
	// A start that carries the restore clears it.
	clear := jobSet("restart", "j1", wire.JobRunning, t1)
	clear.SetRestore = true
	mustWriteJob(t, s, clear)
	if j, _ := s.GetJob(ctx, "j1"); j.Restore != nil {
		t.Errorf("restore not cleared: %+v", j.Restore)
	}

	t2 := t0.Add(3 * time.Minute)
	rb := jobSet("rb", "j1", wire.JobRunning, t2)
	rb.Action, rb.Version, rb.RollBack = "job_rollback", 1, "u1"
	mustWriteJob(t, s, rb)
	wantUp.State, wantUp.RolledBackAt = wire.UpgradeRolledBack, wire.At(t2)
	ups, err := s.Upgrades(ctx, "j1")
	if err != nil || len(ups) != 1 || !cmp.Equal(wantUp, ups[0]) {
		t.Errorf("upgrades after the rollback: %v\n%s", err, cmp.Diff([]Upgrade{wantUp}, ups))
	}
	vs, err := s.JobVersions(ctx, "j1")
	if err != nil || len(vs) != 2 || vs[0].Version != 1 || vs[1].Version != 2 {
		t.Errorf("versions %+v, %v", vs, err)
	}
	if st, _ := s.GetJobState(ctx, "j1"); st.Job.Version != 1 || st.Version.Version != 1 || st.Latest.ConfigVersion != "1" {
		t.Errorf("job state after the rollback %+v", st)
	}
	dup := jobSet("dup", "j1", wire.JobRunning, t2)
	dup.NewVersion = &JobVersion{Version: 2, Spec: json.RawMessage(`{}`)}
	if _, err := s.WriteJob(ctx, dup); !errors.Is(err, ErrExists) {
		t.Errorf("storing version 2 again: %v, want ErrExists", err)
	}
	if _, err := s.GetUpgrade(ctx, "j1", "u9"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown upgrade: %v", err)
	}
	if _, err := s.JobVersions(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("versions of an unknown job: %v", err)
	}
}

// TestJobCommand checks that a job command writes its intent, outbox row,
// audit row and pending artifact record, and never becomes the job's
// latest intent nor supersedes its pending start.
func TestJobCommand(t *testing.T) { backends(t, testJobCommand) }

func testJobCommand(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustWriteJob(t, s, jobNew("j1", "n1", t0))
	in, err := s.WriteJobCommand(ctx, JobCommandWrite{IntentID: "cp1", Operation: wire.CommandJobCheckpoint, JobID: "j1",
		NodeID: "n1", Generation: 1, Payload: json.RawMessage(`{}`), Artifact: &Artifact{Kind: wire.ArtifactCheckpoint, JobVersion: 1},
		CorrelationID: "c", Actor: "op", Now: t0.Add(time.Second), ExpiresAt: t0.Add(time.Minute)})
	if err != nil || in.Kind != KindJobCommand || in.State != wire.OpPending || string(in.Payload) != `{}` {
		t.Fatalf("command = %+v, %v", in, err)
	}
	if start, _ := s.GetIntent(ctx, "create-j1"); start.State != wire.OpPending {
		t.Errorf("command superseded the start: %s", start.State)
	}
	rs, err := s.ResourceStates(ctx, "")
	if err != nil || len(rs) != 1 || rs[0].Latest == nil || rs[0].Latest.ID != "create-j1" {
		t.Errorf("resource states %+v, %v", rs, err)
	}
	if r, _ := s.GetResourceState(ctx, "n1", KindJob, "j1"); r.Latest == nil || r.Latest.ID != "create-j1" {
		t.Errorf("resource state latest %+v", r.Latest)
	}
	if st, _ := s.GetJobState(ctx, "j1"); st.Latest == nil || st.Latest.ID != "create-j1" {
		t.Errorf("job state latest %+v", st.Latest)
	}
	if sts, _ := s.JobStates(ctx); len(sts) != 1 || sts[0].Latest == nil || sts[0].Latest.ID != "create-j1" {
		t.Errorf("job states %+v", sts)
	}
	if out, _ := s.OutboxFor(ctx, []string{"n1"}, t0, 10); len(out) != 2 || out[1].IntentID != "cp1" || out[1].Kind != KindJobCommand {
		t.Errorf("outbox %+v", out)
	}
	as, err := s.ListArtifacts(ctx, "j1", "")
	want := []Artifact{{JobID: "j1", Kind: wire.ArtifactCheckpoint, JobVersion: 1, StatefulOperators: []string{},
		State: wire.ArtifactPending, Trigger: wire.TriggerOperator, NodeID: "n1", OperationID: "cp1", CreatedAt: wire.At(t0.Add(time.Second))}}
	if err != nil || !cmp.Equal(want, as) {
		t.Errorf("artifacts: %v\n%s", err, cmp.Diff(want, as))
	}
	if n := count(t, s, "SELECT COUNT(*) FROM audit WHERE action = 'job_checkpoint' AND resource_id = 'j1'"); n != 1 {
		t.Errorf("command audit rows %d", n)
	}
	// job_validate of a job not created yet: no artifact, no job needed.
	if _, err := s.WriteJobCommand(ctx, JobCommandWrite{IntentID: "v1", Operation: wire.CommandJobValidate, JobID: "new",
		NodeID: "n2", Payload: json.RawMessage(`{"spec":{}}`), Now: t0}); err != nil {
		t.Errorf("validate command: %v", err)
	}
	if _, err := s.WriteJobCommand(ctx, JobCommandWrite{IntentID: "x", Operation: wire.CommandJobSavepoint, NodeID: "n1",
		Artifact: &Artifact{Kind: wire.ArtifactSavepoint}, Now: t0}); !errors.Is(err, ErrInvalid) {
		t.Errorf("artifact without a job: %v", err)
	}
}
