package reconcile

import (
	"errors"
	"time"
)

// Restore-choice failure codes (the problem codes of POST upgrades).
const (
	CodeCheckpointNotFound      = "checkpoint_not_found"
	CodeStateFormatIncompatible = "state_format_incompatible"
	CodeSavepointRequired       = "savepoint_required"
	CodeCheckpointTooOld        = "checkpoint_too_old"
)

// PlanShape is what restoring needs of the target version's plan: its state
// format version, max parallelism, and each operator id with whether it
// keeps state.
type PlanShape struct {
	FormatVersion  int
	MaxParallelism int
	Operators      map[string]bool // operator id -> stateful
}

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

// ChooseRestore decides what an upgrade restores.
func ChooseRestore(in RestoreInput) (RestoreChoice, error) {
	return RestoreChoice{}, errors.New("reconcile: ChooseRestore not implemented")
}
