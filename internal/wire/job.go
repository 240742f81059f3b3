package wire

import "encoding/json"

// Jobs on the Hub: commands to Agents, the Agent's job observations, and the
// operator API's job views (docs/hub-api.md "Jobs").

// Job command operations (the spec's command label values).
const (
	// CommandJobStart runs a job: Payload carries the spec, its version, and
	// what to restore from. Generation is the job's generation: the node
	// fences the job's artifact store with it, so an older placement that
	// comes back never commits again.
	CommandJobStart = "job_start"
	// CommandJobStop stops a job, first taking a savepoint when
	// Payload.Savepoint is set (the savepoint's artifact is the result).
	CommandJobStop = "job_stop"
	// CommandJobCheckpoint triggers a barrier checkpoint of a running job;
	// the checkpoint's JobArtifact is the result.
	CommandJobCheckpoint = "job_checkpoint"
	// CommandJobSavepoint triggers a savepoint of a running job; the
	// savepoint's JobArtifact is the result.
	CommandJobSavepoint = "job_savepoint"
	// CommandJobValidate is read-only: the node materializes the spec with
	// its own registry and secret resolver and checks its state backend and
	// artifact store. The JobValidation is the result.
	CommandJobValidate = "job_validate"
)

// CapabilityJobControl: the Agent executes job commands. Every job command
// requires it; a job also requires "input:<type>" for each source and
// "output:<type>" for each sink.
const CapabilityJobControl = "job_control"

// Job observed states (API.md "States") and the kernel's completed.
const (
	JobStarting   = "starting"
	JobRunning    = "running"
	JobStopping   = "stopping"
	JobStopped    = "stopped"
	JobFailed     = "failed"
	JobRecovering = "recovering"
	JobCompleted  = "completed"
)

// Recovery choices of a job_start beyond the spec's recovery modes
// (latest_checkpoint, latest_savepoint, fail).
const (
	// RecoveryNone starts with empty state.
	RecoveryNone = "none"
	// RecoveryArtifact restores exactly Payload.Restore; a missing or
	// incompatible artifact fails the start, never falling back.
	RecoveryArtifact = "artifact"
	// RecoveryNewest restores the newest checkpoint or savepoint, whichever
	// it is: what a move and an Agent's restart resume from.
	RecoveryNewest = "newest"
)

// Artifact kinds and record states.
const (
	ArtifactCheckpoint = "checkpoint"
	ArtifactSavepoint  = "savepoint"

	ArtifactPending   = "pending"
	ArtifactCompleted = "completed"
	ArtifactFailed    = "failed"
	// ArtifactPruned is a completed checkpoint past the job's
	// checkpoint.retention: its node deleted it (listed, not restorable).
	ArtifactPruned = "pruned"
)

// ArtifactRef names one recovery artifact of a job.
type ArtifactRef struct {
	Kind string `json:"kind"` // checkpoint or savepoint
	ID   int64  `json:"id"`
}

// JobCommand holds the job fields of a command's payload (CommandPayload
// embeds it).
type JobCommand struct {
	// Spec is the job specification as the operator submitted it (secret
	// references unresolved: the node resolves them). job_start and
	// job_validate.
	Spec json.RawMessage `json:"spec,omitempty"`
	// JobVersion is the job's version: the spec's (job_start), or the
	// version the job is desired at, which a stopped job reports
	// (job_stop).
	JobVersion int `json:"job_version,omitempty"`
	// Recovery is latest_checkpoint, latest_savepoint, fail, none or
	// artifact; empty means the spec's recovery mode. job_start.
	Recovery string `json:"recovery,omitempty"`
	// Restore is the artifact to restore when Recovery is artifact.
	Restore *ArtifactRef `json:"restore,omitempty"`
	// Savepoint asks job_stop to take a savepoint first.
	Savepoint bool `json:"savepoint,omitempty"`

	// Split placement (job_start only; absent for a colocated job). Every
	// node involved gets the same four fields.
	//
	// TaskNodes maps every task of the plan ("<chain>#<subtask>") to the
	// node that runs it.
	TaskNodes map[string]string `json:"task_nodes,omitempty"`
	// NodeDataPorts maps every node of TaskNodes to the data address its
	// peers dial (host:port, its advertised data_address).
	NodeDataPorts map[string]string `json:"node_data_ports,omitempty"`
	// NodeDataFingerprints maps every node of TaskNodes to its advertised
	// data_fingerprint, which the links to it pin. A node given a peer
	// without one refuses the job (links never go without TLS).
	NodeDataFingerprints map[string]string `json:"node_data_fingerprints,omitempty"`
	// DataSecret authenticates the job's data-plane links (base64url, 32
	// random bytes, one per job). It is a credential: never logged,
	// evented, audited or shown in an operation.
	DataSecret string `json:"data_secret,omitempty"`
}

// Placements of a job (the create body's placement; ArkFlow's names).
const (
	// PlacementColocated runs every task of the job on one node.
	PlacementColocated = "colocated"
	// PlacementSplit spreads the tasks over the candidate nodes, joined by
	// the data plane.
	PlacementSplit = "split"
)

// JobArtifact is one checkpoint or savepoint as the Hub records it: bound to
// the job version and state format version it was taken with.
type JobArtifact struct {
	JobID             string   `json:"job_id"`
	Kind              string   `json:"kind"`
	ID                int64    `json:"id,omitempty"` // 0 while pending
	JobVersion        int      `json:"job_version"`
	FormatVersion     int      `json:"format_version"`
	MaxParallelism    int      `json:"max_parallelism"`
	StatefulOperators []string `json:"stateful_operators"`
	// Location is the artifact's manifest in the job's object store.
	Location string `json:"location,omitempty"`
	Bytes    int64  `json:"bytes"`
	State    string `json:"state"` // pending, completed, failed
	// Trigger says what took it: periodic, operator (POST checkpoints or
	// savepoints), stop (a stop with savepoint).
	Trigger     string   `json:"trigger,omitempty"`
	NodeID      string   `json:"node_id,omitempty"`
	OperationID string   `json:"operation_id,omitempty"`
	Failure     *Failure `json:"failure,omitempty"`
	CreatedAt   Time     `json:"created_at"`
	CompletedAt Time     `json:"completed_at,omitzero"`
}

// Artifact triggers.
const (
	TriggerPeriodic = "periodic"
	TriggerOperator = "operator"
	TriggerStop     = "stop"
)

// JobTask is one task as its node observes it.
type JobTask struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	Watermark  int64  `json:"watermark"`
	RecordsIn  int64  `json:"records_in"`
	RecordsOut int64  `json:"records_out"`
}

// JobObservation is one job as the Agent's kernel observes it. Generation,
// Version and ActionID are those of the Hub command the node last applied to
// the job (generation 0: none).
type JobObservation struct {
	ID                   string    `json:"id"`
	State                string    `json:"state"`
	Generation           int64     `json:"generation"`
	Version              int       `json:"version"`
	ActionID             string    `json:"action_id,omitempty"`
	LastError            string    `json:"last_error,omitempty"`
	LastErrorAt          Time      `json:"last_error_at,omitzero"`
	Tasks                []JobTask `json:"tasks"`
	WatermarkLagMS       int64     `json:"watermark_lag_ms"`
	CheckpointDurationMS int64     `json:"checkpoint_duration_ms"`
	CheckpointFailures   int64     `json:"checkpoint_failures"`
	LastCheckpoint       int64     `json:"last_checkpoint,omitempty"`
	StateBytes           int64     `json:"state_bytes"`
	Restarts             int       `json:"restarts"`
	RestoredFrom         string    `json:"restored_from,omitempty"`
	// Artifacts are checkpoints and savepoints completed since the node's
	// previous observation of the job (newest 16 at most).
	Artifacts []JobArtifact `json:"artifacts,omitempty"`
}

// JobObservations is the body of POST agent/job-observations: every Hub job
// the node runs or ran. Ordered like reports by (BootID, ReportSeq); an
// older one is ignored (204 all the same).
type JobObservations struct {
	BootID    string           `json:"boot_id"`
	ReportSeq int64            `json:"report_seq"`
	Jobs      []JobObservation `json:"jobs"`
}

// MaxObservedJobs bounds the jobs of one job-observations body.
const MaxObservedJobs = 1024

// JobValidation is one node's report on a spec (POST /jobs/validate, and the
// result of a job_validate command).
type JobValidation struct {
	NodeID string `json:"node_id"`
	// Valid is true when no check failed. A check that needs the node
	// itself and has not run yet leaves Pending true.
	Valid   bool       `json:"valid"`
	Pending bool       `json:"pending,omitempty"`
	Checks  []JobCheck `json:"checks"`
}

// JobCheck is one check of a JobValidation.
type JobCheck struct {
	Check   string `json:"check"`  // components, state_backend, network_shuffle, secrets, node, artifact_store, spec
	Status  string `json:"status"` // passed, failed, pending, skipped
	Path    string `json:"path,omitempty"`
	Message string `json:"message,omitempty"`
}

// JobDesired is the operator's target for a job.
type JobDesired struct {
	State      string `json:"state"`
	Generation int64  `json:"generation"`
	Version    int    `json:"version"`
	ActionID   string `json:"action_id,omitempty"`
	// Restore is what the next start restores from when an upgrade, a
	// rollback or a move chose it; absent: the spec's recovery mode.
	Restore *JobRestore `json:"restore,omitempty"`
}

// JobRestore is what a start restores: Recovery as in JobCommand, and the
// artifact for RecoveryArtifact.
type JobRestore struct {
	Recovery string       `json:"recovery"`
	Artifact *ArtifactRef `json:"artifact,omitempty"`
}

// JobObserved is the latest accepted observation of a job on its node.
type JobObserved struct {
	State                string `json:"state"`
	Generation           int64  `json:"generation"`
	Version              int    `json:"version"`
	ActionID             string `json:"action_id,omitempty"`
	LastError            string `json:"last_error,omitempty"`
	LastErrorAt          Time   `json:"last_error_at,omitzero"`
	WatermarkLagMS       int64  `json:"watermark_lag_ms"`
	CheckpointDurationMS int64  `json:"checkpoint_duration_ms"`
	CheckpointFailures   int64  `json:"checkpoint_failures"`
	LastCheckpoint       int64  `json:"last_checkpoint,omitempty"`
	StateBytes           int64  `json:"state_bytes"`
	Restarts             int    `json:"restarts"`
	RestoredFrom         string `json:"restored_from,omitempty"`
	ReportedAt           Time   `json:"reported_at,omitzero"`
	Stale                bool   `json:"stale,omitempty"`
}

// JobPlacement says where a job runs and who chose it.
type JobPlacement struct {
	// NodeID is the job's node; for a split job, the coordinating node
	// (the node of the plan's first task), which takes checkpoints and
	// savepoints.
	NodeID string `json:"node_id"`
	// Mode is colocated or split.
	Mode string `json:"mode"`
	// Nodes lists every node running a task of a split job, sorted.
	Nodes []string `json:"nodes,omitempty"`
	// TaskNodes maps each task to its node (split only).
	TaskNodes map[string]string `json:"task_nodes,omitempty"`
	// Strategy is requested (node_ids of the create body) or least_loaded
	// (the Hub chose among capable nodes).
	Strategy  string   `json:"strategy"`
	Requested []string `json:"requested_node_ids,omitempty"`
}

// Job is the Hub's view of one job: desired, observed and convergence, as
// streams have.
type Job struct {
	ID                string       `json:"id"`
	NodeID            string       `json:"node_id"`
	Version           int          `json:"version"`
	Placement         JobPlacement `json:"placement"`
	Desired           JobDesired   `json:"desired"`
	Observed          JobObserved  `json:"observed,omitzero"`
	Convergence       string       `json:"convergence"`
	ConvergenceReason string       `json:"convergence_reason,omitempty"`
	// ConvergenceNode names, for a split job, the node whose convergence
	// (the worst of its nodes') is reported; empty when colocated.
	ConvergenceNode string     `json:"convergence_node,omitempty"`
	LatestOperation *Operation `json:"latest_operation,omitempty"`
	CreatedAt       Time       `json:"created_at"`
	UpdatedAt       Time       `json:"updated_at"`
}

// JobTaskAssignment is one task of the job's plan on its node, merged with
// what the node observed of it; Observed false marks a task not yet
// observed (State is then "not_observed").
type JobTaskAssignment struct {
	TaskID     string   `json:"task_id"`
	NodeID     string   `json:"node_id"`
	Operators  []string `json:"operators"`
	Subtask    int      `json:"subtask"`
	KeyGroups  []int    `json:"key_groups,omitempty"` // [start, end] when keyed
	Observed   bool     `json:"observed"`
	State      string   `json:"state"`
	Watermark  int64    `json:"watermark,omitempty"`
	RecordsIn  int64    `json:"records_in,omitempty"`
	RecordsOut int64    `json:"records_out,omitempty"`
}

// TaskNotObserved is the state of a task no observation mentions yet.
const TaskNotObserved = "not_observed"

// JobDetail is GET /jobs/{id}/detail: the job, its assignment and
// convergence detail, and the measured job-scoped gauges.
type JobDetail struct {
	Job
	Assignment           []JobTaskAssignment `json:"assignment"`
	TasksObserved        int                 `json:"tasks_observed"`
	TasksTotal           int                 `json:"tasks_total"`
	WatermarkLagMS       *int64              `json:"watermark_lag_ms"`
	CheckpointDurationMS *int64              `json:"checkpoint_duration_ms"`
	CheckpointFailures   *int64              `json:"checkpoint_failures"`
}

// JobVersion is one version of a job's spec.
type JobVersion struct {
	Version   int             `json:"version"`
	Current   bool            `json:"current"`
	UpgradeID string          `json:"upgrade_id,omitempty"`
	CreatedAt Time            `json:"created_at"`
	Spec      json.RawMessage `json:"spec"`
}

// JobCreateRequest is the body of POST /jobs.
type JobCreateRequest struct {
	Spec         json.RawMessage `json:"spec"`
	DesiredState string          `json:"desired_state"`
	NodeIDs      []string        `json:"node_ids,omitempty"`
	// Placement is colocated (default) or split; node_ids are then the
	// candidate nodes (every capable online node when absent).
	Placement string `json:"placement,omitempty"`
}

// JobValidateRequest is the body of POST /jobs/validate.
type JobValidateRequest struct {
	Spec    json.RawMessage `json:"spec"`
	NodeIDs []string        `json:"node_ids"`
	// Placement split checks network_shuffle on every node.
	Placement string `json:"placement,omitempty"`
}

// JobValidateResponse answers POST /jobs/validate: the Hub's own checks of
// the spec (Problems, with paths), a report per node, and the operation
// that carries each node's read-only check.
type JobValidateResponse struct {
	Valid                bool                `json:"valid"`
	Problems             []ValidationProblem `json:"problems"`
	RequiredCapabilities []string            `json:"required_capabilities"`
	SecretReferences     []string            `json:"secret_references,omitempty"`
	Plan                 json.RawMessage     `json:"plan,omitempty"`
	Nodes                []JobValidation     `json:"nodes"`
	// Operations maps each node id to the operation of its job_validate
	// command, whose result is that node's JobValidation.
	Operations map[string]string `json:"operations,omitempty"`
}

// ValidationProblem is one path-named problem.
type ValidationProblem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// JobDesiredRequest is the body of PUT /jobs/{id}/desired-state.
// Savepoint (with stopped) takes a savepoint before stopping; Recovery
// (with running) overrides the start's recovery mode once.
type JobDesiredRequest struct {
	State     string `json:"state"`
	Savepoint bool   `json:"savepoint,omitempty"`
	Recovery  string `json:"recovery,omitempty"`
}

// JobDesiredResponse is the 202 body of every job mutation that writes an
// intent.
type JobDesiredResponse struct {
	OperationID  string      `json:"operation_id"`
	IntentID     string      `json:"intent_id"`
	NodeID       string      `json:"node_id"`
	JobID        string      `json:"job_id"`
	Generation   int64       `json:"generation"`
	DesiredState string      `json:"desired_state"`
	Version      int         `json:"version"`
	ActionID     string      `json:"action_id,omitempty"`
	Convergence  string      `json:"convergence"`
	NodeStatus   string      `json:"node_status,omitempty"`
	Upgrade      *JobUpgrade `json:"upgrade,omitempty"`
	Warnings     []Warning   `json:"warnings,omitempty"`
}

// JobCommandResponse is the 202 body of POST checkpoints and savepoints.
type JobCommandResponse struct {
	OperationID string `json:"operation_id"`
	IntentID    string `json:"intent_id"`
	NodeID      string `json:"node_id"`
	JobID       string `json:"job_id"`
	Operation   string `json:"operation"`
	Kind        string `json:"kind"`
	State       string `json:"state"` // the artifact record: pending
}

// Upgrade modes (the Flink Kubernetes Operator's).
const (
	UpgradeStateless = "stateless"
	UpgradeSavepoint = "savepoint"
	UpgradeLastState = "last_state"
)

// JobUpgradeRequest is the body of POST /jobs/{id}/upgrades. Savepoint
// names a savepoint for mode savepoint; without it the savepoint taken at
// the job's last stop is used, or, unless Strict, the newest compatible
// savepoint. MaxAgeMS bounds the age of the checkpoint of last_state.
// DesiredState running starts the new version at once.
type JobUpgradeRequest struct {
	Spec         json.RawMessage `json:"spec"`
	Mode         string          `json:"mode"`
	Strict       bool            `json:"strict,omitempty"`
	Savepoint    *int64          `json:"savepoint_id,omitempty"`
	MaxAgeMS     int64           `json:"max_age_ms,omitempty"`
	DesiredState string          `json:"desired_state,omitempty"`
}

// JobUpgrade is one upgrade's record.
type JobUpgrade struct {
	UpgradeID   string       `json:"upgrade_id"`
	JobID       string       `json:"job_id"`
	FromVersion int          `json:"from_version"`
	ToVersion   int          `json:"to_version"`
	Mode        string       `json:"mode"`
	Strict      bool         `json:"strict,omitempty"`
	Restore     *ArtifactRef `json:"restore,omitempty"`
	// Fallback says the restore is not the savepoint taken at the stop but
	// an older compatible one (never with Strict).
	Fallback     bool   `json:"fallback,omitempty"`
	State        string `json:"state"` // applied or rolled_back
	OperationID  string `json:"operation_id,omitempty"`
	CreatedAt    Time   `json:"created_at"`
	RolledBackAt Time   `json:"rolled_back_at,omitzero"`
}

// Upgrade record states.
const (
	UpgradeApplied    = "applied"
	UpgradeRolledBack = "rolled_back"
)

// JobMoveRequest is the optional body of POST /jobs/{id}/actions/move: the
// node to move to (empty: the Hub chooses a capable, least-loaded one).
type JobMoveRequest struct {
	NodeID string `json:"node_id,omitempty"`
	// NodeIDs are the candidate nodes a split job is placed over again
	// (split jobs only; not with NodeID).
	NodeIDs []string `json:"node_ids,omitempty"`
}
