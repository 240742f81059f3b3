package wire

// Configuration from the Hub and rollouts (docs/hub-api.md "Configuration"
// and "Rollouts"; docs/rollouts.md).
//
// Version ids. The Hub numbers the configurations it keeps for one node
// v1, v2, ... (per node, increasing: API.md). The node keeps its own
// history with its own v<n> ids (the Node API's); a version the Hub gave
// is recorded there with its Hub id, and the Agent reports which Hub
// version (and which configuration generation) the node runs, so the
// Hub's convergence never compares ids of two different histories.

// CapabilityConfigControl: the Agent executes configuration commands
// (configuration_validate, configuration_diff, configuration_apply).
const CapabilityConfigControl = "config_control"

// Configuration commands an Agent executes.
const (
	// CommandConfigValidate validates a candidate (payload format,
	// content, secrets) with the node's registry and its own env/file
	// references, changing nothing; the node's Report is the result.
	CommandConfigValidate = "configuration_validate"
	// CommandConfigDiff diffs two texts (payload from, to) with the
	// node's masking of literal credentials; its DiffReport is the result.
	CommandConfigDiff = "configuration_diff"
	// CommandConfigApply applies a configuration by the node's diff-apply
	// (only changed streams and jobs restart). Command.ConfigVersion is
	// the Hub version; payload format, content and secrets. With
	// NodeVersion set instead (a rollback to a configuration the Hub never
	// gave), the node re-applies its own version of that id. The result is
	// a ConfigApplyResult.
	CommandConfigApply = "configuration_apply"
)

// ConfigResource is the resource id of a node's configuration (the Hub's
// resources row of kind "configuration", and operations' resource_id).
const ConfigResource = "configuration"

// ConfigApplied is the only desired and observed state of a configuration
// resource.
const ConfigApplied = "applied"

// ConfigDocument is a configuration text as an operator sent it: secret
// references kept, never resolved. Format is yaml, json or toml.
type ConfigDocument struct {
	Format  string `json:"format"`
	Content string `json:"content"`
}

// NodeVersionLabel prefixes a node's own configuration version id where
// Hub version ids are shown too ("node:v2"), so that neither is taken for
// the other.
const NodeVersionLabel = "node:"

// ConfigDiffSide is one side of a configuration_diff: a version's id (a
// Hub version id, or "node:<id>" for the node's own) and its text.
type ConfigDiffSide struct {
	Version string `json:"version"`
	ConfigDocument
}

// ConfigCommand holds the configuration fields of a command's payload
// (CommandPayload embeds it).
type ConfigCommand struct {
	// Format and Content: the document to validate or apply.
	Format  string `json:"format,omitempty"`
	Content string `json:"content,omitempty"`
	// Secrets maps NAME to the value of the Hub's SVC_SECRET_<NAME> for
	// every ${secret:NAME} reference of Content the Hub resolved. Added at
	// dispatch only: never stored, evented, audited, logged or shown in an
	// operation. The node resolves ${secret:NAME} from it first, then from
	// its own environment; ${env:} and ${file:} resolve on the node.
	Secrets map[string]string `json:"secrets,omitempty"`
	// From and To: configuration_diff's two sides.
	From *ConfigDiffSide `json:"from,omitempty"`
	To   *ConfigDiffSide `json:"to,omitempty"`
	// NodeVersion: configuration_apply of the node's own version (no
	// Content): the node re-applies that version of its history.
	NodeVersion string `json:"node_version,omitempty"`
}

// ReportConfiguration is the configuration a node runs, in a report. The
// Agent sets HubVersion and Generation from the last configuration_apply it
// executed, and only while the node's applied version is the one that
// command made (a local apply through the Node API, or a changed --config
// file at boot, clears them: the Hub then sees drift). NodeVersion is the
// node's own id of its applied version.
type ReportConfiguration struct {
	NodeVersion string `json:"node_version"`
	HubVersion  string `json:"hub_version,omitempty"`
	Generation  int64  `json:"generation,omitempty"`
}

// ConfigApplyResult is the result of configuration_apply: the node's new
// version and what the diff-apply did to each stream and job.
type ConfigApplyResult struct {
	ConfigVersion string   `json:"config_version"` // the Hub version applied
	NodeVersion   string   `json:"node_version"`   // the node's id of it
	Added         []string `json:"added"`
	Removed       []string `json:"removed"`
	Changed       []string `json:"changed"`
	Unchanged     []string `json:"unchanged"`
}

// Sources of a Hub configuration version.
const (
	ConfigSourceAPI     = "api"     // POST .../configuration/apply with content
	ConfigSourceRollout = "rollout" // a rollout's wave
)

// ConfigVersion is one configuration the Hub keeps for a node (GET
// /nodes/{id}/configuration/versions). Content keeps secret references;
// literal credentials are masked when served.
type ConfigVersion struct {
	Version       string `json:"version"`
	NodeID        string `json:"node_id"`
	Format        string `json:"format"`
	Content       string `json:"content,omitempty"`
	SHA256        string `json:"sha256"`
	Source        string `json:"source"`
	RolloutID     string `json:"rollout_id,omitempty"`
	Actor         string `json:"actor,omitempty"`
	ActorKind     string `json:"actor_kind,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
	CreatedAt     Time   `json:"created_at"`
	// ApplyState is the state of the newest apply of this version to the
	// node among its recent ones (an operation state: succeeded, failed,
	// pending, ...); omitted when none is recent. A version whose apply
	// failed is not offered as an apply or rollback target.
	ApplyState string `json:"apply_state,omitempty"`
}

// NodeConfigurationDesired is the Hub's desire for a node's configuration.
// ConfigVersion is empty after a rollback to a configuration the Hub never
// gave (NodeVersion names it then).
type NodeConfigurationDesired struct {
	ConfigVersion string `json:"config_version,omitempty"`
	NodeVersion   string `json:"node_version,omitempty"`
	Generation    int64  `json:"generation"`
	Format        string `json:"format,omitempty"`
	Content       string `json:"content,omitempty"`
	UpdatedAt     Time   `json:"updated_at"`
}

// NodeConfigurationReported is what the node last reported.
type NodeConfigurationReported struct {
	ReportConfiguration
	ReportedAt Time `json:"reported_at,omitzero"`
	Stale      bool `json:"stale,omitempty"`
}

// NodeConfiguration is GET /nodes/{id}/configuration: the configuration as
// the node reported it and as the Hub desires it, and how far apart they
// are. Desired is nil before the Hub ever applied one.
type NodeConfiguration struct {
	NodeID            string                     `json:"node_id"`
	Desired           *NodeConfigurationDesired  `json:"desired"`
	Reported          *NodeConfigurationReported `json:"reported"`
	Convergence       string                     `json:"convergence"`
	ConvergenceReason string                     `json:"convergence_reason,omitempty"`
	OperationID       string                     `json:"operation_id,omitempty"`
}

// ConfigApplyRequest is the body of POST /nodes/{id}/configuration/apply:
// a document (Format, Content), or ConfigVersion naming a version the Hub
// keeps for that node. (The raw document with a YAML or TOML content type
// is accepted too.)
type ConfigApplyRequest struct {
	Format        string `json:"format,omitempty"`
	Content       string `json:"content,omitempty"`
	ConfigVersion string `json:"config_version,omitempty"`
}

// Rollout states (API.md).
const (
	RolloutPending    = "pending"
	RolloutRunning    = "running"
	RolloutPaused     = "paused"
	RolloutSucceeded  = "succeeded"
	RolloutFailed     = "failed"
	RolloutCancelled  = "cancelled"
	RolloutRolledBack = "rolled_back"
)

// Rollout actions (spec).
const (
	RolloutActionPause    = "pause"
	RolloutActionResume   = "resume"
	RolloutActionCancel   = "cancel"
	RolloutActionRollback = "rollback"
)

// Phases of one node in a rollout.
const (
	RolloutNodeWaiting     = "waiting"      // its wave has not started, or it is drained / in maintenance
	RolloutNodeApplying    = "applying"     // apply written; waiting for in_sync
	RolloutNodeSoaking     = "soaking"      // in_sync and healthy; the soak time runs
	RolloutNodePassed      = "passed"       // passed the health gate
	RolloutNodeFailed      = "failed"       // failed the gate (failure says why)
	RolloutNodeSkipped     = "skipped"      // never touched (later wave of a failed or cancelled rollout)
	RolloutNodeRollingBack = "rolling_back" // previous version re-applied; waiting for in_sync
	RolloutNodeRolledBack  = "rolled_back"  // back on its previous version
)

// RolloutCreateRequest is the body of POST /rollouts. Exactly one of
// Configuration and ConfigVersion (with SourceNodeID: the node whose Hub
// version it is). Exactly one of BatchSize and WavePercentages.
type RolloutCreateRequest struct {
	Configuration *ConfigDocument `json:"configuration,omitempty"`
	ConfigVersion string          `json:"config_version,omitempty"`
	SourceNodeID  string          `json:"source_node_id,omitempty"`
	NodeIDs       []string        `json:"node_ids"`
	// BatchSize is the number of nodes per wave.
	BatchSize int `json:"batch_size,omitempty"`
	// WavePercentages gives cumulative percentages of the nodes reached by
	// the end of each wave, e.g. [10, 50, 100]; the last must be 100.
	WavePercentages []int `json:"wave_percentages,omitempty"`
	// Gate: how long a wave's nodes have to report the version in_sync
	// with no stream failed (default 120000), and how long they must then
	// stay so (default 0).
	GateTimeoutMS int64 `json:"gate_timeout_ms,omitempty"`
	SoakMS        int64 `json:"soak_ms,omitempty"`
	// PauseMS is the wait between a wave passing and the next starting.
	PauseMS int64 `json:"pause_ms,omitempty"`
	// MaxFailures is the failure budget: how many nodes may fail their gate
	// before the rollout fails (default 0: the first failure fails it).
	MaxFailures int `json:"max_failures,omitempty"`
}

// RolloutNode is one node's progress in a rollout.
type RolloutNode struct {
	NodeID string `json:"node_id"`
	Wave   int    `json:"wave"` // 1-based
	Phase  string `json:"phase"`
	// VersionBefore is what the node reported running when its apply was
	// written: the Hub version of the Hub apply it ran, else its own id
	// labelled NodeVersionLabel ("node:v2"); "" when it reported nothing.
	VersionBefore     string   `json:"version_before,omitempty"`
	NodeVersionBefore string   `json:"node_version_before,omitempty"` // the node's own id of it
	VersionTarget     string   `json:"version_target,omitempty"`      // Hub version the rollout applied
	Convergence       string   `json:"convergence,omitempty"`
	OperationID       string   `json:"operation_id,omitempty"`
	Failure           *Failure `json:"failure,omitempty"`
	UpdatedAt         Time     `json:"updated_at,omitzero"`
}

// Preflight states of one rollout node: its configuration_validate is
// under way, said the configuration is valid, found problems, or failed
// (expired, refused, node error).
const (
	PreflightPending = "pending"
	PreflightValid   = "valid"
	PreflightInvalid = "invalid"
	PreflightFailed  = "failed"
)

// RolloutPreflight is one target node's check of a rollout's
// configuration with the read-only configuration_validate command, before
// any node is changed.
type RolloutPreflight struct {
	NodeID      string          `json:"node_id"`
	State       string          `json:"state"`
	OperationID string          `json:"operation_id,omitempty"`
	Problems    []ConfigProblem `json:"problems,omitempty"`
	Failure     *Failure        `json:"failure,omitempty"`
}

// ConfigProblem is one problem a node found in a configuration, at its
// path (streams[0].pipeline.processors[0].type).
type ConfigProblem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Rollout is GET /rollouts/{id} (and each item of GET /rollouts).
type Rollout struct {
	RolloutID     string          `json:"rollout_id"`
	State         string          `json:"state"`
	Configuration *ConfigDocument `json:"configuration,omitempty"`
	ConfigVersion string          `json:"config_version,omitempty"`
	SourceNodeID  string          `json:"source_node_id,omitempty"`
	SHA256        string          `json:"sha256"`
	NodeIDs       []string        `json:"node_ids"`
	Waves         [][]string      `json:"waves"`
	CurrentWave   int             `json:"current_wave"` // 1-based; 0 before the first
	GateTimeoutMS int64           `json:"gate_timeout_ms"`
	SoakMS        int64           `json:"soak_ms"`
	PauseMS       int64           `json:"pause_ms"`
	MaxFailures   int             `json:"max_failures"`
	Failures      int             `json:"failures"`
	Nodes         []RolloutNode   `json:"nodes"`
	// Preflight is each target node's validation of the configuration
	// before any node changes (GET /rollouts/{id} only).
	Preflight     []RolloutPreflight `json:"preflight,omitempty"`
	Failure       *Failure           `json:"failure,omitempty"`
	Actor         string             `json:"actor,omitempty"`
	ActorKind     string             `json:"actor_kind,omitempty"`
	CorrelationID string             `json:"correlation_id,omitempty"`
	CreatedAt     Time               `json:"created_at"`
	UpdatedAt     Time               `json:"updated_at"`
	FinishedAt    Time               `json:"finished_at,omitzero"`
}

// RolloutActionRequest is the body of POST /rollouts/{id}/actions.
type RolloutActionRequest struct {
	Action string `json:"action"`
}
