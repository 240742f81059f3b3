package wire

// Operation states (API.md).
const (
	OpPending      = "pending"
	OpDispatched   = "dispatched"
	OpAcknowledged = "acknowledged"
	OpSucceeded    = "succeeded"
	OpFailed       = "failed"
	OpTimedOut     = "timed_out"
	OpCancelled    = "cancelled"
	OpSuperseded   = "superseded"
)

// Convergence values (spec).
const (
	ConvergenceUnknown  = "unknown"
	ConvergencePending  = "pending"
	ConvergenceApplying = "applying"
	ConvergenceInSync   = "in_sync"
	ConvergenceDegraded = "degraded"
	ConvergenceBlocked  = "blocked"
)

// Retry is an operation's retry metadata.
type Retry struct {
	Count  int  `json:"count"`
	NextAt Time `json:"next_at,omitzero"`
}

// Failure classifies why an operation failed.
type Failure struct {
	Class   string `json:"class"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Operation is the record of one desired-state write or one-shot command.
// OperationID equals IntentID.
type Operation struct {
	OperationID    string   `json:"operation_id"`
	IntentID       string   `json:"intent_id"`
	AttemptID      string   `json:"attempt_id,omitempty"`
	Operation      string   `json:"operation"`
	NodeID         string   `json:"node_id"`
	ResourceID     string   `json:"resource_id"`
	Generation     int64    `json:"generation"`
	State          string   `json:"state"`
	Convergence    string   `json:"convergence"`
	Retry          Retry    `json:"retry"`
	Failure        *Failure `json:"failure,omitempty"`
	Result         any      `json:"result,omitempty"`
	Observed       any      `json:"observed,omitempty"`
	CorrelationID  string   `json:"correlation_id,omitempty"`
	Actor          string   `json:"actor,omitempty"`
	ActorKind      string   `json:"actor_kind,omitempty"`
	CreatedAt      Time     `json:"created_at"`
	UpdatedAt      Time     `json:"updated_at"`
	DispatchedAt   Time     `json:"dispatched_at,omitzero"`
	AcknowledgedAt Time     `json:"acknowledged_at,omitzero"`
	FinishedAt     Time     `json:"finished_at,omitzero"`
	ExpiresAt      Time     `json:"expires_at,omitzero"`
}
