package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

const artifactCols = `job_id, kind, artifact_id, job_version, format_version, max_parallelism, stateful_operators, location,
	bytes, state, trigger, node_id, operation_id, failure, created_at, completed_at`

func scanArtifact(r scanner) (Artifact, error) {
	var a Artifact
	var ops, failure string
	var c, done int64
	if err := r.Scan(&a.JobID, &a.Kind, &a.ID, &a.JobVersion, &a.FormatVersion, &a.MaxParallelism, &ops, &a.Location,
		&a.Bytes, &a.State, &a.Trigger, &a.NodeID, &a.OperationID, &failure, &c, &done); err != nil {
		return a, err
	}
	if err := json.Unmarshal([]byte(ops), &a.StatefulOperators); err != nil {
		return a, fmt.Errorf("artifact %s %d of job %q: %w", a.Kind, a.ID, a.JobID, err)
	}
	if a.StatefulOperators == nil {
		a.StatefulOperators = []string{}
	}
	if failure != "" {
		a.Failure = &wire.Failure{}
		if err := json.Unmarshal([]byte(failure), a.Failure); err != nil {
			return a, fmt.Errorf("artifact %s %d of job %q: %w", a.Kind, a.ID, a.JobID, err)
		}
	}
	a.CreatedAt, a.CompletedAt = wire.At(tm(c)), wire.At(tm(done))
	return a, nil
}

// checkArtifact checks a completed artifact a node reported.
func checkArtifact(a Artifact) error {
	if a.JobID == "" || (a.Kind != wire.ArtifactCheckpoint && a.Kind != wire.ArtifactSavepoint) || a.ID < 1 {
		return fmt.Errorf("%w: artifact %q %d of job %q", ErrInvalid, a.Kind, a.ID, a.JobID)
	}
	return nil
}

// ListArtifacts returns a job's artifact records of one kind ("" = both),
// newest first: the records without an artifact id yet (pending, failed)
// by creation, then the completed ones by artifact id.
func (s *Store) ListArtifacts(ctx context.Context, jobID, kind string) ([]Artifact, error) {
	w := &where{}
	w.eq("job_id", jobID)
	w.eq("kind", kind)
	out := []Artifact{}
	err := s.read(ctx, func(q querier) error {
		rows, err := q.QueryContext(ctx, "SELECT "+artifactCols+" FROM job_artifacts"+w.String()+
			" ORDER BY (artifact_id = 0) DESC, artifact_id DESC, created_at DESC, seq DESC", w.args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			a, err := scanArtifact(rows)
			if err != nil {
				return err
			}
			out = append(out, a)
		}
		return rows.Err()
	})
	return out, err
}

// FinishJobCommand completes (a != nil: the artifact the node reported) or
// fails (failure != nil) the pending artifact record of a job command, and
// appends a checkpoint_completed or savepoint_completed event when it
// completed. A record that is not pending is left as it is. A command
// without a record (the savepoint of a job_stop) has a's record written
// as RecordArtifacts does; failing it writes nothing. When an observation
// recorded the same artifact first, the pending record merges into that
// one and no second event is appended.
func (s *Store) FinishJobCommand(ctx context.Context, operationID string, a *Artifact, failure *wire.Failure, now time.Time) error {
	if operationID == "" || (a == nil) == (failure == nil) || now.IsZero() {
		return fmt.Errorf("%w: an operation id, now, and either an artifact or a failure are required", ErrInvalid)
	}
	return s.write(ctx, func(ctx context.Context, q querier) error {
		var seq int64
		var job, kind, state, node, trigger string
		err := q.QueryRowContext(ctx, `SELECT seq, job_id, kind, state, node_id, trigger FROM job_artifacts
			WHERE operation_id = ? ORDER BY seq LIMIT 1`, operationID).Scan(&seq, &job, &kind, &state, &node, &trigger)
		known := err == nil
		switch {
		case errors.Is(err, sql.ErrNoRows) && a == nil:
			return nil
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return err
		case known && state != wire.ArtifactPending:
			return nil
		}
		if failure != nil {
			f, err := json.Marshal(failure)
			if err != nil {
				return err
			}
			_, err = q.ExecContext(ctx, `UPDATE job_artifacts SET state = 'failed', failure = ? WHERE seq = ?`, string(f), seq)
			return err
		}
		done := *a
		done.OperationID = operationID
		if known {
			done.JobID, done.Kind = or(done.JobID, job), or(done.Kind, kind)
			done.NodeID, done.Trigger = or(done.NodeID, node), or(done.Trigger, trigger)
		}
		if err := checkArtifact(done); err != nil {
			return err
		}
		return recordArtifact(ctx, q, done, now)
	})
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// RecordArtifacts upserts completed artifacts (by job, kind and id) a node
// reported, appending a checkpoint_completed or savepoint_completed event
// for each one not recorded as completed before.
func (s *Store) RecordArtifacts(ctx context.Context, as []Artifact, now time.Time) error {
	for _, a := range as {
		if err := checkArtifact(a); err != nil {
			return err
		}
	}
	if len(as) == 0 {
		return nil
	}
	return s.write(ctx, func(ctx context.Context, q querier) error {
		for _, a := range as {
			if err := recordArtifact(ctx, q, a, now); err != nil {
				return err
			}
		}
		return nil
	})
}

// recordArtifact records a completed artifact once. A record of the same
// artifact completes it no second time (no event); a pending record of the
// command a names (OperationID) becomes the artifact's record, or merges
// into the artifact's record when one exists already.
func recordArtifact(ctx context.Context, q querier, a Artifact, now time.Time) error {
	var seq int64
	var op string
	err := q.QueryRowContext(ctx, `SELECT seq, operation_id FROM job_artifacts WHERE job_id = ? AND kind = ? AND artifact_id = ?`,
		a.JobID, a.Kind, a.ID).Scan(&seq, &op)
	if err == nil {
		if a.OperationID == "" {
			return nil
		}
		if _, err := q.ExecContext(ctx, `DELETE FROM job_artifacts WHERE operation_id = ? AND state = 'pending'
			AND job_id = ? AND kind = ?`, a.OperationID, a.JobID, a.Kind); err != nil {
			return err
		}
		if op == "" {
			// The command that took it says what took it, better than an
			// observation that saw it first.
			_, err = q.ExecContext(ctx, `UPDATE job_artifacts SET operation_id = ?, trigger = CASE WHEN ? = '' THEN trigger
				ELSE ? END WHERE seq = ?`, a.OperationID, a.Trigger, a.Trigger, seq)
		}
		return err
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	ops, err := json.Marshal(nonNil(a.StatefulOperators))
	if err != nil {
		return err
	}
	completed := ms(a.CompletedAt.Time)
	if completed == 0 {
		completed = ms(now)
	}
	var n int64
	if a.OperationID != "" {
		r, err := q.ExecContext(ctx, `UPDATE job_artifacts SET state = 'completed', artifact_id = ?, job_version = ?,
			format_version = ?, max_parallelism = ?, stateful_operators = ?, location = ?, bytes = ?, completed_at = ?,
			trigger = CASE WHEN trigger = '' THEN ? ELSE trigger END
			WHERE operation_id = ? AND state = 'pending' AND job_id = ? AND kind = ?`,
			a.ID, a.JobVersion, a.FormatVersion, a.MaxParallelism, string(ops), a.Location, a.Bytes, completed, a.Trigger,
			a.OperationID, a.JobID, a.Kind)
		if err != nil {
			return err
		}
		if n, err = r.RowsAffected(); err != nil {
			return err
		}
	}
	if n == 0 {
		created := ms(a.CreatedAt.Time)
		if created == 0 {
			created = completed
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO job_artifacts (job_id, kind, artifact_id, job_version, format_version,
			max_parallelism, stateful_operators, location, bytes, state, trigger, node_id, operation_id, created_at, completed_at)
			VALUES (?,?,?,?,?,?,?,?,?,'completed',?,?,?,?,?)`, a.JobID, a.Kind, a.ID, a.JobVersion, a.FormatVersion,
			a.MaxParallelism, string(ops), a.Location, a.Bytes, a.Trigger, a.NodeID, a.OperationID, created, completed); err != nil {
			return err
		}
	}
	stored, err := scanArtifact(q.QueryRowContext(ctx, "SELECT "+artifactCols+` FROM job_artifacts
		WHERE job_id = ? AND kind = ? AND artifact_id = ?`, a.JobID, a.Kind, a.ID))
	if err != nil {
		return err
	}
	kind := wire.EventCheckpointCompleted
	if stored.Kind == wire.ArtifactSavepoint {
		kind = wire.EventSavepointCompleted
	}
	e := event(kind, now, stored.NodeID, stored.JobID, stored.OperationID, "", "", "", "", "")
	e.Data = map[string]any{"kind": stored.Kind, "id": stored.ID, "job_version": stored.JobVersion,
		"format_version": stored.FormatVersion, "bytes": stored.Bytes, "location": stored.Location, "trigger": stored.Trigger}
	_, err = insertEvent(ctx, q, e)
	return err
}
