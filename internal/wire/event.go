package wire

// Event is one row of a node's or the Hub's event log. Empty fields are
// omitted. ID is strictly increasing within one log.
type Event struct {
	ID            int64          `json:"id"`
	Kind          string         `json:"kind"`
	OccurredAt    Time           `json:"occurred_at"`
	NodeID        string         `json:"node_id,omitempty"`
	ResourceID    string         `json:"resource_id,omitempty"`
	OperationID   string         `json:"operation_id,omitempty"`
	CorrelationID string         `json:"correlation_id,omitempty"`
	Actor         string         `json:"actor,omitempty"`
	ActorKind     string         `json:"actor_kind,omitempty"`
	Outcome       string         `json:"outcome,omitempty"`
	Message       string         `json:"message,omitempty"`
	Data          map[string]any `json:"data,omitempty"`
}

// Event kinds (API.md). Each is documented in docs/events.md.
const (
	EventIntentAccepted         = "intent_accepted"
	EventCommandDispatched      = "command_dispatched"
	EventCommandAcknowledged    = "command_acknowledged"
	EventCommandSucceeded       = "command_succeeded"
	EventCommandFailed          = "command_failed"
	EventCommandTimedOut        = "command_timed_out"
	EventOperationCancelled     = "operation_cancelled"
	EventConvergenceChanged     = "convergence_changed"
	EventStreamStateChanged     = "stream_state_changed"
	EventJobStateChanged        = "job_state_changed"
	EventNodeRegistered         = "node_registered"
	EventNodeOnline             = "node_online"
	EventNodeUnavailable        = "node_unavailable"
	EventNodeMaintenanceChanged = "node_maintenance_changed"
	// EventNodeIdentityMismatch: a registration named a known node id with
	// another node credential (or client certificate) and was refused.
	EventNodeIdentityMismatch = "node_identity_mismatch"
	// EventNodeForgotten: an operator (or the Hub's node GC) forgot a node.
	EventNodeForgotten        = "node_forgotten"
	EventConfigurationApplied = "configuration_applied"
	EventRolloutChanged       = "rollout_changed"
	EventCheckpointCompleted  = "checkpoint_completed"
	EventSavepointCompleted   = "savepoint_completed"
	// EventNodeStarted is logged by a node when its process starts.
	EventNodeStarted = "node_started"
	// EventNodeRestarted is logged by the Hub when a node reports with a
	// new boot_id.
	EventNodeRestarted = "node_restarted"
)
