package store

import (
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// Jobs: the job resource (placement, versions, desired state with one
// generation per job across nodes), its recovery artifacts, upgrades and
// the nodes' job observations. Migration 0005 creates their tables;
// migration 0006 adds split placement.
//
// A job's desired state is also a row of resources (kind job) at each node
// it runs on (its node, and for a split job every node of its task_nodes),
// so that the intent -> outbox -> attempt pipeline and
// ResourceStates treat jobs as they treat streams. Its generation is the
// job's: it keeps increasing across moves.

// KindJobCommand is the intent kind of one-shot job commands that change no
// desired state (job_checkpoint, job_savepoint, job_validate): they neither
// bump the generation nor supersede the job's pending intents, and are
// never a resource's latest intent.
const KindJobCommand = "job_command"

// ErrExists: a job with that id already exists.
var ErrExists = errors.New("already exists")

// Job is one job's stored record.
type Job struct {
	ID        string
	NodeID    string   // current placement; a split job's coordinator
	Strategy  string   // requested or least_loaded
	Requested []string // node_ids of the create body
	// Placement is wire.PlacementColocated or wire.PlacementSplit; a split
	// job's TaskNodes maps every task to its node and NodeDataPorts every
	// such node to its data address (both nil when colocated). The job's
	// data secret is not part of Job: only JobSplits reads it.
	Placement     string
	TaskNodes     map[string]string
	NodeDataPorts map[string]string
	Version       int // current version
	// Generation, DesiredState and ActionID are the job's desired state.
	Generation   int64
	DesiredState string
	ActionID     string
	// Restore is what the next start restores when an upgrade, rollback or
	// move chose it; nil: the spec's recovery mode. A start that carries it
	// clears it.
	Restore   *wire.JobRestore
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Nodes returns every node the job runs on, sorted: its node, or for a
// split job the nodes of its task_nodes.
func (j Job) Nodes() []string {
	if j.Placement != wire.PlacementSplit || len(j.TaskNodes) == 0 {
		if j.NodeID == "" {
			return nil
		}
		return []string{j.NodeID}
	}
	var out []string
	for _, n := range j.TaskNodes {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// JobSplit is a split placement as a write sets it and as a job_start
// command carries it: the task -> node map, each node's data address and
// data-plane certificate fingerprint, and the job's data-plane secret (a
// credential: never logged, evented, audited or shown).
type JobSplit struct {
	TaskNodes            map[string]string
	NodeDataPorts        map[string]string
	NodeDataFingerprints map[string]string
	DataSecret           string
}

// JobVersion is one stored version of a job: the spec as submitted and the
// plan explanation built from it.
type JobVersion struct {
	JobID     string
	Version   int
	Spec      json.RawMessage
	Plan      json.RawMessage
	UpgradeID string
	CreatedAt time.Time
}

// Upgrade is one stored upgrade (wire.JobUpgrade).
type Upgrade = wire.JobUpgrade

// Artifact is one stored recovery artifact record (wire.JobArtifact);
// pending and failed records come from POST checkpoints/savepoints.
type Artifact = wire.JobArtifact

// ObservedJob is a node's latest accepted observation of one job. Detail
// is the whole wire.JobObservation (tasks, gauges) as JSON.
type ObservedJob struct {
	NodeID      string
	JobID       string
	State       string
	Generation  int64
	Version     int
	ActionID    string
	LastError   string
	LastErrorAt time.Time
	Detail      json.RawMessage
	UpdatedAt   time.Time
}

// JobWrite is one accepted job mutation: one transaction that may create
// the job, checks If-Match against the job's generation, sets generation+1
// and the desired state at the job's (possibly new) node, supersedes the
// job's pending desired intents, writes the intent with its command
// payload, an outbox row, an audit row (Action) and an intent_accepted
// event. With Create it fails ErrExists for a known id; without it
// ErrNotFound for an unknown one. A conflict is *GenerationConflictError.
type JobWrite struct {
	IntentID string
	// Operation is the command the intent dispatches: job_start or job_stop.
	Operation string
	// Action is the audit action: job_create, job_start, job_stop,
	// job_restart, job_upgrade, job_rollback, job_move.
	Action  string
	JobID   string
	IfMatch *int64
	Create  *JobCreate
	// NodeID is the job's node after the write; "" keeps it. A new node
	// moves the job: the old node's resource row becomes desired stopped at
	// the same new generation, with a job_stop intent FenceIntentID that
	// never expires (it reaches the old node whenever it comes back).
	NodeID        string
	FenceIntentID string
	// Split, when not nil, makes the job split over Split.TaskNodes (a
	// create, or a move of a split job); NodeID must then be one of its
	// nodes (the coordinator). nil keeps the job's placement.
	Split *JobSplit
	// NewIntentID names the intents at nodes other than NodeID: one per
	// other node the job runs on after the write (a split job's peers, each
	// with the write's payload), and one fence per node the write leaves
	// beyond the first, which is FenceIntentID when set. The caller
	// provides it (the store makes no ids); nil when no such intent is
	// expected, and then one needed is ErrInvalid.
	NewIntentID func() string
	// Spread decides, from the nodes the job runs on before the write (as
	// read in the write's transaction; none for a create) and after it,
	// which other nodes get the write's intent (peers) and which get a
	// fence (the nodes the write leaves). The Hub passes placement.Spread:
	// the store makes no placement choice. Required.
	Spread   func(before, after []string, node string) (peers, fences []string)
	State    string // desired state after the write: running or stopped
	ActionID string
	// Version, when not 0, becomes the current version (an upgrade or a
	// rollback); NewVersion is stored first when not nil (an upgrade).
	Version    int
	NewVersion *JobVersion
	// Upgrade is recorded (an upgrade); RollBack names an upgrade marked
	// rolled back.
	Upgrade  *Upgrade
	RollBack string
	// Restore replaces the job's restore choice when SetRestore is true.
	Restore    *wire.JobRestore
	SetRestore bool
	// Payload is the command payload the intent carries (wire.CommandPayload JSON).
	Payload       json.RawMessage
	CorrelationID string
	Actor         string
	ActorKind     string
	Now           time.Time
	ExpiresAt     time.Time
}

// JobCreate is what a new job starts with: its placement and version 1..n
// spec (the spec's own version number).
type JobCreate struct {
	Strategy  string
	Requested []string
	Version   JobVersion
}

// JobWriteResult is what WriteJob committed.
type JobWriteResult struct {
	Generation int64
	Intent     Intent
	// FenceIntent is the first of Fences (nil when none).
	FenceIntent *Intent
	// Peers are the intents at the job's other nodes (split), Fences the
	// job_stop intents at the nodes a move left, both by node id.
	Peers  []Intent
	Fences []Intent
	Txn    int64
}

// JobCommandWrite is one one-shot job command (job_checkpoint,
// job_savepoint, job_validate): an intent of kind KindJobCommand for the
// job at NodeID, its outbox row, an audit row and an intent_accepted event,
// and, when Artifact is not nil, a pending artifact record tied to the
// intent (OperationID = IntentID).
type JobCommandWrite struct {
	IntentID      string
	Operation     string
	JobID         string
	NodeID        string
	Generation    int64
	Payload       json.RawMessage
	Artifact      *Artifact
	CorrelationID string
	Actor         string
	ActorKind     string
	Now           time.Time
	ExpiresAt     time.Time
}

// JobState is everything the Hub's job views need of one job, read in one
// transaction: the job, its current version, its latest desired intent at
// its node, and the observation of the job by its node (nil when none);
// for a split job, the same of each of its other nodes (Peers, by node id).
type JobState struct {
	Job      Job
	Version  JobVersion
	Latest   *Intent
	Observed *ObservedJob
	Peers    []JobPeer
}

// JobPeer is a split job at one of its nodes other than the coordinator:
// the latest desired intent there and the node's observation (nil when
// none).
type JobPeer struct {
	NodeID   string
	Latest   *Intent
	Observed *ObservedJob
}

// JobReport is one accepted job-observations body of a node.
type JobReport struct {
	NodeID    string
	BootID    string
	Seq       int64
	Jobs      []ObservedJob
	Artifacts []Artifact // completed artifacts the observations carry
	// Quiet: no job_state_changed events (the node spent its event
	// budget); Changed still names the jobs.
	Quiet bool
	Now   time.Time
}

// JobReportResult says what ApplyJobReport did: Stale, the body was not
// newer than the node's last (boot, seq) and nothing was written; Changed,
// the ids of jobs whose state, generation, version, action id or error
// changed (each with a job_state_changed event).
type JobReportResult struct {
	Stale   bool
	Changed []string
}
