package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/flowplane/flowplane/internal/job"
)

// ErrBudget is returned once the live state would exceed its max_bytes.
var ErrBudget = errors.New("live state exceeds the state.max_bytes budget")

// Budget accounts a task's live (in-memory) state against max_bytes. It is
// owned by the task's goroutine.
type Budget struct {
	max, used int64
}

// NewBudget returns a budget of max bytes; 0 means unlimited.
func NewBudget(max int64) *Budget { return &Budget{max: max} }

// Grow accounts n more bytes; it fails with an error wrapping ErrBudget
// (naming the figures) when that would exceed the budget, and then
// accounts nothing.
func (b *Budget) Grow(n int64) error {
	if b.max > 0 && b.used+n > b.max {
		return &BudgetError{Max: b.max, Used: b.used, Requested: n}
	}
	b.used += n
	return nil
}

// BudgetError is Grow's error: it wraps ErrBudget.
type BudgetError struct {
	Max, Used, Requested int64
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("state.max_bytes budget of %d bytes exceeded: live state would be %d bytes (%d used, %d more requested)",
		e.Max, e.Used+e.Requested, e.Used, e.Requested)
}

func (e *BudgetError) Unwrap() error { return ErrBudget }

// Shrink accounts n bytes fewer.
func (b *Budget) Shrink(n int64) { b.used -= n }

// Used is the live bytes accounted.
func (b *Budget) Used() int64 { return b.used }

// Artifact kinds.
const (
	KindCheckpoint = "checkpoint"
	KindSavepoint  = "savepoint"
)

// Manifest describes one complete checkpoint or savepoint. It is written
// last: an artifact without a manifest is incomplete and never restored.
type Manifest struct {
	Kind           string    `json:"kind"` // checkpoint or savepoint
	ID             int64     `json:"id"`   // checkpoint id; savepoints share the sequence
	JobID          string    `json:"job_id"`
	JobVersion     int       `json:"job_version"`
	FormatVersion  int       `json:"format_version"`
	MaxParallelism int       `json:"max_parallelism"`
	Operators      []string  `json:"operators"` // every operator id of the job
	CreatedAt      time.Time `json:"created_at"`
	Bytes          int64     `json:"bytes"` // total size of the task artifacts

	Tasks   []TaskArtifact   `json:"tasks"`
	Sources []SourcePosition `json:"sources"`
	Sinks   []SinkTxn        `json:"sinks"`
}

// TaskArtifact is one task's state snapshot.
type TaskArtifact struct {
	Task      string    `json:"task"`
	Operators []string  `json:"operators"` // stateful operators whose tables it holds
	Subtask   int       `json:"subtask"`
	KeyGroups job.Range `json:"key_groups"`
	Path      string    `json:"path"` // key prefix of its files in the artifact store
	Bytes     int64     `json:"bytes"`
}

// SourcePosition is where one source subtask had read up to.
type SourcePosition struct {
	Operator string          `json:"operator"`
	Subtask  int             `json:"subtask"`
	Position json.RawMessage `json:"position"`
}

// SinkTxn is a two-phase-commit transaction of one sink subtask that was
// prepared at checkpoint Checkpoint and is to be committed once a manifest
// listing it is durable.
type SinkTxn struct {
	Operator   string          `json:"operator"`
	Subtask    int             `json:"subtask"`
	Checkpoint int64           `json:"checkpoint"`
	Txn        json.RawMessage `json:"txn"`
}

// IncompatibleError says why an artifact cannot be restored into a job.
type IncompatibleError struct {
	Field      string // job_id, format_version, max_parallelism or operators
	Have, Want string
}

func (e *IncompatibleError) Error() string {
	return "artifact " + e.Field + " is " + e.Have + ", the job has " + e.Want
}
