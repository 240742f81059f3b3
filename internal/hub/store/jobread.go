package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/flowplane/flowplane/internal/wire"
)

const jobCols = `job_id, node_id, strategy, requested, version, generation, desired_state, action_id, restore,
	created_at, updated_at, placement, task_nodes, node_data_ports`

func scanJob(r scanner) (Job, error) {
	var j Job
	var requested, restore, taskNodes, ports string
	var c, u int64
	if err := r.Scan(&j.ID, &j.NodeID, &j.Strategy, &requested, &j.Version, &j.Generation, &j.DesiredState, &j.ActionID,
		&restore, &c, &u, &j.Placement, &taskNodes, &ports); err != nil {
		return j, err
	}
	if err := optUnmarshal(taskNodes, &j.TaskNodes); err != nil {
		return j, fmt.Errorf("job %q task_nodes: %w", j.ID, err)
	}
	if err := optUnmarshal(ports, &j.NodeDataPorts); err != nil {
		return j, fmt.Errorf("job %q node_data_ports: %w", j.ID, err)
	}
	if err := json.Unmarshal([]byte(requested), &j.Requested); err != nil {
		return j, fmt.Errorf("job %q requested: %w", j.ID, err)
	}
	if len(j.Requested) == 0 {
		j.Requested = nil
	}
	if restore != "" {
		j.Restore = &wire.JobRestore{}
		if err := json.Unmarshal([]byte(restore), j.Restore); err != nil {
			return j, fmt.Errorf("job %q restore: %w", j.ID, err)
		}
	}
	j.CreatedAt, j.UpdatedAt = tm(c), tm(u)
	return j, nil
}

// optUnmarshal decodes s into v unless s is empty.
func optUnmarshal(s string, v any) error {
	if s == "" {
		return nil
	}
	return json.Unmarshal([]byte(s), v)
}

func getJob(ctx context.Context, q querier, id string) (Job, error) {
	j, err := scanJob(q.QueryRowContext(ctx, "SELECT "+jobCols+" FROM jobs WHERE job_id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return j, fmt.Errorf("job %q: %w", id, ErrNotFound)
	}
	return j, err
}

// GetJob returns one job, or ErrNotFound.
func (s *Store) GetJob(ctx context.Context, id string) (Job, error) {
	var j Job
	err := s.read(ctx, func(q querier) error {
		var err error
		j, err = getJob(ctx, q, id)
		return err
	})
	return j, err
}

// ListJobs returns every job by id.
func (s *Store) ListJobs(ctx context.Context) ([]Job, error) {
	var out []Job
	err := s.read(ctx, func(q querier) error {
		var err error
		out, err = listJobs(ctx, q)
		return err
	})
	return out, err
}

func listJobs(ctx context.Context, q querier) ([]Job, error) {
	rows, err := q.QueryContext(ctx, "SELECT "+jobCols+" FROM jobs ORDER BY job_id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Job{}
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

const jobVersionCols = "job_id, version, spec, plan, upgrade_id, created_at"

func scanJobVersion(r scanner) (JobVersion, error) {
	var v JobVersion
	var spec, plan string
	var c int64
	if err := r.Scan(&v.JobID, &v.Version, &spec, &plan, &v.UpgradeID, &c); err != nil {
		return v, err
	}
	if spec != "" {
		v.Spec = json.RawMessage(spec)
	}
	if plan != "" {
		v.Plan = json.RawMessage(plan)
	}
	v.CreatedAt = tm(c)
	return v, nil
}

func getJobVersion(ctx context.Context, q querier, jobID string, version int) (JobVersion, error) {
	v, err := scanJobVersion(q.QueryRowContext(ctx, "SELECT "+jobVersionCols+" FROM job_versions WHERE job_id = ? AND version = ?",
		jobID, version))
	if errors.Is(err, sql.ErrNoRows) {
		return v, fmt.Errorf("job %q version %d: %w", jobID, version, ErrNotFound)
	}
	return v, err
}

// JobVersions returns a job's versions, oldest first (ErrNotFound for an
// unknown job).
func (s *Store) JobVersions(ctx context.Context, jobID string) ([]JobVersion, error) {
	var out []JobVersion
	err := s.readTx(ctx, func(q querier) error {
		if _, err := getJob(ctx, q, jobID); err != nil {
			return err
		}
		rows, err := q.QueryContext(ctx, "SELECT "+jobVersionCols+" FROM job_versions WHERE job_id = ? ORDER BY version", jobID)
		if err != nil {
			return err
		}
		defer rows.Close()
		out = []JobVersion{}
		for rows.Next() {
			v, err := scanJobVersion(rows)
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return rows.Err()
	})
	return out, err
}

// GetJobVersion returns one version of a job, or ErrNotFound.
func (s *Store) GetJobVersion(ctx context.Context, jobID string, version int) (JobVersion, error) {
	var v JobVersion
	err := s.read(ctx, func(q querier) error {
		var err error
		v, err = getJobVersion(ctx, q, jobID, version)
		return err
	})
	return v, err
}

// GetJobState returns one job's state, or ErrNotFound.
func (s *Store) GetJobState(ctx context.Context, id string) (JobState, error) {
	var out JobState
	err := s.readTx(ctx, func(q querier) error {
		var err error
		if out.Job, err = getJob(ctx, q, id); err != nil {
			return err
		}
		if out.Version, err = getJobVersion(ctx, q, id, out.Job.Version); err != nil {
			return err
		}
		in, err := scanIntent(q.QueryRowContext(ctx, "SELECT "+intentCols+` FROM intents
			WHERE node_id = ? AND resource_kind = 'job' AND resource_id = ? ORDER BY seq DESC LIMIT 1`, out.Job.NodeID, id))
		switch {
		case err == nil:
			out.Latest = &in
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		o, err := scanObservedJob(q.QueryRowContext(ctx, "SELECT "+observedJobCols+" FROM observed_jobs WHERE node_id = ? AND job_id = ?",
			out.Job.NodeID, id))
		switch {
		case err == nil:
			out.Observed = &o
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		out.Peers, err = jobPeers(ctx, q, out.Job)
		return err
	})
	if err != nil {
		return JobState{}, err
	}
	return out, nil
}

// JobStates returns the state of every job by id, read in one transaction
// with four queries whatever their number, and two more per split job.
func (s *Store) JobStates(ctx context.Context) ([]JobState, error) {
	var out []JobState
	err := s.readTx(ctx, func(q querier) error {
		jobs, err := listJobs(ctx, q)
		if err != nil {
			return err
		}
		versions := map[string]JobVersion{}
		rows, err := q.QueryContext(ctx, `SELECT v.job_id, v.version, v.spec, v.plan, v.upgrade_id, v.created_at
			FROM job_versions v JOIN jobs j ON j.job_id = v.job_id AND j.version = v.version`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			v, err := scanJobVersion(rows)
			if err != nil {
				return err
			}
			versions[v.JobID] = v
		}
		if err := rows.Err(); err != nil {
			return err
		}
		latest := map[string]Intent{}
		irows, err := q.QueryContext(ctx, "SELECT "+intentCols+` FROM intents WHERE seq IN (SELECT MAX(i.seq) FROM intents i
			JOIN jobs j ON i.node_id = j.node_id AND i.resource_id = j.job_id WHERE i.resource_kind = 'job' GROUP BY j.job_id)`)
		if err != nil {
			return err
		}
		defer irows.Close()
		for irows.Next() {
			in, err := scanIntent(irows)
			if err != nil {
				return err
			}
			latest[in.ResourceID] = in
		}
		if err := irows.Err(); err != nil {
			return err
		}
		observed := map[string]ObservedJob{}
		orows, err := q.QueryContext(ctx, `SELECT o.node_id, o.job_id, o.state, o.generation, o.version, o.action_id,
			o.last_error, o.last_error_at, o.detail, o.updated_at
			FROM observed_jobs o JOIN jobs j ON o.node_id = j.node_id AND o.job_id = j.job_id`)
		if err != nil {
			return err
		}
		defer orows.Close()
		for orows.Next() {
			o, err := scanObservedJob(orows)
			if err != nil {
				return err
			}
			observed[o.JobID] = o
		}
		if err := orows.Err(); err != nil {
			return err
		}
		out = make([]JobState, 0, len(jobs))
		for _, j := range jobs {
			st := JobState{Job: j, Version: versions[j.ID]}
			if in, ok := latest[j.ID]; ok {
				st.Latest = &in
			}
			if o, ok := observed[j.ID]; ok {
				st.Observed = &o
			}
			if st.Peers, err = jobPeers(ctx, q, j); err != nil {
				return err
			}
			out = append(out, st)
		}
		return nil
	})
	return out, err
}

const upgradeCols = `upgrade_id, job_id, from_version, to_version, mode, strict, restore, fallback, state, operation_id,
	created_at, rolled_back_at`

func scanUpgrade(r scanner) (Upgrade, error) {
	var u Upgrade
	var restore string
	var c, rb int64
	if err := r.Scan(&u.UpgradeID, &u.JobID, &u.FromVersion, &u.ToVersion, &u.Mode, &u.Strict, &restore, &u.Fallback,
		&u.State, &u.OperationID, &c, &rb); err != nil {
		return u, err
	}
	if restore != "" {
		u.Restore = &wire.ArtifactRef{}
		if err := json.Unmarshal([]byte(restore), u.Restore); err != nil {
			return u, fmt.Errorf("upgrade %q restore: %w", u.UpgradeID, err)
		}
	}
	u.CreatedAt, u.RolledBackAt = wire.At(tm(c)), wire.At(tm(rb))
	return u, nil
}

// Upgrades returns a job's upgrades, newest first.
func (s *Store) Upgrades(ctx context.Context, jobID string) ([]Upgrade, error) {
	out := []Upgrade{}
	err := s.read(ctx, func(q querier) error {
		rows, err := q.QueryContext(ctx, "SELECT "+upgradeCols+` FROM job_upgrades WHERE job_id = ?
			ORDER BY created_at DESC, rowid DESC`, jobID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			u, err := scanUpgrade(rows)
			if err != nil {
				return err
			}
			out = append(out, u)
		}
		return rows.Err()
	})
	return out, err
}

// GetUpgrade returns one upgrade of a job, or ErrNotFound.
func (s *Store) GetUpgrade(ctx context.Context, jobID, upgradeID string) (Upgrade, error) {
	var u Upgrade
	err := s.read(ctx, func(q querier) error {
		var err error
		u, err = scanUpgrade(q.QueryRowContext(ctx, "SELECT "+upgradeCols+" FROM job_upgrades WHERE upgrade_id = ? AND job_id = ?",
			upgradeID, jobID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("upgrade %q of job %q: %w", upgradeID, jobID, ErrNotFound)
		}
		return err
	})
	return u, err
}

// jobPeers reads a split job's other nodes: the latest desired intent at
// each and its observation of the job (nil for a colocated job).
func jobPeers(ctx context.Context, q querier, j Job) ([]JobPeer, error) {
	var out []JobPeer
	for _, n := range j.Nodes() {
		if n != j.NodeID {
			out = append(out, JobPeer{NodeID: n})
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	rows, err := q.QueryContext(ctx, "SELECT "+intentCols+` FROM intents WHERE seq IN (SELECT MAX(seq) FROM intents
		WHERE resource_kind = 'job' AND resource_id = ? AND node_id != ? GROUP BY node_id)`, j.ID, j.NodeID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		in, err := scanIntent(rows)
		if err != nil {
			return nil, err
		}
		if i := slices.IndexFunc(out, func(p JobPeer) bool { return p.NodeID == in.NodeID }); i >= 0 {
			out[i].Latest = &in
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	orows, err := q.QueryContext(ctx, "SELECT "+observedJobCols+" FROM observed_jobs WHERE job_id = ? AND node_id != ?", j.ID, j.NodeID)
	if err != nil {
		return nil, err
	}
	defer orows.Close()
	for orows.Next() {
		o, err := scanObservedJob(orows)
		if err != nil {
			return nil, err
		}
		if i := slices.IndexFunc(out, func(p JobPeer) bool { return p.NodeID == o.NodeID }); i >= 0 {
			out[i].Observed = &o
		}
	}
	return out, orows.Err()
}

// JobSplits returns the split placement, data secret included, of each
// of the given jobs that is split, by job id: what the Hub adds to the
// job_start commands it dispatches. Unknown and colocated jobs are absent.
func (s *Store) JobSplits(ctx context.Context, jobIDs []string) (map[string]JobSplit, error) {
	out := map[string]JobSplit{}
	if len(jobIDs) == 0 {
		return out, nil
	}
	ids, err := json.Marshal(jobIDs)
	if err != nil {
		return nil, err
	}
	err = s.read(ctx, func(q querier) error {
		rows, err := q.QueryContext(ctx, `SELECT job_id, task_nodes, node_data_ports, data_secret, node_data_fingerprints FROM jobs
			WHERE placement = ? AND job_id IN (SELECT value FROM json_each(?))`, wire.PlacementSplit, string(ids))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id, taskNodes, ports, fps string
			var sp JobSplit
			if err := rows.Scan(&id, &taskNodes, &ports, &sp.DataSecret, &fps); err != nil {
				return err
			}
			if err := errors.Join(optUnmarshal(taskNodes, &sp.TaskNodes), optUnmarshal(ports, &sp.NodeDataPorts),
				optUnmarshal(fps, &sp.NodeDataFingerprints)); err != nil {
				return fmt.Errorf("job %q placement: %w", id, err)
			}
			out[id] = sp
		}
		return rows.Err()
	})
	return out, err
}
