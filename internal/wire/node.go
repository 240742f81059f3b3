package wire

// Node administrative modes (API.md "States"): the mode field of a node.
// Draining and maintenance suppress new work on the node; neither touches
// work in flight or desired state.
const (
	NodeModeActive      = "active"
	NodeModeDraining    = "draining"
	NodeModeMaintenance = "maintenance"
)

// Values of NodeView.ConfigSource.
const (
	ConfigSourceHub  = "hub"
	ConfigSourceNode = "node"
)

// NodeView is one node of GET /nodes.
type NodeView struct {
	NodeID          string   `json:"node_id"`
	Status          string   `json:"status"`
	Mode            string   `json:"mode"`
	Version         string   `json:"version,omitempty"`
	ProtocolVersion int      `json:"protocol_version,omitempty"`
	BootID          string   `json:"boot_id,omitempty"`
	Capabilities    []string `json:"capabilities"`
	DataAddress     string   `json:"data_address,omitempty"`
	DataFingerprint string   `json:"data_fingerprint,omitempty"`
	// ConfigVersion is the configuration the node runs, in the Hub's
	// numbering when it runs a Hub apply (config_source hub: the same
	// content is the same version on every node); otherwise, a local
	// apply or its --config file, the node's own id (config_source node).
	ConfigVersion string `json:"config_version,omitempty"`
	// ConfigSource says whose numbering ConfigVersion is: ConfigSourceHub
	// or ConfigSourceNode.
	ConfigSource string `json:"config_source,omitempty"`
	// NodeConfigVersion is the node's own id of what it runs, always.
	NodeConfigVersion string             `json:"node_config_version,omitempty"`
	RegisteredAt      Time               `json:"registered_at,omitzero"`
	LeaseTTLMS        int64              `json:"lease_ttl_ms,omitempty"`
	LeaseExpiresAt    Time               `json:"lease_expires_at,omitzero"`
	SessionExpiresAt  Time               `json:"session_expires_at,omitzero"`
	LastReportAt      Time               `json:"last_report_at,omitzero"`
	ReportSeq         int64              `json:"report_seq,omitempty"`
	Restarts          int64              `json:"restarts"`
	Streams           int                `json:"streams"`
	QueuedCommands    int                `json:"queued_commands"`
	InFlight          int                `json:"in_flight"`
	Metrics           map[string]float64 `json:"metrics,omitempty"`
}
