package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flowplane/flowplane/internal/hub/rollout"
	"github.com/flowplane/flowplane/internal/wire"
)

// ActionRolloutRollback is the audit action of a rollout's rollback apply:
// SaveRollout leaves the VersionTarget of a node whose apply has it.
const ActionRolloutRollback = "rollout_rollback"

const rolloutCols = `rollout_id, revision, state, format, content, config_version, source_node_id, sha256, waves,
	gate_timeout_ms, soak_ms, pause_ms, max_failures, current_wave, wave_passed_at, failures, failure_code,
	failure_message, actor, actor_kind, correlation_id, created_at, updated_at, finished_at`

func scanRollout(r scanner) (Rollout, error) {
	var out Rollout
	var waves string
	var gate, soak, pause, passed, c, u, f int64
	if err := r.Scan(&out.ID, &out.Revision, &out.State, &out.Format, &out.Content, &out.ConfigVersion, &out.SourceNodeID,
		&out.SHA256, &waves, &gate, &soak, &pause, &out.Plan.MaxFailures, &out.CurrentWave, &passed, &out.Failures,
		&out.FailureCode, &out.FailureMsg, &out.Actor, &out.ActorKind, &out.CorrelationID, &c, &u, &f); err != nil {
		return out, err
	}
	if err := json.Unmarshal([]byte(waves), &out.Plan.Waves); err != nil {
		return out, fmt.Errorf("rollout %q waves: %w", out.ID, err)
	}
	out.Plan.GateTimeout, out.Plan.Soak, out.Plan.Pause = msDur(gate), msDur(soak), msDur(pause)
	out.WavePassed, out.CreatedAt, out.UpdatedAt, out.FinishedAt = tm(passed), tm(c), tm(u), tm(f)
	return out, nil
}

func msDur(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

const rolloutNodeCols = `rollout_id, node_id, wave, phase, version_before, node_version_before, version_target, generation,
	operation_id, applied_at, healthy_since, failure_code, failure_message, updated_at`

func scanRolloutNode(r scanner) (string, rollout.Node, error) {
	var id string
	var n rollout.Node
	var a, h, u int64
	err := r.Scan(&id, &n.NodeID, &n.Wave, &n.Phase, &n.VersionBefore, &n.NodeVersionBefore, &n.VersionTarget,
		&n.Generation, &n.OperationID, &a, &h, &n.FailureCode, &n.FailureMsg, &u)
	n.AppliedAt, n.HealthySince, n.UpdatedAt = tm(a), tm(h), tm(u)
	return id, n, err
}

// sortNodes orders r's nodes as its waves list them (wave order, then the
// order within the wave); nodes no wave names come last by id.
func sortNodes(r *Rollout) {
	pos := map[string]int{}
	for _, w := range r.Plan.Waves {
		for _, n := range w {
			if _, ok := pos[n]; !ok {
				pos[n] = len(pos)
			}
		}
	}
	at := func(n rollout.Node) int {
		if p, ok := pos[n.NodeID]; ok {
			return p
		}
		return len(pos)
	}
	slices.SortStableFunc(r.Nodes, func(a, b rollout.Node) int {
		if d := a.Wave - b.Wave; d != 0 {
			return d
		}
		if d := at(a) - at(b); d != 0 {
			return d
		}
		if a.NodeID < b.NodeID {
			return -1
		}
		if a.NodeID > b.NodeID {
			return 1
		}
		return 0
	})
}

// loadRolloutNodes fills the nodes of rs (by rollout id) in one query.
func loadRolloutNodes(ctx context.Context, q querier, rs []Rollout) error {
	if len(rs) == 0 {
		return nil
	}
	idx := make(map[string]int, len(rs))
	ids := make([]string, len(rs))
	for i, r := range rs {
		idx[r.ID], ids[i] = i, r.ID
		rs[i].Nodes = []rollout.Node{}
	}
	b, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	rows, err := q.QueryContext(ctx, "SELECT "+rolloutNodeCols+` FROM rollout_nodes
		WHERE rollout_id IN (SELECT value FROM json_each(?))`, string(b))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		id, n, err := scanRolloutNode(rows)
		if err != nil {
			return err
		}
		if i, ok := idx[id]; ok {
			rs[i].Nodes = append(rs[i].Nodes, n)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range rs {
		sortNodes(&rs[i])
	}
	return nil
}

func getRollout(ctx context.Context, q querier, id string) (Rollout, error) {
	r, err := scanRollout(q.QueryRowContext(ctx, "SELECT "+rolloutCols+" FROM rollouts WHERE rollout_id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("rollout %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return r, err
	}
	rs := []Rollout{r}
	err = loadRolloutNodes(ctx, q, rs)
	return rs[0], err
}

// queryRollouts reads the rollouts a query selects (rolloutCols) with
// their nodes.
func queryRollouts(ctx context.Context, q querier, query string, args ...any) ([]Rollout, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Rollout{}
	for rows.Next() {
		r, err := scanRollout(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, loadRolloutNodes(ctx, q, out)
}

// GetRollout returns one rollout with its nodes (ErrNotFound).
func (s *Store) GetRollout(ctx context.Context, id string) (Rollout, error) {
	var out Rollout
	err := s.readTx(ctx, func(q querier) error {
		var err error
		out, err = getRollout(ctx, q, id)
		return err
	})
	return out, err
}

// ListRollouts pages rollouts, newest first, with their nodes.
func (s *Store) ListRollouts(ctx context.Context, f RolloutFilter, p Paging) (wire.Page[Rollout], error) {
	out := wire.Page[Rollout]{Items: []Rollout{}, Page: p.Page, PageSize: p.PageSize}
	if err := p.check(); err != nil {
		return out, err
	}
	w := &where{}
	w.eq("state", f.State)
	err := s.readTx(ctx, func(q querier) error {
		var err error
		out.Items, out.Total, err = listPage(ctx, q, p, f.Visible, scanRollout, "SELECT COUNT(*) FROM rollouts"+w.String(),
			"SELECT "+rolloutCols+" FROM rollouts"+w.String()+" ORDER BY created_at DESC, rowid DESC", w.args...)
		if err != nil {
			return err
		}
		return loadRolloutNodes(ctx, q, out.Items)
	})
	return out, err
}

// ActiveRollouts returns the rollouts Step still has work on: pending,
// running, paused, and rolled_back ones with a node rolling_back; oldest
// first.
func (s *Store) ActiveRollouts(ctx context.Context) ([]Rollout, error) {
	var out []Rollout
	err := s.readTx(ctx, func(q querier) error {
		var err error
		out, err = queryRollouts(ctx, q, "SELECT "+rolloutCols+` FROM rollouts WHERE state IN (?, ?, ?)
			OR (state = ? AND EXISTS (SELECT 1 FROM rollout_nodes n WHERE n.rollout_id = rollouts.rollout_id AND n.phase = ?))
			ORDER BY created_at, rowid`, wire.RolloutPending, wire.RolloutRunning, wire.RolloutPaused,
			wire.RolloutRolledBack, wire.RolloutNodeRollingBack)
		return err
	})
	return out, err
}

func (r Rollout) check() error {
	if r.ID == "" || r.CreatedAt.IsZero() {
		return fmt.Errorf("%w: a rollout needs an id and a creation time", ErrInvalid)
	}
	seen := map[string]bool{}
	for _, n := range r.Nodes {
		if n.NodeID == "" || seen[n.NodeID] {
			return fmt.Errorf("%w: rollout %q: node id %q empty or twice", ErrInvalid, r.ID, n.NodeID)
		}
		seen[n.NodeID] = true
	}
	return nil
}

// CreateRollout inserts r (revision 1; state pending when empty) with its
// nodes, an audit row (action rollout_create, accepted) and a
// rollout_changed event, in one transaction. ErrExists when the id is
// taken.
func (s *Store) CreateRollout(ctx context.Context, r Rollout) error {
	if err := r.check(); err != nil {
		return err
	}
	r.Revision = 1
	if r.State == "" {
		r.State = wire.RolloutPending
	}
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = r.CreatedAt
	}
	return s.write(ctx, func(ctx context.Context, q querier) error {
		var n int
		if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM rollouts WHERE rollout_id = ?", r.ID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("rollout %q: %w", r.ID, ErrExists)
		}
		if err := putRollout(ctx, q, r); err != nil {
			return err
		}
		if _, err := insertAudit(ctx, q, AuditRecord{OccurredAt: wire.At(r.CreatedAt), Actor: r.Actor, ActorKind: r.ActorKind, Action: "rollout_create",
			ResourceType: "rollout", ResourceID: r.ID, CorrelationID: r.CorrelationID, Outcome: OutcomeAccepted}); err != nil {
			return err
		}
		e := event(wire.EventRolloutChanged, r.CreatedAt, "", r.ID, "", r.CorrelationID, r.Actor, r.ActorKind, OutcomeAccepted, "rollout created")
		e.Data = map[string]any{"state": r.State, "nodes": len(r.Nodes), "waves": len(r.Plan.Waves)}
		_, err := insertEvent(ctx, q, e)
		return err
	})
}

// putRollout writes the rollout row of r and its nodes (inserted or
// replaced; a node record is never deleted).
func putRollout(ctx context.Context, q querier, r Rollout) error {
	waves, err := json.Marshal(r.Plan.Waves)
	if err != nil {
		return err
	}
	if r.Plan.Waves == nil {
		waves = []byte("[]")
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO rollouts (rollout_id, revision, state, format, content, config_version,
		source_node_id, sha256, waves, gate_timeout_ms, soak_ms, pause_ms, max_failures, current_wave, wave_passed_at,
		failures, failure_code, failure_message, actor, actor_kind, correlation_id, created_at, updated_at, finished_at)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT (rollout_id) DO UPDATE SET revision = excluded.revision, state = excluded.state,
		current_wave = excluded.current_wave, wave_passed_at = excluded.wave_passed_at, failures = excluded.failures,
		failure_code = excluded.failure_code, failure_message = excluded.failure_message,
		updated_at = excluded.updated_at, finished_at = excluded.finished_at`,
		r.ID, r.Revision, r.State, r.Format, r.Content, r.ConfigVersion, r.SourceNodeID, r.SHA256, string(waves),
		r.Plan.GateTimeout.Milliseconds(), r.Plan.Soak.Milliseconds(), r.Plan.Pause.Milliseconds(), r.Plan.MaxFailures,
		r.CurrentWave, ms(r.WavePassed), r.Failures, r.FailureCode, r.FailureMsg, r.Actor, r.ActorKind, r.CorrelationID,
		ms(r.CreatedAt), ms(r.UpdatedAt), ms(r.FinishedAt)); err != nil {
		return err
	}
	for _, n := range r.Nodes {
		if _, err := q.ExecContext(ctx, `INSERT INTO rollout_nodes (rollout_id, node_id, wave, phase,
			version_before, node_version_before, version_target, generation, operation_id, applied_at, healthy_since,
			failure_code, failure_message, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)
			ON CONFLICT (rollout_id, node_id) DO UPDATE SET wave = excluded.wave, phase = excluded.phase,
			version_before = excluded.version_before, node_version_before = excluded.node_version_before,
			version_target = excluded.version_target, generation = excluded.generation, operation_id = excluded.operation_id,
			applied_at = excluded.applied_at, healthy_since = excluded.healthy_since, failure_code = excluded.failure_code,
			failure_message = excluded.failure_message, updated_at = excluded.updated_at`,
			r.ID, n.NodeID, n.Wave, n.Phase, n.VersionBefore, n.NodeVersionBefore, n.VersionTarget, n.Generation,
			n.OperationID, ms(n.AppliedAt), ms(n.HealthySince), n.FailureCode, n.FailureMsg, ms(n.UpdatedAt)); err != nil {
			return err
		}
	}
	return nil
}

// SaveRollout commits u: ErrRolloutConflict when the stored revision is not
// u.Rollout.Revision (ErrNotFound for an unknown rollout); otherwise the
// rollout row and its nodes, the applies, events and audit rows,
// revision+1. What a rollout was created with (configuration, plan, actor)
// is kept as stored.
//
// Each apply is written by WriteConfig's rules and must be for one of the
// rollout's nodes; one that fails (ErrNotFound version, conflict, ...)
// rolls the whole save back. A new version it creates is labelled source
// rollout with the rollout's id unless the write says otherwise. The
// node's Generation and OperationID become the write's generation and
// intent id, and its VersionTarget the Hub version the write desired,
// except for a rollback (Action ActionRolloutRollback), which leaves it.
func (s *Store) SaveRollout(ctx context.Context, u RolloutUpdate) (RolloutUpdateResult, error) {
	var res RolloutUpdateResult
	r := u.Rollout
	if r.ID == "" {
		return res, fmt.Errorf("%w: rollout id is required", ErrInvalid)
	}
	for i := range u.Applies {
		w := &u.Applies[i]
		if w.Content != "" {
			if w.Source == "" {
				w.Source = wire.ConfigSourceRollout
			}
			if w.RolloutID == "" {
				w.RolloutID = r.ID
			}
		}
		if err := w.check(); err != nil {
			return res, err
		}
		if !slices.ContainsFunc(r.Nodes, func(n rollout.Node) bool { return n.NodeID == w.NodeID }) {
			return res, fmt.Errorf("%w: apply for node %q, not a node of rollout %q", ErrInvalid, w.NodeID, r.ID)
		}
	}
	err := s.write(ctx, func(ctx context.Context, q querier) error {
		res = RolloutUpdateResult{}
		cur, err := getRollout(ctx, q, r.ID)
		if err != nil {
			return err
		}
		if cur.Revision != r.Revision {
			return fmt.Errorf("rollout %q: revision %d, stored %d: %w", r.ID, r.Revision, cur.Revision, ErrRolloutConflict)
		}
		next := cur
		next.Revision = cur.Revision + 1
		next.State, next.CurrentWave, next.WavePassed, next.Failures = r.State, r.CurrentWave, r.WavePassed, r.Failures
		next.FailureCode, next.FailureMsg, next.UpdatedAt, next.FinishedAt = r.FailureCode, r.FailureMsg, r.UpdatedAt, r.FinishedAt
		next.Nodes = slices.Clone(r.Nodes)
		for _, n := range cur.Nodes {
			if !slices.ContainsFunc(next.Nodes, func(m rollout.Node) bool { return m.NodeID == n.NodeID }) {
				next.Nodes = append(next.Nodes, n) // stored, so kept
			}
		}
		for _, w := range u.Applies {
			wr, err := writeConfig(ctx, q, w)
			if err != nil {
				return fmt.Errorf("rollout %q apply for node %q: %w", r.ID, w.NodeID, err)
			}
			i := slices.IndexFunc(next.Nodes, func(n rollout.Node) bool { return n.NodeID == w.NodeID })
			next.Nodes[i].Generation, next.Nodes[i].OperationID = wr.Generation, wr.Intent.ID
			if w.Action != ActionRolloutRollback {
				next.Nodes[i].VersionTarget = wr.Version
			}
			res.Intents = append(res.Intents, wr.Intent)
		}
		if err := putRollout(ctx, q, next); err != nil {
			return err
		}
		for _, e := range u.Events {
			if _, err := insertEvent(ctx, q, e); err != nil {
				return err
			}
		}
		for _, a := range u.Audit {
			if _, err := insertAudit(ctx, q, a); err != nil {
				return err
			}
		}
		sortNodes(&next)
		res.Rollout, res.Txn = next, txnOf(q)
		return nil
	})
	if err != nil {
		return RolloutUpdateResult{}, err
	}
	return res, nil
}
