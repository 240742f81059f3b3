package store

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/flowplane/flowplane/internal/hub/rollout"
	"github.com/flowplane/flowplane/internal/wire"
)

// Node configuration and rollouts (migration 0007).
//
// Schema (0007_configuration.sql):
//
//	resources: resource_kind may also be 'configuration' (the CHECK is
//	  widened by rebuilding the table); one row per node, resource_id
//	  'configuration', state 'applied', config_version the desired Hub
//	  version ('' for a rollback to a node-local version).
//	config_versions (node_id, seq INTEGER, format, content, sha256, source,
//	  rollout_id, actor, correlation_id, created_at; PRIMARY KEY (node_id,
//	  seq)): version id "v<seq>". Content is the text as given, secret
//	  references kept; never a resolved value.
//	config_contents (seq PRIMARY KEY, format, sha256, created_at; UNIQUE
//	  (format, sha256); migration 0013): the fleet-wide numbering. One
//	  content has one seq on every node it is applied to, the next past
//	  every seq used when it is first seen; config_versions holds its text
//	  once per node that got it. Versions written before 0013 keep their
//	  per-node numbers and have no row here.
//	nodes: + config_node_version, config_hub_version, config_generation
//	  (the report's wire.ReportConfiguration), config_reported_at.
//	rollouts (rollout_id PRIMARY KEY, revision, state, format, content,
//	  config_version, source_node_id, sha256, waves JSON, gate_timeout_ms,
//	  soak_ms, pause_ms, max_failures, current_wave, wave_passed_at,
//	  failures, failure_code, failure_message, actor, correlation_id,
//	  created_at, updated_at, finished_at).
//	rollout_nodes (rollout_id, node_id, wave, phase, version_before,
//	  node_version_before, version_target, generation, operation_id,
//	  applied_at, healthy_since, failure_code, failure_message, updated_at;
//	  PRIMARY KEY (rollout_id, node_id)).
//
// Rollouts and configuration versions are never deleted (rule 10); the
// retention sweep leaves them.

// KindConfiguration is the resource kind of a node's configuration.
const KindConfiguration = "configuration"

// KindConfigCommand is the intent kind of the read-only configuration
// commands (configuration_validate, configuration_diff): no resources
// row, the payload holds the command's arguments.
const KindConfigCommand = "configuration_command"

// ErrRolloutConflict: SaveRollout's Revision is not the stored one
// (another writer saved the rollout since it was read).
var ErrRolloutConflict = errors.New("rollout changed since it was read")

// ConfigVersion is one configuration the Hub keeps for a node. Its
// Version is fleet-wide: the same content is the same version on every
// node (see config_contents).
type ConfigVersion struct {
	NodeID        string
	Version       string // "v<n>"
	Format        string
	Content       string
	SHA256        string // hex of Content
	Source        string // wire.ConfigSourceAPI or wire.ConfigSourceRollout
	RolloutID     string
	Actor         string
	ActorKind     string
	CorrelationID string
	CreatedAt     time.Time
}

// ConfigWrite is one configuration apply for one node: a new version
// (Content set), an existing Hub version (Version), or a node-local one
// (NodeVersion: a rollback to a configuration the Hub never gave).
// Exactly one of the three.
type ConfigWrite struct {
	IntentID string
	NodeID   string
	Format   string
	Content  string
	// Source and RolloutID label a new version.
	Source      string
	RolloutID   string
	Version     string
	NodeVersion string
	// Action is the audit action (configuration_apply,
	// configuration_rollback, rollout_apply, rollout_rollback); the intent's
	// operation is always wire.CommandConfigApply.
	Action        string
	IfMatch       *int64
	CorrelationID string
	Actor         string
	ActorKind     string
	Now           time.Time
	ExpiresAt     time.Time
}

// ConfigWriteResult is what WriteConfig committed.
type ConfigWriteResult struct {
	Generation int64
	Version    string // the Hub version desired ("" for NodeVersion)
	Intent     Intent
	Txn        int64
}

// ConfigCommandWrite is a read-only configuration command for one node.
type ConfigCommandWrite struct {
	IntentID      string
	Operation     string // wire.CommandConfigValidate or wire.CommandConfigDiff
	NodeID        string
	Payload       json.RawMessage // wire.CommandPayload JSON, no secrets
	Action        string          // audit action
	CorrelationID string
	Actor         string
	ActorKind     string
	Now           time.Time
	ExpiresAt     time.Time
}

// NodeConfig is a node's configuration resource: desired (nil when the
// Hub never applied one), latest intent, and the node's last report.
type NodeConfig struct {
	NodeID   string
	Desired  *Resource
	Latest   *Intent
	Observed *ObservedConfig
}

// ObservedConfig is the configuration part of a node's last report (nil
// when no report carried one).
type ObservedConfig struct {
	wire.ReportConfiguration
	ReportedAt time.Time
}

// Rollout is a stored rollout: the state machine's Rollout plus what it was
// created with.
type Rollout struct {
	rollout.Rollout
	Revision      int64
	Format        string
	Content       string
	ConfigVersion string
	SourceNodeID  string
	SHA256        string
	Actor         string
	ActorKind     string
	CorrelationID string
	CreatedAt     time.Time
}

// RolloutFilter narrows ListRollouts. Visible, when set, keeps only the
// rollouts it accepts (a scoped principal's), with exact pages and total
// (listPage); it sees a rollout without its nodes.
type RolloutFilter struct {
	State   string
	Visible func(Rollout) bool
}

// RolloutUpdate is one step of a rollout, committed at once.
type RolloutUpdate struct {
	// Rollout is the new state; Revision the one it was read at.
	Rollout Rollout
	// Applies are written in the same transaction (WriteConfig's rules);
	// each node's Generation, VersionTarget (the version its write
	// desired; for a rollback apply VersionTarget is left) and OperationID
	// are set in the stored rollout from its write.
	Applies []ConfigWrite
	Events  []wire.Event
	Audit   []AuditRecord
}

// RolloutUpdateResult is what SaveRollout committed.
type RolloutUpdateResult struct {
	Rollout Rollout // as stored (revision+1, generations set)
	Intents []Intent
	Txn     int64
}
