package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
	"github.com/google/go-cmp/cmp"
)

// reported is the completed artifact a node reports.
func reported(kind string, id int64) Artifact {
	return Artifact{JobID: "j1", Kind: kind, ID: id, JobVersion: 1, FormatVersion: 3, MaxParallelism: 128,
		StatefulOperators: []string{"count"}, Location: "s3://b/j1/" + kind, Bytes: 4096, State: wire.ArtifactCompleted,
		CreatedAt: wire.At(t0), CompletedAt: wire.At(t0.Add(time.Second))}
}

// command writes a job command with a pending artifact record.
func command(t *testing.T, s *Store, id, kind string) {
	t.Helper()
	op := wire.CommandJobCheckpoint
	if kind == wire.ArtifactSavepoint {
		op = wire.CommandJobSavepoint
	}
	if _, err := s.WriteJobCommand(context.Background(), JobCommandWrite{IntentID: id, Operation: op, JobID: "j1", NodeID: "n1",
		Generation: 1, Payload: json.RawMessage(`{}`), Artifact: &Artifact{Kind: kind}, Now: t0, ExpiresAt: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
}

func completions(t *testing.T, s *Store) []wire.Event {
	t.Helper()
	var out []wire.Event
	for _, k := range []string{wire.EventCheckpointCompleted, wire.EventSavepointCompleted} {
		ev, err := s.ListEvents(context.Background(), EventFilter{Kind: k}, Paging{1, 100})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev.Items...)
	}
	return out
}

// TestArtifactCompletion runs the ways an artifact record completes or
// fails: exactly one completion event per artifact, however many times
// and in whichever order the command result and the observations report
// it.
func TestArtifactCompletion(t *testing.T) { backends(t, testArtifactCompletion) }

func testArtifactCompletion(t *testing.T) {
	now := t0.Add(time.Minute)
	failure := &wire.Failure{Class: "permanent", Code: "checkpoint_failed", Message: "barrier timed out"}
	tests := []struct {
		name string
		run  func(t *testing.T, s *Store) error
		want []Artifact
	}{
		{
			name: "command result then observation",
			run: func(t *testing.T, s *Store) error {
				command(t, s, "op1", wire.ArtifactCheckpoint)
				a := reported(wire.ArtifactCheckpoint, 5)
				if err := s.FinishJobCommand(context.Background(), "op1", &a, nil, now); err != nil {
					return err
				}
				return s.RecordArtifacts(context.Background(), []Artifact{a, a}, now)
			},
			want: []Artifact{withOp(reported(wire.ArtifactCheckpoint, 5), "op1", wire.TriggerOperator, "n1")},
		},
		{
			name: "observation then command result",
			run: func(t *testing.T, s *Store) error {
				command(t, s, "op1", wire.ArtifactSavepoint)
				a := reported(wire.ArtifactSavepoint, 2)
				a.NodeID = "n1"
				if err := s.RecordArtifacts(context.Background(), []Artifact{a}, now); err != nil {
					return err
				}
				return s.FinishJobCommand(context.Background(), "op1", &a, nil, now)
			},
			want: []Artifact{withOp(reported(wire.ArtifactSavepoint, 2), "op1", wire.TriggerOperator, "n1")},
		},
		{
			name: "observation naming the command",
			run: func(t *testing.T, s *Store) error {
				command(t, s, "op1", wire.ArtifactCheckpoint)
				a := reported(wire.ArtifactCheckpoint, 5)
				a.OperationID = "op1"
				return s.RecordArtifacts(context.Background(), []Artifact{a}, now)
			},
			want: []Artifact{withOp(reported(wire.ArtifactCheckpoint, 5), "op1", wire.TriggerOperator, "n1")},
		},
		{
			name: "failed, then a late result",
			run: func(t *testing.T, s *Store) error {
				command(t, s, "op1", wire.ArtifactCheckpoint)
				if err := s.FinishJobCommand(context.Background(), "op1", nil, failure, now); err != nil {
					return err
				}
				a := reported(wire.ArtifactCheckpoint, 5)
				return s.FinishJobCommand(context.Background(), "op1", &a, nil, now)
			},
			want: []Artifact{{JobID: "j1", Kind: wire.ArtifactCheckpoint, StatefulOperators: []string{}, State: wire.ArtifactFailed,
				Trigger: wire.TriggerOperator, NodeID: "n1", OperationID: "op1", Failure: failure, CreatedAt: wire.At(t0)}},
		},
		{
			name: "savepoint of a stop, without a record",
			run: func(t *testing.T, s *Store) error {
				a := reported(wire.ArtifactSavepoint, 3)
				a.Trigger, a.NodeID = wire.TriggerStop, "n1"
				if err := s.FinishJobCommand(context.Background(), "stop1", &a, nil, now); err != nil {
					return err
				}
				return s.FinishJobCommand(context.Background(), "stop2", nil, failure, now)
			},
			want: []Artifact{withOp(reported(wire.ArtifactSavepoint, 3), "stop1", wire.TriggerStop, "n1")},
		},
		{
			name: "periodic checkpoints, newest first",
			run: func(t *testing.T, s *Store) error {
				command(t, s, "op1", wire.ArtifactCheckpoint)
				a, b := reported(wire.ArtifactCheckpoint, 1), reported(wire.ArtifactCheckpoint, 2)
				a.Trigger, b.Trigger = wire.TriggerPeriodic, wire.TriggerPeriodic
				return s.RecordArtifacts(context.Background(), []Artifact{a, b, a}, now)
			},
			want: []Artifact{
				{JobID: "j1", Kind: wire.ArtifactCheckpoint, StatefulOperators: []string{}, State: wire.ArtifactPending,
					Trigger: wire.TriggerOperator, NodeID: "n1", OperationID: "op1", CreatedAt: wire.At(t0)},
				withOp(reported(wire.ArtifactCheckpoint, 2), "", wire.TriggerPeriodic, ""),
				withOp(reported(wire.ArtifactCheckpoint, 1), "", wire.TriggerPeriodic, ""),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, _ := openTest(t)
			if err := tc.run(t, s); err != nil {
				t.Fatal(err)
			}
			got, err := s.ListArtifacts(ctx, "j1", "")
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("artifacts (-want +got):\n%s", d)
			}
			var done []Artifact
			for _, a := range tc.want {
				if a.State == wire.ArtifactCompleted {
					done = append(done, a)
				}
			}
			evs := completions(t, s)
			if len(evs) != len(done) {
				t.Fatalf("%d completion events, want %d: %+v", len(evs), len(done), evs)
			}
			for _, e := range evs {
				if e.ResourceID != "j1" || e.Data["location"] == "" || e.Data["format_version"] != 3.0 {
					t.Errorf("event %+v", e)
				}
			}
		})
	}
}

func withOp(a Artifact, op, trigger, node string) Artifact {
	a.OperationID, a.Trigger, a.NodeID = op, trigger, node
	return a
}

func TestArtifactEvent(t *testing.T) { backends(t, testArtifactEvent) }

func testArtifactEvent(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	command(t, s, "op1", wire.ArtifactSavepoint)
	a := reported(wire.ArtifactSavepoint, 9)
	if err := s.FinishJobCommand(ctx, "op1", &a, nil, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	evs := completions(t, s)
	if len(evs) != 1 {
		t.Fatalf("events %+v", evs)
	}
	e := evs[0]
	want := map[string]any{"kind": "savepoint", "id": 9.0, "job_version": 1.0, "format_version": 3.0, "bytes": 4096.0,
		"location": "s3://b/j1/savepoint", "trigger": "operator"}
	if e.Kind != wire.EventSavepointCompleted || e.NodeID != "n1" || e.OperationID != "op1" || !e.OccurredAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("event %+v", e)
	}
	if d := cmp.Diff(want, e.Data); d != "" {
		t.Errorf("event data (-want +got):\n%s", d)
	}
	if got, _ := s.ListArtifacts(ctx, "j1", wire.ArtifactCheckpoint); len(got) != 0 {
		t.Errorf("checkpoints %+v, want none", got)
	}
}

func TestSweepArtifacts(t *testing.T) { backends(t, testSweepArtifacts) }

func testSweepArtifacts(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	command(t, s, "pending-old", wire.ArtifactCheckpoint)
	command(t, s, "failed-old", wire.ArtifactCheckpoint)
	command(t, s, "completed-old", wire.ArtifactCheckpoint)
	_ = s.FinishJobCommand(ctx, "failed-old", nil, &wire.Failure{Code: "x"}, t0)
	a := reported(wire.ArtifactCheckpoint, 1)
	_ = s.FinishJobCommand(ctx, "completed-old", &a, nil, t0)
	if _, err := s.WriteJobCommand(ctx, JobCommandWrite{IntentID: "pending-new", Operation: wire.CommandJobSavepoint, JobID: "j1",
		NodeID: "n1", Artifact: &Artifact{Kind: wire.ArtifactSavepoint}, Now: t0.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Sweep(ctx, t0.Add(25*time.Hour))
	if err != nil || got.Artifacts != 2 {
		t.Fatalf("sweep = %+v, %v; want 2 artifact records", got, err)
	}
	as, _ := s.ListArtifacts(ctx, "j1", "")
	var ops []string
	for _, a := range as {
		ops = append(ops, a.OperationID)
	}
	if d := cmp.Diff([]string{"pending-new", "completed-old"}, ops); d != "" {
		t.Errorf("records kept (-want +got):\n%s", d)
	}
}
