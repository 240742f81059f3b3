package reconcile

import (
	"fmt"
	"time"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/wire"
)

// Restore-choice failure codes (the problem codes of POST upgrades).
const (
	CodeCheckpointNotFound      = "checkpoint_not_found"
	CodeStateFormatIncompatible = "state_format_incompatible"
	CodeSavepointRequired       = "savepoint_required"
	CodeCheckpointTooOld        = "checkpoint_too_old"
	CodeInvalidMode             = "invalid_mode"
)

// PlanShape is what restoring needs of the target version's plan: its state
// format version, max parallelism, and each operator id with whether it
// keeps state. It is job.Shape, so that the Hub's choice and the node's
// restore apply one compatibility rule (job.Shape.Restorable).
type PlanShape = job.Shape

// ShapeOf returns the shape of the target version's plan.
func ShapeOf(p *job.Plan) PlanShape { return p.Shape() }

// RestoreInput is one upgrade's (or rollback's) restore decision input.
// Mode is stateless, savepoint or last_state. Savepoint names a savepoint
// id. StopSavepoint is the savepoint taken at the job's last stop (nil:
// none was). Artifacts are the job's completed artifacts, any order.
type RestoreInput struct {
	Mode          string
	Strict        bool
	Savepoint     *int64
	MaxAge        time.Duration
	Now           time.Time
	StopSavepoint *ArtifactInfo
	Artifacts     []ArtifactInfo
	Target        PlanShape
}

// RestoreChoice is the artifact to restore (nil: start empty) and whether it
// is a fallback (not the savepoint taken at the stop).
type RestoreChoice struct {
	Restore  *ArtifactInfo
	Fallback bool
}

// RestoreError is a refused restore: Code is one of the Code* above;
// Field, Have and Want name the incompatibility for
// CodeStateFormatIncompatible.
type RestoreError struct {
	Code    string
	Message string
	Field   string
	Have    string
	Want    string
}

func (e *RestoreError) Error() string { return e.Message }

// ChooseRestore decides what an upgrade restores; a refusal is a
// *RestoreError.
//
//	stateless                                     start empty, whatever else is given
//	savepoint, Savepoint named                    that savepoint, or checkpoint_not_found
//	savepoint, a savepoint was taken at the stop  StopSavepoint
//	savepoint, strict                             savepoint_required
//	savepoint                                     newest compatible savepoint (Fallback),
//	                                              the newest's incompatibility when none is,
//	                                              checkpoint_not_found when there is none
//	last_state                                    newest checkpoint, or checkpoint_not_found;
//	                                              checkpoint_too_old past MaxAge (> 0)
//	any other mode                                invalid_mode
//
// Strict changes nothing for last_state: it never falls back to a
// savepoint. Every artifact chosen must be restorable into Target
// (job.Shape.Restorable), else state_format_incompatible; a checkpoint too
// old is refused as too old before its compatibility is looked at. Newest
// means the highest id.
func ChooseRestore(in RestoreInput) (RestoreChoice, error) {
	switch in.Mode {
	case wire.UpgradeStateless:
		return RestoreChoice{}, nil
	case wire.UpgradeSavepoint:
		return chooseSavepoint(in)
	case wire.UpgradeLastState:
		cp := newest(in.Artifacts, wire.ArtifactCheckpoint)
		if cp == nil {
			return RestoreChoice{}, &RestoreError{Code: CodeCheckpointNotFound, Message: "last_state: the job has no completed checkpoint"}
		}
		if age := in.Now.Sub(cp.CompletedAt); in.MaxAge > 0 && age > in.MaxAge {
			return RestoreChoice{}, &RestoreError{Code: CodeCheckpointTooOld,
				Message: fmt.Sprintf("last_state: the newest checkpoint (%d) is %s old, more than max_age_ms %d", cp.ID, age, in.MaxAge.Milliseconds())}
		}
		return restorable(cp, in.Target, false)
	}
	return RestoreChoice{}, &RestoreError{Code: CodeInvalidMode, Message: fmt.Sprintf("unknown upgrade mode %q: want stateless, savepoint or last_state", in.Mode)}
}

func chooseSavepoint(in RestoreInput) (RestoreChoice, error) {
	switch {
	case in.Savepoint != nil:
		for i, a := range in.Artifacts {
			if a.Kind == wire.ArtifactSavepoint && a.ID == *in.Savepoint {
				return restorable(&in.Artifacts[i], in.Target, false)
			}
		}
		return RestoreChoice{}, &RestoreError{Code: CodeCheckpointNotFound, Message: fmt.Sprintf("the job has no completed savepoint %d", *in.Savepoint)}
	case in.StopSavepoint != nil:
		return restorable(in.StopSavepoint, in.Target, false)
	case in.Strict:
		return RestoreChoice{}, &RestoreError{Code: CodeSavepointRequired,
			Message: "strict: no savepoint was taken at the job's last stop; stop it with a savepoint, or name one"}
	}
	var best *ArtifactInfo // the newest compatible savepoint
	for i, a := range in.Artifacts {
		if a.Kind == wire.ArtifactSavepoint && (best == nil || a.ID > best.ID) &&
			in.Target.Restorable(a.FormatVersion, a.MaxParallelism, a.StatefulOperators) == nil {
			best = &in.Artifacts[i]
		}
	}
	if best != nil {
		return restorable(best, in.Target, true)
	}
	if sp := newest(in.Artifacts, wire.ArtifactSavepoint); sp != nil {
		return restorable(sp, in.Target, true) // refused: its incompatibility
	}
	return RestoreChoice{}, &RestoreError{Code: CodeCheckpointNotFound, Message: "savepoint: no savepoint was taken at the job's last stop and the job has no completed savepoint"}
}

// newest returns the artifact of kind with the highest id, or nil.
func newest(arts []ArtifactInfo, kind string) *ArtifactInfo {
	var out *ArtifactInfo
	for i, a := range arts {
		if a.Kind == kind && (out == nil || a.ID > out.ID) {
			out = &arts[i]
		}
	}
	return out
}

// restorable chooses (a copy of) a, or refuses it as incompatible with
// target.
func restorable(a *ArtifactInfo, target PlanShape, fallback bool) (RestoreChoice, error) {
	if in := target.Restorable(a.FormatVersion, a.MaxParallelism, a.StatefulOperators); in != nil {
		msg := fmt.Sprintf("%s %d cannot be restored: its %s is %s, the new version has %s", a.Kind, a.ID, in.Field, in.Have, in.Want)
		if in.Field == "operators" {
			msg = fmt.Sprintf("%s %d cannot be restored: it holds %s, the new version has %s", a.Kind, a.ID, in.Have, in.Want)
		}
		return RestoreChoice{}, &RestoreError{Code: CodeStateFormatIncompatible, Message: msg, Field: in.Field, Have: in.Have, Want: in.Want}
	}
	chosen := *a
	return RestoreChoice{Restore: &chosen, Fallback: fallback}, nil
}
