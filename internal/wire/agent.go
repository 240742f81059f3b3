package wire

import (
	"encoding/json"
	"strings"
)

// Agent protocol (API.md "Agent protocol"), under {api_prefix}/agent.

// Capabilities an Agent may advertise beside its component set.
const (
	// CapabilityStreamControl: the Agent executes stream commands
	// (desired state, restart). Every stream command requires it.
	CapabilityStreamControl = "stream_control"
	// CapabilityNetworkShuffle: the node runs a network data plane at
	// DataAddress; advertised only when data_port and data_host are set.
	CapabilityNetworkShuffle = "network_shuffle"
)

// MaxWaitMS caps the long-poll of GET agent/commands.
const MaxWaitMS = 30000

// RegisterRequest is the body of POST agent/register, sent with the node
// token as bearer credential.
type RegisterRequest struct {
	NodeID          string   `json:"node_id"`
	BootID          string   `json:"boot_id"`
	Version         string   `json:"version"`
	ProtocolVersion int      `json:"protocol_version"`
	Capabilities    []string `json:"capabilities"`
	DataAddress     string   `json:"data_address,omitempty"`
	// DataFingerprint is the SHA-256 of the node's data-plane certificate
	// ("sha256:" and 64 lowercase hex digits), sent with DataAddress: the
	// peers of its split jobs pin it.
	DataFingerprint string `json:"data_fingerprint,omitempty"`
	// LeaseTTLMS and SessionTTLMS are the node's agent_lease_ttl_ms and
	// agent_session_ttl_ms; zero means the defaults (15000, 3600000).
	LeaseTTLMS   int64 `json:"lease_ttl_ms,omitempty"`
	SessionTTLMS int64 `json:"session_ttl_ms,omitempty"`
	// NodeCredential is the node's own secret (docs/node-identity.md): the
	// Hub binds the node id to its digest at the first registration and
	// refuses the id with another one (403 node_identity_mismatch).
	NodeCredential string `json:"node_credential"`
}

// RegisterResponse is the answer to register. The session token is the
// credential of every other agent call until SessionExpiresAt.
type RegisterResponse struct {
	SessionToken     string `json:"session_token"`
	SessionExpiresAt Time   `json:"session_expires_at"`
	// SessionTTLMS is the session lifetime granted: the one asked for,
	// capped by the Hub's SVC_HUB_SESSION_TTL_MAX.
	SessionTTLMS        int64 `json:"session_ttl_ms"`
	LeaseTTLMS          int64 `json:"lease_ttl_ms"`
	HeartbeatIntervalMS int64 `json:"heartbeat_interval_ms"`
	// Epoch is the Hubs' current leader epoch as the answering Hub knows it
	// (Command.Epoch).
	Epoch int64 `json:"epoch,omitempty"`
}

// HeartbeatRequest is the body of POST agent/heartbeat: it renews the lease
// and re-asserts capabilities and data address.
type HeartbeatRequest struct {
	BootID          string   `json:"boot_id"`
	Capabilities    []string `json:"capabilities"`
	DataAddress     string   `json:"data_address,omitempty"`
	DataFingerprint string   `json:"data_fingerprint,omitempty"`
}

// ValidDataFingerprint reports whether s is a data-plane certificate
// fingerprint: "sha256:" and 64 lowercase hex digits.
func ValidDataFingerprint(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// HeartbeatResponse tells the Agent when its lease ends.
type HeartbeatResponse struct {
	LeaseExpiresAt Time `json:"lease_expires_at"`
	// Epoch is as in RegisterResponse.
	Epoch int64 `json:"epoch,omitempty"`
}

// ReportStream is one stream as an Agent observes it. Generation,
// ConfigVersion and ActionID are those of the Hub command the node last
// applied to the stream (generation 0: none), so the Hub can compare them
// with the desired state. ConfigVersion is the node's applied configuration
// version.
type ReportStream struct {
	ID            string          `json:"id"`
	State         string          `json:"state"`
	Generation    int64           `json:"generation"`
	ConfigVersion string          `json:"config_version"`
	ActionID      string          `json:"action_id,omitempty"`
	LastError     string          `json:"last_error,omitempty"`
	LastErrorAt   Time            `json:"last_error_at,omitzero"`
	Counters      *StreamCounters `json:"counters,omitempty"`
}

// Report is the body of POST agent/report. A report whose (BootID,
// ReportSeq) is not newer than the last accepted one is ignored.
type Report struct {
	BootID               string            `json:"boot_id"`
	ReportSeq            int64             `json:"report_seq"`
	Streams              []ReportStream    `json:"streams"`
	Jobs                 []json.RawMessage `json:"jobs,omitempty"`
	ConfigurationVersion string            `json:"configuration_version"`
	// Configuration says which Hub configuration version the node runs
	// (wire.ReportConfiguration); absent from Agents of earlier releases.
	Configuration *ReportConfiguration `json:"configuration,omitempty"`
	// Metrics is a bounded set of node gauges and counters by name.
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

// Command operations an Agent executes.
const (
	// CommandStreamDesiredState sets a stream's desired state (payload
	// state: running or stopped). Written by PUT desired-state and by the
	// start and stop actions.
	CommandStreamDesiredState = "stream_desired_state"
	// CommandStreamRestart restarts a stream; it carries an action_id that
	// the Agent reports once the restart is done.
	CommandStreamRestart = "stream_restart"
)

// Command is one unit of work delivered to an Agent by GET agent/commands.
// CommandID is the operation (intent) id; AttemptID names this delivery
// attempt. A command may be delivered more than once.
type Command struct {
	CommandID     string `json:"command_id"`
	AttemptID     string `json:"attempt_id"`
	Operation     string `json:"operation"`
	NodeID        string `json:"node_id"`
	ResourceID    string `json:"resource_id"`
	Generation    int64  `json:"generation"`
	ActionID      string `json:"action_id,omitempty"`
	ConfigVersion string `json:"config_version,omitempty"`
	ExpiresAt     Time   `json:"expires_at,omitzero"`
	// Epoch is the leader epoch of the Hub that dispatched the command
	// (0 from a Hub without one). An Agent refuses a command of an epoch
	// older than one it has seen (failure code stale_epoch).
	Epoch   int64          `json:"epoch,omitempty"`
	Payload CommandPayload `json:"payload"`
}

// CommandPayload holds a command's operation-specific arguments.
type CommandPayload struct {
	// State is the desired stream state: running or stopped.
	State string `json:"state,omitempty"`
	// JobCommand holds the arguments of job commands.
	JobCommand
	// ConfigCommand holds the arguments of configuration commands.
	ConfigCommand
}

// Command result states (transport state acknowledged, or the outcome).
const (
	ResultAcknowledged = "acknowledged"
	ResultSucceeded    = "succeeded"
	ResultFailed       = "failed"
	ResultTimedOut     = "timed_out"
)

// FailureStaleEpoch is the failure code of a command an Agent refused
// without running it: its Epoch is older than one the Agent has seen, so
// it comes from a deposed leader.
const FailureStaleEpoch = "stale_epoch"

// CommandResult is the body of POST agent/commands/{id}/result; {id} is the
// command id. AttemptID names the delivery it answers.
type CommandResult struct {
	AttemptID string          `json:"attempt_id"`
	State     string          `json:"state"`
	Failure   *Failure        `json:"failure,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
}
