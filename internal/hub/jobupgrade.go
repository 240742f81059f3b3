package hub

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// stoppedAndConverged is the upgrade precondition: desired stopped and
// in_sync.
func (h *Hub) stoppedAndConverged(js store.JobState) error {
	conv := h.jobConvergence(js, h.opts.Now())
	if js.Job.DesiredState == "stopped" && conv.Value == wire.ConvergenceInSync {
		return nil
	}
	e := httpapi.Conflict(CodeJobMustBeStopped, "the job must be stopped and converged first: set its desired state to stopped (with a savepoint) and wait for in_sync")
	e.Details = map[string]any{"desired_state": js.Job.DesiredState, "convergence": conv.Value}
	return e
}

// artifactInfos are the completed artifacts of a job as the restore choice
// sees them, and the savepoint taken at the stop that is the job's latest
// desired intent (nil: none).
func (h *Hub) artifactInfos(ctx context.Context, js store.JobState) ([]reconcile.ArtifactInfo, *reconcile.ArtifactInfo, error) {
	arts, err := h.st.ListArtifacts(ctx, js.Job.ID, "")
	if err != nil {
		return nil, nil, err
	}
	var out []reconcile.ArtifactInfo
	var atStop *reconcile.ArtifactInfo
	for _, a := range arts {
		if a.State != wire.ArtifactCompleted {
			continue
		}
		info := reconcile.ArtifactInfo{Kind: a.Kind, ID: a.ID, JobVersion: a.JobVersion, FormatVersion: a.FormatVersion,
			MaxParallelism: a.MaxParallelism, StatefulOperators: a.StatefulOperators, CompletedAt: a.CompletedAt.Time}
		out = append(out, info)
		if a.Kind == wire.ArtifactSavepoint && js.Latest != nil && a.OperationID == js.Latest.ID && atStop == nil {
			atStop = &info
		}
	}
	return out, atStop, nil
}

func (h *Hub) postUpgrade(w http.ResponseWriter, r *http.Request) error {
	var body wire.JobUpgradeRequest
	if err := httpapi.DecodeJSON(r, &body, MaxBodyBytes); err != nil {
		return err
	}
	var probs []httpapi.FieldProblem
	if !slices.Contains([]string{wire.UpgradeStateless, wire.UpgradeSavepoint, wire.UpgradeLastState}, body.Mode) {
		probs = append(probs, httpapi.FieldProblem{Path: "mode", Message: "must be stateless, savepoint or last_state"})
	}
	if body.DesiredState != "" && body.DesiredState != "running" && body.DesiredState != "stopped" {
		probs = append(probs, httpapi.FieldProblem{Path: "desired_state", Message: "must be running or stopped"})
	}
	if body.Savepoint != nil && body.Mode != wire.UpgradeSavepoint {
		probs = append(probs, httpapi.FieldProblem{Path: "savepoint_id", Message: "only with mode savepoint"})
	}
	if body.MaxAgeMS < 0 || (body.MaxAgeMS > 0 && body.Mode != wire.UpgradeLastState) {
		probs = append(probs, httpapi.FieldProblem{Path: "max_age_ms", Message: "a positive age, only with mode last_state"})
	}
	m, sp := h.materializeJob(body.Spec)
	probs = append(probs, sp...)
	ctx := r.Context()
	js, err := h.st.GetJobState(ctx, r.PathValue("id"))
	if err != nil {
		return problemFor(err, aJob)
	}
	if m != nil && m.job.ID != js.Job.ID {
		probs = append(probs, httpapi.FieldProblem{Path: "spec.id", Message: "must be the job's id " + quote(js.Job.ID)})
	}
	if len(probs) > 0 {
		return httpapi.Validation(probs)
	}
	versions, err := h.st.JobVersions(ctx, js.Job.ID)
	if err != nil {
		return problemFor(err, aJob)
	}
	if high := versions[len(versions)-1].Version; m.job.Version <= high {
		return httpapi.Validation([]httpapi.FieldProblem{{Path: "spec.version", Message: "must be greater than the job's highest version " + strconv.Itoa(high)}})
	}
	if err := h.stoppedAndConverged(js); err != nil {
		return err
	}
	arts, atStop, err := h.artifactInfos(ctx, js)
	if err != nil {
		return problemFor(err, anyResource)
	}
	choice, err := reconcile.ChooseRestore(reconcile.RestoreInput{Mode: body.Mode, Strict: body.Strict, Savepoint: body.Savepoint,
		MaxAge: time.Duration(body.MaxAgeMS) * time.Millisecond, Now: h.opts.Now(), StopSavepoint: atStop, Artifacts: arts,
		Target: reconcile.ShapeOf(m.plan)})
	if err != nil {
		return problemFor(err, anyResource)
	}
	restore := &wire.JobRestore{Recovery: wire.RecoveryNone}
	up := &wire.JobUpgrade{UpgradeID: h.opts.NewID(), JobID: js.Job.ID, FromVersion: js.Job.Version, ToVersion: m.job.Version,
		Mode: body.Mode, Strict: body.Strict, Fallback: choice.Fallback, State: wire.UpgradeApplied}
	if a := choice.Restore; a != nil {
		up.Restore = &wire.ArtifactRef{Kind: a.Kind, ID: a.ID}
		restore = &wire.JobRestore{Recovery: wire.RecoveryArtifact, Artifact: up.Restore}
	}
	v := store.JobVersion{JobID: js.Job.ID, Version: m.job.Version, Spec: body.Spec, Plan: m.explain, UpgradeID: up.UpgradeID}
	jw := jobWrite{JobWrite: store.JobWrite{JobID: js.Job.ID, Version: v.Version, NewVersion: &v}, upgrade: up}
	return h.writeJob(w, r, h.withStart(jw, body.DesiredState, v, restore))
}

// withStart finishes an upgrade or rollback write: started at once
// (desired running) from restore, or left stopped with restore kept for
// the next start.
func (h *Hub) withStart(jw jobWrite, desired string, v store.JobVersion, restore *wire.JobRestore) jobWrite {
	jw.SetRestore = true
	if desired == "running" {
		jw.State, jw.Operation, jw.payload = "running", wire.CommandJobStart, startPayload(v, restore)
		return jw
	}
	jw.State, jw.Operation, jw.payload, jw.Restore = "stopped", wire.CommandJobStop, stopPayload(v.Version, false), restore
	return jw
}

func (h *Hub) postRollback(w http.ResponseWriter, r *http.Request) error {
	var body jobRollbackRequest
	if _, err := httpapi.DecodeOptionalJSON(r, &body, MaxBodyBytes); err != nil {
		return err
	}
	if body.DesiredState != "" && body.DesiredState != "running" && body.DesiredState != "stopped" {
		return httpapi.Validation([]httpapi.FieldProblem{{Path: "desired_state", Message: "must be running or stopped"}})
	}
	ctx := r.Context()
	js, err := h.st.GetJobState(ctx, r.PathValue("id"))
	if err != nil {
		return problemFor(err, aJob)
	}
	up, err := h.st.GetUpgrade(ctx, js.Job.ID, r.PathValue("upgrade_id"))
	if err != nil {
		return problemFor(err, anUpgrade)
	}
	if up.State == wire.UpgradeRolledBack {
		return httpapi.Conflict(httpapi.CodeConflict, "that upgrade was already rolled back")
	}
	if js.Job.Version != up.ToVersion {
		return httpapi.Conflict(httpapi.CodeConflict, "the job no longer runs the version that upgrade made; roll back the newest upgrade first")
	}
	if err := h.stoppedAndConverged(js); err != nil {
		return err
	}
	prev, err := h.st.GetJobVersion(ctx, js.Job.ID, up.FromVersion)
	if err != nil {
		return problemFor(err, anyResource)
	}
	m, probs := h.materializeJob(prev.Spec)
	if len(probs) > 0 {
		return httpapi.Validation(probs)
	}
	arts, atStop, err := h.artifactInfos(ctx, js)
	if err != nil {
		return problemFor(err, anyResource)
	}
	// Back to the previous version from a compatible savepoint: the one
	// taken at this stop when the old version can read it, else the newest
	// the old version can read; a job whose old version keeps no state
	// starts empty when there is none.
	in := reconcile.RestoreInput{Mode: wire.UpgradeSavepoint, Now: h.opts.Now(), StopSavepoint: atStop, Artifacts: arts, Target: reconcile.ShapeOf(m.plan)}
	choice, err := reconcile.ChooseRestore(in)
	var re *reconcile.RestoreError
	if errors.As(err, &re) && re.Code == reconcile.CodeStateFormatIncompatible && atStop != nil {
		in.StopSavepoint = nil
		choice, err = reconcile.ChooseRestore(in)
	}
	restore := &wire.JobRestore{Recovery: wire.RecoveryNone}
	switch {
	case err == nil && choice.Restore != nil:
		restore = &wire.JobRestore{Recovery: wire.RecoveryArtifact, Artifact: &wire.ArtifactRef{Kind: choice.Restore.Kind, ID: choice.Restore.ID}}
	case errors.As(err, &re) && re.Code == reconcile.CodeCheckpointNotFound && len(statefulOperators(m.plan)) == 0:
	case err != nil:
		return problemFor(err, anyResource)
	}
	jw := jobWrite{JobWrite: store.JobWrite{JobID: js.Job.ID, Version: up.FromVersion, RollBack: up.UpgradeID}}
	return h.writeJob(w, r, h.withStart(jw, body.DesiredState, prev, restore))
}

func (h *Hub) getUpgrades(w http.ResponseWriter, r *http.Request) error {
	page, size, err := httpapi.ParsePage(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if _, err := h.st.GetJob(ctx, r.PathValue("id")); err != nil {
		return problemFor(err, aJob)
	}
	ups, err := h.st.Upgrades(ctx, r.PathValue("id"))
	if err != nil {
		return problemFor(err, anyResource)
	}
	return httpapi.WriteJSON(w, http.StatusOK, httpapi.Paginate(ups, page, size))
}
