package engine

import (
	"context"
	"net/url"
	"slices"
	"strings"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/kernel"
	"github.com/flowplane/flowplane/internal/sandbox"
	"github.com/flowplane/flowplane/internal/state"
	"github.com/flowplane/flowplane/internal/stream"
	"github.com/flowplane/flowplane/internal/wal"
)

// The names below are the runtimes' (stream, kernel, state, wal) as the
// engine's users see them: the node, the Agent and the command reach
// streams, jobs and their artifacts only through the engine. They are
// aliases, so values and errors.Is compare equal on either side.

// StreamState is the state a stream's runtime is in.
type StreamState = stream.State

// The states of a stream.
const (
	StreamStarting  = stream.StateStarting
	StreamRunning   = stream.StateRunning
	StreamStopping  = stream.StateStopping
	StreamStopped   = stream.StateStopped
	StreamCompleted = stream.StateCompleted
	StreamFailed    = stream.StateFailed
)

// JobState is the state a job is in.
type JobState = kernel.State

// The states of a job.
const (
	JobStarting   = kernel.Starting
	JobRunning    = kernel.Running
	JobStopping   = kernel.Stopping
	JobStopped    = kernel.Stopped
	JobFailed     = kernel.Failed
	JobRecovering = kernel.Recovering
	JobCompleted  = kernel.Completed
)

// Recovery modes of a job start (HubJob.Recovery, StartJob's recovery).
const (
	RecoverLatestCheckpoint = kernel.RecoverLatestCheckpoint
	RecoverLatestSavepoint  = kernel.RecoverLatestSavepoint
	RecoverFail             = kernel.RecoverFail
	RecoverNone             = kernel.RecoverNone
	// RecoverNewest restores the newest artifact of either kind.
	RecoverNewest = kernel.RecoverNewest
	// RecoverArtifact restores the artifact HubJob.Restore names.
	RecoverArtifact = kernel.RecoverArtifact
)

// JobExplanation is a job plan's explanation (GET /jobs/{id}/plan):
// operator boundaries, partition routes, stateful operators and the
// checkpoint policy.
type JobExplanation = job.Explanation

// ArtifactRef names one checkpoint or savepoint of a job.
type ArtifactRef = kernel.ArtifactRef

// BuildError carries the problems of a job plan that could not be built
// (StartHubJob).
type BuildError = kernel.BuildError

// Manifest describes one completed checkpoint or savepoint.
type Manifest = state.Manifest

// The kinds of a job's artifacts (JobArtifacts, Manifest.Kind).
const (
	ArtifactCheckpoint = state.KindCheckpoint
	ArtifactSavepoint  = state.KindSavepoint
)

// ManifestKey is where an artifact's manifest lives in its store.
func ManifestKey(jobID, kind string, id int64) string { return state.ManifestKey(jobID, kind, id) }

// ArtifactLocation is where m's manifest lives: the URI of the job's
// store (storeURI) without its query, which may hold credentials, then the
// manifest's key.
func ArtifactLocation(storeURI string, m *Manifest) string {
	key := ManifestKey(m.JobID, m.Kind, m.ID)
	u, err := url.Parse(storeURI)
	if err != nil {
		return key
	}
	base := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
	return strings.TrimSuffix(base, "/") + "/" + key
}

// StatefulOperators lists the operators whose state m holds, sorted.
func StatefulOperators(m *Manifest) []string {
	ops := []string{}
	for _, t := range m.Tasks {
		for _, op := range t.Operators {
			if !slices.Contains(ops, op) {
				ops = append(ops, op)
			}
		}
	}
	slices.Sort(ops)
	return ops
}

// ErrFenced is the error of a job whose artifact store a newer generation
// took (JobStatus.Err, CheckpointJob, SavepointJob, StopJob).
var ErrFenced = state.ErrFenced

// ErrNoCheckpointing is returned by CheckpointJob, SavepointJob and
// JobArtifacts for a job without a checkpoint configuration.
var ErrNoCheckpointing = kernel.ErrNoCheckpointing

// ErrJobEnded is returned by CheckpointJob, SavepointJob and StopJob with a
// savepoint when the job ended, or its sources are done, before the
// artifact could be taken. A job that was not running at all is
// ErrJobNotRunning instead.
var ErrJobEnded = kernel.ErrNotRunning

// ErrWALInUse is wrapped by Apply's error for a stream whose WAL directory
// another process writes to.
var ErrWALInUse = wal.ErrInUse

// ProbeArtifacts opens a job's artifact store (uri) in sb (a Hub job's:
// the remote sandbox) and reads the job's fence: the store is reachable
// and readable. The job need not exist.
func ProbeArtifacts(ctx context.Context, jobID, uri string, sb Sandbox) error {
	a, err := state.OpenArtifactsIn(ctx, uri, sb.FS, sandbox.FS{})
	if err != nil {
		return err
	}
	defer a.Close()
	_, err = a.ReadFence(ctx, jobID)
	return err
}
