package wire

// StreamDesired is the operator's target for a stream.
type StreamDesired struct {
	State         string `json:"state"`
	Generation    int64  `json:"generation"`
	ConfigVersion string `json:"config_version"`
	ActionID      string `json:"action_id,omitempty"`
}

// StreamCounters are a stream's message counters since it started.
type StreamCounters struct {
	Received  uint64 `json:"received"`
	Sent      uint64 `json:"sent"`
	Errors    uint64 `json:"errors"`
	Dropped   uint64 `json:"dropped"`
	Retries   uint64 `json:"retries"`
	InFlight  int    `json:"in_flight"`
	Abandoned int    `json:"abandoned"`
}

// StreamObserved is what the node last saw of a stream. On the Hub,
// ReportedAt is when the Hub accepted the report it comes from, and Stale
// says that report may no longer describe the stream: the node's lease
// lapsed, or it has not reported since the Hub started, since it came back
// online or since it registered a new boot (its convergence is then
// unknown).
type StreamObserved struct {
	State         string         `json:"state"`
	Generation    int64          `json:"generation"`
	ConfigVersion string         `json:"config_version"`
	ActionID      string         `json:"action_id,omitempty"`
	LastError     string         `json:"last_error,omitempty"`
	LastErrorAt   Time           `json:"last_error_at,omitzero"`
	StartedAt     Time           `json:"started_at,omitzero"`
	Counters      StreamCounters `json:"counters"`
	ReportedAt    Time           `json:"reported_at,omitzero"`
	Stale         bool           `json:"stale,omitempty"`
}

// Stream is the three independent views of one stream. Authority, on the
// Node API, says whose write the desired view (and its generation) is:
// "node" (a Node API write or the configuration) or "hub" (a Hub command
// the Agent carried out; the generation is the Hub's). The Hub's own views
// omit it: everything there is the Hub's.
type Stream struct {
	ID              string         `json:"id"`
	NodeID          string         `json:"node_id"`
	Desired         StreamDesired  `json:"desired,omitzero"`  // omitted when nothing is desired
	Observed        StreamObserved `json:"observed,omitzero"` // omitted before the first observation
	Convergence     string         `json:"convergence"`
	Authority       string         `json:"authority,omitempty"`
	LatestOperation *Operation     `json:"latest_operation,omitempty"`
	// Configuration is the stream's definition in the Hub version its node
	// runs (GET of one stream only; absent when the node runs its own).
	Configuration *StreamConfiguration `json:"configuration,omitempty"`
}

// StreamConfiguration is one stream's section of a node's configuration,
// literal credentials masked and secret references as written.
type StreamConfiguration struct {
	ConfigVersion string         `json:"config_version"` // the Hub version it comes from
	Definition    map[string]any `json:"definition"`
}

// DesiredStateResponse is the 202 body of a desired-state write or action.
type DesiredStateResponse struct {
	OperationID   string `json:"operation_id"`
	IntentID      string `json:"intent_id"`
	NodeID        string `json:"node_id"`
	StreamID      string `json:"stream_id"`
	Generation    int64  `json:"generation"`
	DesiredState  string `json:"desired_state"`
	ConfigVersion string `json:"config_version"`
	ActionID      string `json:"action_id,omitempty"`
	Convergence   string `json:"convergence"`
	// NodeStatus (Hub only) is the node's liveness when the write was
	// accepted: online, unavailable or unknown (never registered). A write
	// is accepted whatever it is; the intent waits for the node. Warnings
	// (Hub only) tell what the caller may not expect, such as
	// WarningNodeUnknown.
	NodeStatus string    `json:"node_status,omitempty"`
	Warnings   []Warning `json:"warnings,omitempty"`
}

// Warning is something an accepted request should tell its caller: Code is
// stable and machine-readable, Message is for humans.
type Warning struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// WarningNodeUnknown warns that a write names a node id that never
// registered with the Hub (a typo, or a node not started yet).
const WarningNodeUnknown = "node_unknown"
