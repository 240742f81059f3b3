package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
	"github.com/google/go-cmp/cmp"
)

func obs(job, state string, gen int64) ObservedJob {
	return ObservedJob{JobID: job, State: state, Generation: gen, Version: 1, ActionID: "act-1",
		Detail: json.RawMessage(`{"id":"` + job + `","state":"` + state + `"}`)}
}

// TestApplyJobReportOrdering sends job observations of one node in and
// out of order: a body not newer than the last (same boot, seq not
// greater) writes nothing; a new boot is accepted whatever its seq; only
// changes make events.
func TestApplyJobReportOrdering(t *testing.T) { backends(t, testApplyJobReportOrdering) }

func testApplyJobReportOrdering(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if err := s.RegisterNode(ctx, reg("n1", "tok", t0)); err != nil {
		t.Fatal(err)
	}
	failed := obs("j1", wire.JobFailed, 1)
	failed.LastError, failed.LastErrorAt = "source gone", t0
	tests := []struct {
		name      string
		boot      string
		seq       int64
		jobs      []ObservedJob
		wantStale bool
		changed   []string
		wantJ1    string // j1's observed state afterwards
	}{
		{"first", "b1", 1, []ObservedJob{obs("j1", wire.JobStarting, 1), obs("j2", wire.JobRunning, 3)}, false, []string{"j1", "j2"}, wire.JobStarting},
		{"same seq", "b1", 1, []ObservedJob{obs("j1", wire.JobRunning, 1)}, true, nil, wire.JobStarting},
		{"older seq", "b1", 0, []ObservedJob{obs("j1", wire.JobRunning, 1)}, true, nil, wire.JobStarting},
		{"newer", "b1", 2, []ObservedJob{obs("j1", wire.JobRunning, 1)}, false, []string{"j1"}, wire.JobRunning},
		{"unchanged", "b1", 3, []ObservedJob{obs("j1", wire.JobRunning, 1)}, false, nil, wire.JobRunning},
		{"error", "b1", 4, []ObservedJob{failed}, false, []string{"j1"}, wire.JobFailed},
		{"new boot, low seq", "b2", 1, []ObservedJob{obs("j1", wire.JobRecovering, 1)}, false, []string{"j1"}, wire.JobRecovering},
		{"old boot again", "b1", 9, []ObservedJob{obs("j1", wire.JobRunning, 1)}, false, []string{"j1"}, wire.JobRunning},
	}
	events := 0
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := t0.Add(time.Duration(i) * time.Second)
			res, err := s.ApplyJobReport(ctx, JobReport{NodeID: "n1", BootID: tc.boot, Seq: tc.seq, Jobs: tc.jobs, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if res.Stale != tc.wantStale || !cmp.Equal(tc.changed, res.Changed) {
				t.Errorf("= %+v, want stale %v changed %v", res, tc.wantStale, tc.changed)
			}
			events += len(tc.changed)
			ev, _ := s.ListEvents(ctx, EventFilter{Kind: wire.EventJobStateChanged}, Paging{1, 100})
			if ev.Total != events {
				t.Errorf("%d job_state_changed events, want %d", ev.Total, events)
			}
			all, _ := s.ObservedJobs(ctx)
			if len(all["n1"]) != 2 || all["n1"][0].JobID != "j1" || all["n1"][0].State != tc.wantJ1 {
				t.Errorf("observed %+v, want j1 %s and j2 kept", all["n1"], tc.wantJ1)
			}
		})
	}
	ev, _ := s.ListEvents(ctx, EventFilter{Kind: wire.EventJobStateChanged, ResourceID: "j1"}, Paging{1, 100})
	// Newest first: the last change, from recovering (boot b2) to running.
	want := map[string]any{"state": "running", "previous": "recovering", "generation": 1.0, "version": 1.0}
	if d := cmp.Diff(want, ev.Items[0].Data); d != "" || ev.Items[0].NodeID != "n1" {
		t.Errorf("last event %+v (-want +got):\n%s", ev.Items[0], d)
	}
	if _, err := s.ApplyJobReport(ctx, JobReport{NodeID: "nx", BootID: "b", Seq: 1, Now: t0}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown node: %v", err)
	}
	// Job observations are ordered on their own: a report with a lower
	// seq is still accepted.
	if rr, err := s.ApplyReport(ctx, Report{NodeID: "n1", BootID: "b1", Seq: 1, Now: t0}); err != nil || rr.Stale {
		t.Errorf("report after job observations = %+v, %v", rr, err)
	}
}

// TestApplyJobReportRows checks the stored observation, the artifacts of
// a body recorded with it, and that ResourceStates, GetResourceState and
// the job views show the observation at the job's node only.
func TestApplyJobReportRows(t *testing.T) { backends(t, testApplyJobReportRows) }

func testApplyJobReportRows(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	for _, n := range []string{"n1", "n2"} {
		if err := s.RegisterNode(ctx, reg(n, "tok-"+n, t0)); err != nil {
			t.Fatal(err)
		}
	}
	mustWriteJob(t, s, jobNew("j1", "n1", t0))
	if _, err := s.WriteDesired(ctx, dw("st", "n1", "s1", t0)); err != nil {
		t.Fatal(err)
	}
	o := obs("j1", wire.JobRunning, 1)
	o.LastError, o.LastErrorAt = "was slow", t0
	cp := reported(wire.ArtifactCheckpoint, 4)
	now := t0.Add(time.Minute)
	res, err := s.ApplyJobReport(ctx, JobReport{NodeID: "n1", BootID: "b", Seq: 1, Jobs: []ObservedJob{o},
		Artifacts: []Artifact{cp, cp}, Now: now})
	if err != nil || res.Stale {
		t.Fatalf("= %+v, %v", res, err)
	}
	want := o
	want.NodeID, want.UpdatedAt = "n1", now
	rs, err := s.ResourceStates(ctx, "")
	if err != nil || len(rs) != 2 {
		t.Fatalf("resource states %+v, %v", rs, err)
	}
	job, stream := rs[0], rs[1]
	if job.Kind != KindJob || job.Observed != nil || job.ObservedJob == nil || stream.ObservedJob != nil {
		t.Fatalf("resource states %+v %+v", job, stream)
	}
	if d := cmp.Diff(want, *job.ObservedJob); d != "" {
		t.Errorf("ResourceStates observed job (-want +got):\n%s", d)
	}
	one, err := s.GetResourceState(ctx, "n1", KindJob, "j1")
	if err != nil || one.ObservedJob == nil || !cmp.Equal(want, *one.ObservedJob) {
		t.Errorf("GetResourceState = %+v, %v", one, err)
	}
	st, err := s.GetJobState(ctx, "j1")
	if err != nil || st.Observed == nil || !cmp.Equal(want, *st.Observed) {
		t.Errorf("GetJobState = %+v, %v", st, err)
	}
	if got := completions(t, s); len(got) != 1 || got[0].NodeID != "n1" {
		t.Errorf("completion events %+v", got)
	}
	if as, _ := s.ListArtifacts(ctx, "j1", wire.ArtifactCheckpoint); len(as) != 1 || as[0].NodeID != "n1" || as[0].ID != 4 {
		t.Errorf("artifacts %+v", as)
	}
	// After a move to n2, n1's observation is no longer the job's.
	w := jobSet("m", "j1", wire.JobRunning, now)
	w.NodeID, w.FenceIntentID = "n2", "f"
	mustWriteJob(t, s, w)
	sts, err := s.JobStates(ctx)
	if err != nil || len(sts) != 1 || sts[0].Observed != nil || sts[0].Latest.ID != "m" || sts[0].Version.Version != 1 {
		t.Errorf("job states after the move %+v, %v", sts, err)
	}
	if r, _ := s.GetResourceState(ctx, "n1", KindJob, "j1"); r.ObservedJob == nil || r.State != wire.JobStopped {
		t.Errorf("old node's resource state %+v", r)
	}
	bad := []JobReport{
		{NodeID: "n1", BootID: "b", Seq: 5, Jobs: []ObservedJob{{State: "running"}}, Now: now},
		{NodeID: "n1", BootID: "b", Seq: 5, Artifacts: []Artifact{{JobID: "j1", Kind: "snapshot", ID: 1}}, Now: now},
		{NodeID: "n1", BootID: "b", Seq: 5, Jobs: make([]ObservedJob, wire.MaxObservedJobs+1), Now: now},
	}
	for i, r := range bad {
		if _, err := s.ApplyJobReport(ctx, r); !errors.Is(err, ErrInvalid) {
			t.Errorf("bad body %d: %v", i, err)
		}
	}
}

// TestObservedJobsBounded: a node naming new job ids in every body keeps
// at most maxNodeObservedJobs rows and maxNodeObservedJobsBytes of detail,
// the newest kept; a quiet body writes no event.
func TestObservedJobsBounded(t *testing.T) { backends(t, testObservedJobsBounded) }

func testObservedJobsBounded(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if err := s.RegisterNode(ctx, reg("n1", "tok", t0)); err != nil {
		t.Fatal(err)
	}
	events := count(t, s, "SELECT COUNT(*) FROM events")
	apply := func(seq int, jobs []ObservedJob) {
		t.Helper()
		if _, err := s.ApplyJobReport(ctx, JobReport{NodeID: "n1", BootID: "b", Seq: int64(seq), Jobs: jobs, Quiet: true,
			Now: t0.Add(time.Duration(seq) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	for b := range 3 {
		var jobs []ObservedJob
		for i := range wire.MaxObservedJobs {
			jobs = append(jobs, obs(fmt.Sprintf("j%d-%04d", b, i), wire.JobRunning, 1))
		}
		apply(b+1, jobs)
	}
	if rows, newest := count(t, s, "SELECT COUNT(*) FROM observed_jobs WHERE node_id = 'n1'"),
		count(t, s, "SELECT COUNT(*) FROM observed_jobs WHERE node_id = 'n1' AND job_id LIKE 'j2-%'"); rows != maxNodeObservedJobs || newest != rows {
		t.Fatalf("%d rows, %d of the newest body", rows, newest)
	}
	// Large details: the newest within the byte bound stay.
	var jobs []ObservedJob
	for i := range 16 {
		o := obs(fmt.Sprintf("big-%02d", i), wire.JobRunning, 1)
		o.Detail = json.RawMessage(`{"pad":"` + strings.Repeat("x", 600<<10) + `"}`)
		jobs = append(jobs, o)
	}
	apply(4, jobs)
	bytes := count(t, s, "SELECT SUM(LENGTH(detail) + LENGTH(last_error)) FROM observed_jobs WHERE node_id = 'n1'")
	if bytes > maxNodeObservedJobsBytes || count(t, s, "SELECT COUNT(*) FROM observed_jobs WHERE job_id = 'big-00'") != 1 {
		t.Fatalf("%d bytes of detail kept, or the newest row went", bytes)
	}
	if got := count(t, s, "SELECT COUNT(*) FROM events"); got != events {
		t.Fatalf("quiet bodies wrote %d events", got-events)
	}
}
