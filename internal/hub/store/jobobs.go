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

// maxReportArtifacts bounds the artifacts of one job-observations body:
// the newest 16 of each job.
const maxReportArtifacts = 16 * wire.MaxObservedJobs

const observedJobCols = `node_id, job_id, state, generation, version, action_id, last_error, last_error_at, detail, updated_at`

func scanObservedJob(r scanner) (ObservedJob, error) {
	var o ObservedJob
	var detail string
	var le, u int64
	if err := r.Scan(&o.NodeID, &o.JobID, &o.State, &o.Generation, &o.Version, &o.ActionID, &o.LastError, &le, &detail,
		&u); err != nil {
		return o, err
	}
	if detail != "" {
		o.Detail = json.RawMessage(detail)
	}
	o.LastErrorAt, o.UpdatedAt = tm(le), tm(u)
	return o, nil
}

// ApplyJobReport stores a node's job observations in one transaction,
// ordered by (BootID, Seq) per node like reports: observed_jobs rows
// replaced for the jobs named, job_state_changed events for changes, and
// the completed artifacts recorded as RecordArtifacts does. Jobs the body
// does not name keep their rows. An unknown node returns ErrNotFound.
func (s *Store) ApplyJobReport(ctx context.Context, r JobReport) (JobReportResult, error) {
	var res JobReportResult
	if r.NodeID == "" || r.Now.IsZero() {
		return res, fmt.Errorf("%w: node id and now are required", ErrInvalid)
	}
	if len(r.Jobs) > wire.MaxObservedJobs || len(r.Artifacts) > maxReportArtifacts {
		return res, fmt.Errorf("%w: %d jobs, %d artifacts in one body (max %d, %d)", ErrInvalid, len(r.Jobs),
			len(r.Artifacts), wire.MaxObservedJobs, maxReportArtifacts)
	}
	for _, o := range r.Jobs {
		if o.JobID == "" {
			return res, fmt.Errorf("%w: a job observation without a job id", ErrInvalid)
		}
		if err := checkJSON("detail", o.Detail); err != nil {
			return res, err
		}
	}
	for _, a := range r.Artifacts {
		if err := checkArtifact(a); err != nil {
			return res, err
		}
	}
	err := s.write(ctx, func(ctx context.Context, q querier) error {
		res = JobReportResult{}
		var boot string
		var seq int64
		err := q.QueryRowContext(ctx, "SELECT job_report_boot_id, job_report_seq FROM nodes WHERE node_id = ?", r.NodeID).
			Scan(&boot, &seq)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("node %q: %w", r.NodeID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if boot == r.BootID && r.Seq <= seq {
			res.Stale = true
			return nil
		}
		if _, err := q.ExecContext(ctx, "UPDATE nodes SET job_report_boot_id = ?, job_report_seq = ? WHERE node_id = ?",
			r.BootID, r.Seq, r.NodeID); err != nil {
			return err
		}
		note(q, ChangeJobs, r.NodeID)
		for _, o := range r.Jobs {
			o.NodeID = r.NodeID
			changed, err := observeJob(ctx, q, o, r.Now, r.Quiet)
			if err != nil {
				return err
			}
			if changed {
				res.Changed = append(res.Changed, o.JobID)
			}
		}
		for _, a := range r.Artifacts {
			if a.NodeID == "" {
				a.NodeID = r.NodeID
			}
			if err := recordArtifact(ctx, q, a, r.Now); err != nil {
				return err
			}
		}
		return boundObservedJobs(ctx, q, r.NodeID)
	})
	if err != nil {
		return JobReportResult{}, err
	}
	return res, nil
}

// Bounds of the job observations kept per node: rows the bodies no longer
// name stay, so without a bound a node naming new job ids in every body
// would grow the database without end.
const (
	maxNodeObservedJobs      = wire.MaxObservedJobs
	maxNodeObservedJobsBytes = 8 << 20
)

// boundObservedJobs keeps node's newest job observations within
// maxNodeObservedJobs rows and maxNodeObservedJobsBytes of detail and
// error, those of jobs the Hub holds first; the newest one always stays.
func boundObservedJobs(ctx context.Context, q querier, node string) error {
	_, err := q.ExecContext(ctx, `DELETE FROM observed_jobs WHERE node_id = ?1 AND job_id IN (
		SELECT job_id FROM (
			SELECT o.job_id, ROW_NUMBER() OVER w AS n, SUM(LENGTH(o.detail) + LENGTH(o.last_error)) OVER w AS bytes
			FROM observed_jobs o WHERE o.node_id = ?1
			WINDOW w AS (ORDER BY EXISTS (SELECT 1 FROM jobs j WHERE j.job_id = o.job_id) DESC, o.updated_at DESC, o.job_id)
		) AS ranked WHERE n > 1 AND (n > ?2 OR bytes > ?3))`, node, maxNodeObservedJobs, maxNodeObservedJobsBytes)
	return err
}

// observeJob replaces the node's row of one job and appends a
// job_state_changed event (unless quiet) when what convergence compares
// changed.
func observeJob(ctx context.Context, q querier, o ObservedJob, at time.Time, quiet bool) (bool, error) {
	prev, err := scanObservedJob(q.QueryRowContext(ctx, "SELECT "+observedJobCols+" FROM observed_jobs WHERE node_id = ? AND job_id = ?",
		o.NodeID, o.JobID))
	known := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, err
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO observed_jobs (node_id, job_id, state, generation, version,
		action_id, last_error, last_error_at, detail, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT (node_id, job_id) DO UPDATE SET state = excluded.state, generation = excluded.generation,
		version = excluded.version, action_id = excluded.action_id, last_error = excluded.last_error,
		last_error_at = excluded.last_error_at, detail = excluded.detail, updated_at = excluded.updated_at`,
		o.NodeID, o.JobID, o.State, o.Generation, o.Version, o.ActionID, o.LastError, ms(o.LastErrorAt), string(o.Detail),
		ms(at)); err != nil {
		return false, err
	}
	if known && prev.State == o.State && prev.Generation == o.Generation && prev.Version == o.Version &&
		prev.ActionID == o.ActionID && prev.LastError == o.LastError {
		return false, nil
	}
	if quiet {
		return true, nil
	}
	e := event(wire.EventJobStateChanged, at, o.NodeID, o.JobID, "", "", "", "", "", "job "+o.State)
	e.Data = map[string]any{"state": o.State, "previous": prev.State, "generation": o.Generation, "version": o.Version}
	_, err = insertEvent(ctx, q, e)
	return err == nil, err
}

// ObservedJobs returns every node's job observations by node and job id.
func (s *Store) ObservedJobs(ctx context.Context) (map[string][]ObservedJob, error) {
	out := map[string][]ObservedJob{}
	err := s.read(ctx, func(q querier) error {
		rows, err := q.QueryContext(ctx, "SELECT "+observedJobCols+" FROM observed_jobs ORDER BY node_id, job_id")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			o, err := scanObservedJob(rows)
			if err != nil {
				return err
			}
			out[o.NodeID] = append(out[o.NodeID], o)
		}
		return rows.Err()
	})
	return out, err
}
