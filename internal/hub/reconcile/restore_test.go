package reconcile

import (
	"errors"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/google/go-cmp/cmp"
)

func TestChooseRestore(t *testing.T) {
	target := PlanShape{
		FormatVersion: 1, MaxParallelism: 128,
		Operators: map[string]bool{"src": false, "clean": false, "agg": true},
		Kinds:     map[string]string{"src": "source", "clean": "map", "agg": "aggregate"},
	}
	art := func(kind string, id int64, age time.Duration) ArtifactInfo {
		return ArtifactInfo{Kind: kind, ID: id, JobVersion: 1, FormatVersion: 1, MaxParallelism: 128,
			StatefulOperators: []string{"agg"}, CompletedAt: t0.Add(-age)}
	}
	with := func(a ArtifactInfo, f func(*ArtifactInfo)) ArtifactInfo { f(&a); return a }
	sp := func(id int64) ArtifactInfo { return art("savepoint", id, time.Hour) }
	cp := func(id int64, age time.Duration) ArtifactInfo { return art("checkpoint", id, age) }
	format2 := func(a *ArtifactInfo) { a.FormatVersion = 2 }
	gone := func(a *ArtifactInfo) { a.StatefulOperators = []string{"agg", "dedupe"} }
	id := func(n int64) *int64 { return &n }
	stop := with(sp(3), func(a *ArtifactInfo) { a.JobVersion = 2 })
	arts := []ArtifactInfo{cp(7, time.Minute), sp(5), cp(9, 2*time.Minute), sp(2), cp(8, time.Second)}
	incompat := &RestoreError{Code: CodeStateFormatIncompatible, Field: "format_version", Have: "2", Want: "1"}

	tests := []struct {
		name string
		in   RestoreInput
		want RestoreChoice
		err  *RestoreError // Message is not compared
	}{
		{"stateless starts empty", RestoreInput{Mode: "stateless", Artifacts: arts, StopSavepoint: &stop}, RestoreChoice{}, nil},
		{"stateless ignores a named savepoint", RestoreInput{Mode: "stateless", Savepoint: id(404), Strict: true}, RestoreChoice{}, nil},
		{"named savepoint", RestoreInput{Mode: "savepoint", Savepoint: id(2), StopSavepoint: &stop, Artifacts: arts},
			RestoreChoice{Restore: ptr(sp(2))}, nil},
		{"named savepoint, strict", RestoreInput{Mode: "savepoint", Strict: true, Savepoint: id(5), Artifacts: arts},
			RestoreChoice{Restore: ptr(sp(5))}, nil},
		{"named savepoint missing", RestoreInput{Mode: "savepoint", Savepoint: id(4), StopSavepoint: &stop, Artifacts: arts},
			RestoreChoice{}, &RestoreError{Code: CodeCheckpointNotFound}},
		{"named id is a checkpoint", RestoreInput{Mode: "savepoint", Savepoint: id(7), Artifacts: arts},
			RestoreChoice{}, &RestoreError{Code: CodeCheckpointNotFound}},
		{"named savepoint incompatible", RestoreInput{Mode: "savepoint", Savepoint: id(5), Artifacts: []ArtifactInfo{sp(6), with(sp(5), format2)}},
			RestoreChoice{}, incompat},
		{"stop savepoint", RestoreInput{Mode: "savepoint", StopSavepoint: &stop, Artifacts: arts},
			RestoreChoice{Restore: ptr(stop)}, nil},
		{"stop savepoint, strict", RestoreInput{Mode: "savepoint", Strict: true, StopSavepoint: &stop},
			RestoreChoice{Restore: ptr(stop)}, nil},
		{"stop savepoint incompatible: no fallback", RestoreInput{Mode: "savepoint", StopSavepoint: ptr(with(stop, gone)), Artifacts: arts},
			RestoreChoice{}, &RestoreError{Code: CodeStateFormatIncompatible, Field: "operators", Have: `state of operator "dedupe"`, Want: `no operator "dedupe"`}},
		{"strict without a stop savepoint", RestoreInput{Mode: "savepoint", Strict: true, Artifacts: arts},
			RestoreChoice{}, &RestoreError{Code: CodeSavepointRequired}},
		{"fallback to the newest savepoint", RestoreInput{Mode: "savepoint", Artifacts: arts},
			RestoreChoice{Restore: ptr(sp(5)), Fallback: true}, nil},
		{"fallback skips incompatible savepoints", RestoreInput{Mode: "savepoint", Artifacts: append([]ArtifactInfo{with(sp(6), format2)}, arts...)},
			RestoreChoice{Restore: ptr(sp(5)), Fallback: true}, nil},
		{"fallback, none compatible: the newest's incompatibility", RestoreInput{Mode: "savepoint", Artifacts: []ArtifactInfo{
			with(sp(4), gone), cp(9, 0), with(sp(6), format2)}},
			RestoreChoice{}, incompat},
		{"fallback, no savepoint", RestoreInput{Mode: "savepoint", Artifacts: []ArtifactInfo{cp(9, 0)}},
			RestoreChoice{}, &RestoreError{Code: CodeCheckpointNotFound}},
		{"last_state: newest checkpoint", RestoreInput{Mode: "last_state", Artifacts: arts, Now: t0, StopSavepoint: &stop},
			RestoreChoice{Restore: ptr(cp(9, 2*time.Minute))}, nil},
		{"last_state within max age", RestoreInput{Mode: "last_state", Artifacts: arts, Now: t0, MaxAge: 2 * time.Minute},
			RestoreChoice{Restore: ptr(cp(9, 2*time.Minute))}, nil},
		{"last_state too old", RestoreInput{Mode: "last_state", Artifacts: arts, Now: t0, MaxAge: 90 * time.Second},
			RestoreChoice{}, &RestoreError{Code: CodeCheckpointTooOld}},
		{"last_state too old, strict: no savepoint fallback", RestoreInput{Mode: "last_state", Strict: true, Artifacts: arts, StopSavepoint: &stop, Now: t0, MaxAge: time.Minute},
			RestoreChoice{}, &RestoreError{Code: CodeCheckpointTooOld}},
		{"last_state too old before incompatible", RestoreInput{Mode: "last_state", Artifacts: []ArtifactInfo{with(cp(9, time.Hour), format2)}, Now: t0, MaxAge: time.Minute},
			RestoreChoice{}, &RestoreError{Code: CodeCheckpointTooOld}},
		{"last_state without checkpoints", RestoreInput{Mode: "last_state", Artifacts: []ArtifactInfo{sp(5)}, StopSavepoint: &stop, Now: t0},
			RestoreChoice{}, &RestoreError{Code: CodeCheckpointNotFound}},
		{"last_state incompatible: no older checkpoint tried", RestoreInput{Mode: "last_state", Artifacts: append([]ArtifactInfo{with(cp(10, 0), format2)}, arts...), Now: t0},
			RestoreChoice{}, incompat},
		{"last_state, max parallelism changed", RestoreInput{Mode: "last_state", Artifacts: arts, Now: t0, Target: PlanShape{FormatVersion: 1, MaxParallelism: 256, Operators: map[string]bool{"agg": true}}},
			RestoreChoice{}, &RestoreError{Code: CodeStateFormatIncompatible, Field: "max_parallelism", Have: "128", Want: "256"}},
		{"last_state, operator no longer stateful", RestoreInput{Mode: "last_state", Artifacts: []ArtifactInfo{with(cp(1, 0), func(a *ArtifactInfo) { a.StatefulOperators = []string{"clean"} })}, Now: t0},
			RestoreChoice{}, &RestoreError{Code: CodeStateFormatIncompatible, Field: "operators", Have: `state of operator "clean"`, Want: `operator "clean" as a stateless map`}},
		{"unknown mode", RestoreInput{Mode: "latest", Artifacts: arts},
			RestoreChoice{}, &RestoreError{Code: CodeInvalidMode}},
		{"empty mode", RestoreInput{}, RestoreChoice{}, &RestoreError{Code: CodeInvalidMode}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.in.Target.Operators == nil {
				tc.in.Target = target
			}
			got, err := ChooseRestore(tc.in)
			if tc.err == nil {
				if err != nil {
					t.Fatalf("ChooseRestore: %v", err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Fatalf("ChooseRestore (-want +got):\n%s", diff)
				}
				return
			}
			var re *RestoreError
			if !errors.As(err, &re) {
				t.Fatalf("ChooseRestore = %+v, %v; want a *RestoreError", got, err)
			}
			if re.Message == "" {
				t.Fatalf("RestoreError %+v has no message", re)
			}
			if diff := cmp.Diff(tc.err, re, cmpIgnoreMessage); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(RestoreChoice{}, got); diff != "" {
				t.Fatalf("refused restore still chose (-want +got):\n%s", diff)
			}
		})
	}
}

var cmpIgnoreMessage = cmp.Transformer("noMessage", func(e *RestoreError) RestoreError {
	c := *e
	c.Message = ""
	return c
})

func ptr[T any](v T) *T { return &v }

// The strict savepoint refusal tells the operator what to do.
func TestChooseRestoreStrictMessage(t *testing.T) {
	_, err := ChooseRestore(RestoreInput{Mode: "savepoint", Strict: true})
	const want = "strict: no savepoint was taken at the job's last stop; stop it with a savepoint, or name one"
	if err == nil || err.Error() != want {
		t.Fatalf("ChooseRestore error = %v, want %q", err, want)
	}
}

// The Hub and the node apply the same rule: ShapeOf a plan refuses exactly
// what job.Shape.Restorable refuses.
func TestShapeOf(t *testing.T) {
	p := &job.Plan{FormatVersion: 3, MaxParallelism: 64, Operators: []job.Operator{
		{ID: "src", Kind: "source"}, {ID: "win", Kind: "window", Stateful: true},
	}}
	a := ArtifactInfo{Kind: "checkpoint", ID: 1, FormatVersion: 3, MaxParallelism: 64, StatefulOperators: []string{"win", "src"}}
	_, err := ChooseRestore(RestoreInput{Mode: "last_state", Artifacts: []ArtifactInfo{a}, Target: ShapeOf(p)})
	want := &RestoreError{Code: CodeStateFormatIncompatible, Field: "operators", Have: `state of operator "src"`, Want: `operator "src" as a stateless source`}
	var re *RestoreError
	if !errors.As(err, &re) {
		t.Fatalf("ChooseRestore = %v, want a *RestoreError", err)
	}
	if diff := cmp.Diff(want, re, cmpIgnoreMessage); diff != "" {
		t.Fatalf("error (-want +got):\n%s", diff)
	}
}
