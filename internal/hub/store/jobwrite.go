package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// fencePayload is the command payload (with the job's version) of the job_stop a move sends to the
// job's old node.
const fencePayload = `{"state":"stopped","job_version":%s}`

func (w JobWrite) check() error {
	if w.IntentID == "" || w.Operation == "" || w.JobID == "" || w.Now.IsZero() || w.Spread == nil {
		return fmt.Errorf("%w: intent id, operation, job id, spread and now are required", ErrInvalid)
	}
	if w.State != wire.JobRunning && w.State != wire.JobStopped {
		return fmt.Errorf("%w: job desired state %q", ErrInvalid, w.State)
	}
	if w.Create != nil && (w.NodeID == "" || w.Create.Version.Version < 1) {
		return fmt.Errorf("%w: a new job needs a node and a version", ErrInvalid)
	}
	if sp := w.Split; sp != nil && (len(sp.TaskNodes) == 0 || sp.DataSecret == "") {
		return fmt.Errorf("%w: a split placement needs task nodes and a data secret", ErrInvalid)
	}
	if w.NewVersion != nil && w.NewVersion.Version < 1 {
		return fmt.Errorf("%w: version %d", ErrInvalid, w.NewVersion.Version)
	}
	if w.Upgrade != nil && (w.Upgrade.UpgradeID == "" || w.Upgrade.Mode == "") {
		return fmt.Errorf("%w: an upgrade needs an id and a mode", ErrInvalid)
	}
	return checkJSON("payload", w.Payload)
}

func checkJSON(what string, b json.RawMessage) error {
	if len(b) > 0 && !json.Valid(b) {
		return fmt.Errorf("%w: %s is not JSON", ErrInvalid, what)
	}
	return nil
}

// WriteJob commits one job mutation (see JobWrite). The resources row of
// the job at each node it runs on after the write (its node; a split
// job's every node) holds its desired state, generation and action id,
// and its current version as the decimal config_version; each gets an
// intent. Superseded are the pending intents of the resources rows the
// write sets: the job's at its nodes and, on a move, at the nodes it
// leaves; a fence intent of an earlier move, pending for a third node,
// stays: it is what stops the job there when that node comes back.
func (s *Store) WriteJob(ctx context.Context, w JobWrite) (JobWriteResult, error) {
	var res JobWriteResult
	if err := w.check(); err != nil {
		return res, err
	}
	err := s.write(ctx, func(ctx context.Context, q querier) error {
		res = JobWriteResult{}
		j, err := getJob(ctx, q, w.JobID)
		switch {
		case w.Create != nil && err == nil:
			return fmt.Errorf("job %q: %w", w.JobID, ErrExists)
		case w.Create != nil && errors.Is(err, ErrNotFound):
			j = Job{ID: w.JobID, NodeID: w.NodeID, Strategy: w.Create.Strategy, Requested: w.Create.Requested,
				Version: w.Create.Version.Version, CreatedAt: w.Now}
		case err != nil:
			return err
		}
		if w.IfMatch != nil && *w.IfMatch != j.Generation {
			return &GenerationConflictError{Expected: *w.IfMatch, Current: j.Generation}
		}
		var oldNodes []string
		if w.Create == nil {
			oldNodes = j.Nodes()
		}
		if w.NodeID != "" {
			j.NodeID = w.NodeID
		}
		if w.Split != nil {
			j.Placement, j.TaskNodes, j.NodeDataPorts = wire.PlacementSplit, w.Split.TaskNodes, w.Split.NodeDataPorts
		}
		nodes := j.Nodes()
		if !slices.Contains(nodes, j.NodeID) {
			return fmt.Errorf("%w: node %q runs no task of the job's split placement", ErrInvalid, j.NodeID)
		}
		peers, fences := w.Spread(oldNodes, nodes, j.NodeID)
		extra := len(peers) + len(fences)
		if w.FenceIntentID != "" && len(fences) > 0 {
			extra--
		}
		if extra > 0 && w.NewIntentID == nil {
			if len(fences) > 0 {
				return fmt.Errorf("%w: a move needs a fence intent id", ErrInvalid)
			}
			return fmt.Errorf("%w: a split job needs an intent id per node", ErrInvalid)
		}
		if err := s.writeJobRecords(ctx, q, w, &j); err != nil {
			return err
		}
		in := Intent{ID: w.IntentID, Operation: w.Operation, NodeID: j.NodeID, Kind: KindJob, ResourceID: j.ID,
			Generation: j.Generation, DesiredState: w.State, ConfigVersion: strconv.Itoa(j.Version), ActionID: w.ActionID,
			CorrelationID: w.CorrelationID, Actor: w.Actor, ActorKind: w.ActorKind, Payload: w.Payload, CreatedAt: w.Now, ExpiresAt: w.ExpiresAt}
		if res.Intent, err = s.desireJob(ctx, q, in); err != nil {
			return err
		}
		if err := s.at("after_intent"); err != nil {
			return err
		}
		for _, n := range peers {
			peer := in
			peer.ID, peer.NodeID = w.NewIntentID(), n
			p, err := s.desireJob(ctx, q, peer)
			if err != nil {
				return err
			}
			res.Peers = append(res.Peers, p)
		}
		for i, n := range fences {
			fence := in
			fence.Operation, fence.NodeID, fence.DesiredState = wire.CommandJobStop, n, wire.JobStopped
			if fence.ID = w.FenceIntentID; i > 0 || fence.ID == "" {
				fence.ID = w.NewIntentID()
			}
			// The fence never expires: it stops the job on the old node
			// whenever that node comes back.
			fence.Payload, fence.ExpiresAt = json.RawMessage(fmt.Sprintf(fencePayload, in.ConfigVersion)), time.Time{}
			f, err := s.desireJob(ctx, q, fence)
			if err != nil {
				return err
			}
			res.Fences = append(res.Fences, f)
		}
		if len(res.Fences) > 0 {
			res.FenceIntent = &res.Fences[0]
		}
		action := w.Action
		if action == "" {
			action = w.Operation
		}
		if _, err := insertAudit(ctx, q, AuditRecord{OccurredAt: wire.At(w.Now), Actor: w.Actor, ActorKind: w.ActorKind, Action: action,
			ResourceType: KindJob, ResourceID: j.ID, NodeID: j.NodeID, CorrelationID: w.CorrelationID,
			Outcome: OutcomeAccepted}); err != nil {
			return err
		}
		res.Generation = j.Generation
		res.Txn = txnOf(q)
		return nil
	})
	if err != nil {
		return JobWriteResult{}, err
	}
	return res, nil
}

// writeJobRecords stores the job row of w (generation+1, placement,
// version, restore choice), its new version and its upgrade records; j is
// the job before the write and becomes the job after it.
func (s *Store) writeJobRecords(ctx context.Context, q querier, w JobWrite, j *Job) error {
	now := ms(w.Now)
	if w.Create != nil {
		if err := insertJobVersion(ctx, q, j.ID, w.Create.Version, now); err != nil {
			return err
		}
	}
	if w.NewVersion != nil {
		if err := insertJobVersion(ctx, q, j.ID, *w.NewVersion, now); err != nil {
			return err
		}
	}
	if w.Version != 0 {
		var n int
		if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM job_versions WHERE job_id = ? AND version = ?", j.ID, w.Version).
			Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: job %q has no version %d", ErrInvalid, j.ID, w.Version)
		}
		j.Version = w.Version
	}
	if w.SetRestore {
		j.Restore = w.Restore
	}
	j.Generation++
	j.DesiredState, j.ActionID, j.UpdatedAt = w.State, w.ActionID, w.Now
	requested, err := json.Marshal(nonNil(j.Requested))
	if err != nil {
		return err
	}
	restore, err := optJSON(j.Restore)
	if err != nil {
		return err
	}
	if j.Placement == "" {
		j.Placement = wire.PlacementColocated
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO jobs (job_id, node_id, strategy, requested, version, generation,
		desired_state, action_id, restore, created_at, updated_at, placement) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT (job_id) DO UPDATE SET node_id = excluded.node_id, version = excluded.version,
		generation = excluded.generation, desired_state = excluded.desired_state, action_id = excluded.action_id,
		restore = excluded.restore, updated_at = excluded.updated_at`,
		j.ID, j.NodeID, j.Strategy, string(requested), j.Version, j.Generation, j.DesiredState, j.ActionID, restore,
		ms(j.CreatedAt), now, j.Placement); err != nil {
		return err
	}
	if sp := w.Split; sp != nil {
		taskNodes, err := json.Marshal(sp.TaskNodes)
		if err != nil {
			return err
		}
		ports, err := json.Marshal(nonNilMap(sp.NodeDataPorts))
		if err != nil {
			return err
		}
		fps, err := json.Marshal(nonNilMap(sp.NodeDataFingerprints))
		if err != nil {
			return err
		}
		// The secret goes to this row only (see migration 0006).
		if _, err := q.ExecContext(ctx, `UPDATE jobs SET placement = ?, task_nodes = ?, node_data_ports = ?, data_secret = ?,
			node_data_fingerprints = ? WHERE job_id = ?`, wire.PlacementSplit, string(taskNodes), string(ports), sp.DataSecret, string(fps), j.ID); err != nil {
			return err
		}
	}
	if w.Upgrade != nil {
		if err := insertUpgrade(ctx, q, j.ID, *w.Upgrade, w.IntentID, now); err != nil {
			return err
		}
	}
	if w.RollBack != "" {
		r, err := q.ExecContext(ctx, `UPDATE job_upgrades SET state = ?, rolled_back_at = ? WHERE upgrade_id = ? AND job_id = ?`,
			wire.UpgradeRolledBack, now, w.RollBack, j.ID)
		if err != nil {
			return err
		}
		if err := mustAffect(r, "upgrade "+w.RollBack); err != nil {
			return err
		}
	}
	return nil
}

func insertJobVersion(ctx context.Context, q querier, jobID string, v JobVersion, now int64) error {
	if err := errors.Join(checkJSON("spec", v.Spec), checkJSON("plan", v.Plan)); err != nil {
		return err
	}
	var n int
	if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM job_versions WHERE job_id = ? AND version = ?", jobID, v.Version).
		Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("job %q version %d: %w", jobID, v.Version, ErrExists)
	}
	at := ms(v.CreatedAt)
	if at == 0 {
		at = now
	}
	_, err := q.ExecContext(ctx, `INSERT INTO job_versions (job_id, version, spec, plan, upgrade_id, created_at)
		VALUES (?,?,?,?,?,?)`, jobID, v.Version, string(v.Spec), string(v.Plan), v.UpgradeID, at)
	return err
}

func insertUpgrade(ctx context.Context, q querier, jobID string, u Upgrade, intentID string, now int64) error {
	restore, err := optJSON(u.Restore)
	if err != nil {
		return err
	}
	if u.State == "" {
		u.State = wire.UpgradeApplied
	}
	if u.OperationID == "" {
		u.OperationID = intentID
	}
	at := ms(u.CreatedAt.Time)
	if at == 0 {
		at = now
	}
	_, err = q.ExecContext(ctx, `INSERT INTO job_upgrades (upgrade_id, job_id, from_version, to_version, mode, strict,
		restore, fallback, state, operation_id, created_at, rolled_back_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`,
		u.UpgradeID, jobID, u.FromVersion, u.ToVersion, u.Mode, u.Strict, restore, u.Fallback, u.State, u.OperationID,
		at, ms(u.RolledBackAt.Time))
	return err
}

// nonNilMap is m, or an empty map for nil (JSON {} rather than null).
func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// optJSON is v as JSON text, or "" for a nil pointer.
func optJSON[T any](v *T) (string, error) {
	if v == nil {
		return "", nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// desireJob sets the job's resources row at in.NodeID to in's desired
// state, supersedes that row's pending intents and writes in (pending)
// with its outbox row and an intent_accepted event. It returns in as
// written.
func (s *Store) desireJob(ctx context.Context, q querier, in Intent) (Intent, error) {
	in.Kind = KindJob
	version, _ := strconv.Atoi(in.ConfigVersion)
	return desire(ctx, q, in, map[string]any{"generation": in.Generation, "desired_state": in.DesiredState, "version": version})
}

// desire sets the resources row of in (kind, node, resource) to in's
// desired state, generation, config version and action id, supersedes
// that row's pending intents and writes in (pending) with its outbox row
// and an intent_accepted event carrying data. It returns in as written.
func desire(ctx context.Context, q querier, in Intent, data map[string]any) (Intent, error) {
	if err := upsertResource(ctx, q, Resource{NodeID: in.NodeID, Kind: in.Kind, ResourceID: in.ResourceID,
		State: in.DesiredState, ConfigVersion: in.ConfigVersion, Generation: in.Generation, ActionID: in.ActionID,
		UpdatedAt: in.CreatedAt}); err != nil {
		return in, err
	}
	if _, err := supersedePending(ctx, q, in.NodeID, in.Kind, in.ResourceID, ms(in.CreatedAt)); err != nil {
		return in, err
	}
	return addIntent(ctx, q, in, data)
}

// addIntent writes in as a pending intent with its outbox row and an
// intent_accepted event carrying data, and returns it as written.
func addIntent(ctx context.Context, q querier, in Intent, data map[string]any) (Intent, error) {
	now := ms(in.CreatedAt)
	var err error
	if in.Seq, err = insertRow(ctx, q, "seq", `INSERT INTO intents (id, operation, node_id, resource_kind, resource_id, generation,
		desired_state, config_version, action_id, correlation_id, actor, actor_kind, state, created_at, updated_at, expires_at, payload)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,'pending',?,?,?,?)`,
		in.ID, in.Operation, in.NodeID, in.Kind, in.ResourceID, in.Generation, in.DesiredState, in.ConfigVersion,
		in.ActionID, in.CorrelationID, in.Actor, in.ActorKind, now, now, ms(in.ExpiresAt), string(in.Payload)); err != nil {
		return in, err
	}
	in.State = wire.OpPending
	in.CreatedAt, in.UpdatedAt, in.ExpiresAt = tm(now), tm(now), tm(ms(in.ExpiresAt))
	if len(in.Payload) == 0 {
		in.Payload = nil
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO outbox (intent_id, node_id, created_at) VALUES (?,?,?)`,
		in.ID, in.NodeID, now); err != nil {
		return in, err
	}
	note(q, ChangeOutbox, in.NodeID)
	e := event(wire.EventIntentAccepted, in.CreatedAt, in.NodeID, in.ResourceID, in.ID, in.CorrelationID, in.Actor, in.ActorKind,
		OutcomeAccepted, "")
	e.Data = data
	_, err = insertEvent(ctx, q, e)
	return in, err
}

// WriteJobCommand commits one job command (see JobCommandWrite). The job
// needs not be known (job_validate checks a spec before its job exists);
// an artifact record needs the job id and a kind.
func (s *Store) WriteJobCommand(ctx context.Context, w JobCommandWrite) (Intent, error) {
	var out Intent
	if w.IntentID == "" || w.Operation == "" || w.NodeID == "" || w.Now.IsZero() {
		return out, fmt.Errorf("%w: intent id, operation, node id and now are required", ErrInvalid)
	}
	if err := checkJSON("payload", w.Payload); err != nil {
		return out, err
	}
	if a := w.Artifact; a != nil && (w.JobID == "" || (a.Kind != wire.ArtifactCheckpoint && a.Kind != wire.ArtifactSavepoint)) {
		return out, fmt.Errorf("%w: an artifact record needs a job id and a kind", ErrInvalid)
	}
	err := s.write(ctx, func(ctx context.Context, q querier) error {
		in := Intent{ID: w.IntentID, Operation: w.Operation, NodeID: w.NodeID, Kind: KindJobCommand, ResourceID: w.JobID,
			Generation: w.Generation, CorrelationID: w.CorrelationID, Actor: w.Actor, ActorKind: w.ActorKind, Payload: w.Payload,
			CreatedAt: w.Now, ExpiresAt: w.ExpiresAt}
		var err error
		if out, err = addIntent(ctx, q, in, map[string]any{"generation": w.Generation}); err != nil {
			return err
		}
		if a := w.Artifact; a != nil {
			trigger := a.Trigger
			if trigger == "" {
				trigger = wire.TriggerOperator
			}
			ops, err := json.Marshal(nonNil(a.StatefulOperators))
			if err != nil {
				return err
			}
			if _, err := q.ExecContext(ctx, `INSERT INTO job_artifacts (job_id, kind, job_version, format_version,
				max_parallelism, stateful_operators, state, trigger, node_id, operation_id, created_at)
				VALUES (?,?,?,?,?,?,'pending',?,?,?,?)`, w.JobID, a.Kind, a.JobVersion, a.FormatVersion, a.MaxParallelism,
				string(ops), trigger, w.NodeID, w.IntentID, ms(w.Now)); err != nil {
				return err
			}
		}
		_, err = insertAudit(ctx, q, AuditRecord{OccurredAt: wire.At(w.Now), Actor: w.Actor, ActorKind: w.ActorKind, Action: w.Operation,
			ResourceType: KindJob, ResourceID: w.JobID, NodeID: w.NodeID, CorrelationID: w.CorrelationID,
			Outcome: OutcomeAccepted})
		return err
	})
	if err != nil {
		return Intent{}, err
	}
	return out, nil
}
