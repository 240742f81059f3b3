package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// Resource kinds.
const (
	KindStream = "stream"
	KindJob    = "job"
)

// DesiredWrite is one accepted desired-state write. The caller makes the
// intent id and passes the time.
type DesiredWrite struct {
	IntentID   string
	Operation  string // e.g. "stream_desired_state", "job_start"
	NodeID     string
	Kind       string // KindStream or KindJob
	ResourceID string
	State      string
	// ConfigVersion and ActionID are stored as given.
	ConfigVersion string
	ActionID      string
	// IfMatch, when not nil, is the generation the client expects to be
	// current (0 for a resource never written).
	IfMatch       *int64
	CorrelationID string
	Actor         string
	ActorKind     string
	Now           time.Time
	// ExpiresAt is when the intent fails as expired if not done; zero means never.
	ExpiresAt time.Time
}

// DesiredResult is what a WriteDesired committed.
type DesiredResult struct {
	Generation int64
	// Superseded counts the older pending intents of the resource it superseded.
	Superseded int
	EventID    int64
	// Txn is the number of the transaction that committed the write (see
	// Store.Committed).
	Txn int64
	// Intent is the intent as written: pending, the resource's latest.
	Intent Intent
}

// Resource is the desired state of one resource.
type Resource struct {
	NodeID        string
	Kind          string
	ResourceID    string
	State         string
	ConfigVersion string
	Generation    int64
	ActionID      string
	UpdatedAt     time.Time
}

// WriteDesired records w in one transaction: If-Match check, generation+1,
// the intent, superseding older pending intents of the resource, an outbox
// row, an audit row and an intent_accepted event. It returns once that
// transaction is on disk. A conflict returns *GenerationConflictError.
// The node needs not be known.
func (s *Store) WriteDesired(ctx context.Context, w DesiredWrite) (DesiredResult, error) {
	var res DesiredResult
	if w.IntentID == "" || w.NodeID == "" || w.ResourceID == "" || w.Operation == "" || w.Now.IsZero() {
		return res, fmt.Errorf("%w: intent id, operation, node id, resource id and now are required", ErrInvalid)
	}
	if w.Kind != KindStream && w.Kind != KindJob {
		return res, fmt.Errorf("%w: resource kind %q", ErrInvalid, w.Kind)
	}
	if s.d.postgres {
		return s.writeDesiredPostgres(ctx, w)
	}
	err := s.write(ctx, func(ctx context.Context, q querier) error {
		res = DesiredResult{}
		var cur int64
		err := q.QueryRowContext(ctx, `SELECT generation FROM resources WHERE node_id = ? AND resource_kind = ? AND resource_id = ?`,
			w.NodeID, w.Kind, w.ResourceID).Scan(&cur)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if w.IfMatch != nil && *w.IfMatch != cur {
			return &GenerationConflictError{Expected: *w.IfMatch, Current: cur}
		}
		res.Generation = cur + 1
		now := ms(w.Now)
		if err := upsertResource(ctx, q, Resource{NodeID: w.NodeID, Kind: w.Kind, ResourceID: w.ResourceID, State: w.State,
			ConfigVersion: w.ConfigVersion, Generation: res.Generation, ActionID: w.ActionID, UpdatedAt: w.Now}); err != nil {
			return err
		}
		if res.Superseded, err = supersedePending(ctx, q, w.NodeID, w.Kind, w.ResourceID, now); err != nil {
			return err
		}
		seq, err := insertRow(ctx, q, "seq", `INSERT INTO intents (id, operation, node_id, resource_kind, resource_id, generation,
			desired_state, config_version, action_id, correlation_id, actor, actor_kind, state, created_at, updated_at, expires_at)
			VALUES (?,?,?,?,?,?,?,?,?,?,?,?,'pending',?,?,?)`,
			w.IntentID, w.Operation, w.NodeID, w.Kind, w.ResourceID, res.Generation, w.State, w.ConfigVersion, w.ActionID,
			w.CorrelationID, w.Actor, w.ActorKind, now, now, ms(w.ExpiresAt))
		if err != nil {
			return err
		}
		res.Intent = w.intent(seq, res.Generation)
		if err := s.at("after_intent"); err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO outbox (intent_id, node_id, created_at) VALUES (?,?,?)`,
			w.IntentID, w.NodeID, now); err != nil {
			return err
		}
		note(q, ChangeOutbox, w.NodeID)
		if _, err := insertAudit(ctx, q, AuditRecord{OccurredAt: wire.At(w.Now), Actor: w.Actor, ActorKind: w.ActorKind, Action: w.Operation,
			ResourceType: w.Kind, ResourceID: w.ResourceID, NodeID: w.NodeID, CorrelationID: w.CorrelationID,
			Outcome: OutcomeAccepted}); err != nil {
			return err
		}
		e := event(wire.EventIntentAccepted, w.Now, w.NodeID, w.ResourceID, w.IntentID, w.CorrelationID, w.Actor, w.ActorKind, OutcomeAccepted, "")
		e.Data = map[string]any{"generation": res.Generation, "desired_state": w.State}
		res.EventID, err = insertEvent(ctx, q, e)
		res.Txn = txnOf(q)
		return err
	})
	if err != nil {
		return DesiredResult{}, err
	}
	return res, nil
}

// writeDesiredPostgres is WriteDesired on PostgreSQL: the same rows,
// written by the database function write_desired (migration 0012) in one
// round trip.
func (s *Store) writeDesiredPostgres(ctx context.Context, w DesiredWrite) (DesiredResult, error) {
	var res DesiredResult
	err := s.write(ctx, func(ctx context.Context, q querier) error {
		res = DesiredResult{}
		now := ms(w.Now)
		var ifMatch any // NULL without If-Match
		if w.IfMatch != nil {
			ifMatch = *w.IfMatch
		}
		var conflict bool
		var seq int64
		if err := q.QueryRowContext(ctx, `SELECT o_conflict, o_generation, o_superseded, o_seq, o_event
			FROM write_desired(?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			w.IntentID, w.Operation, w.NodeID, w.Kind, w.ResourceID, w.State, w.ConfigVersion, w.ActionID,
			ifMatch, w.CorrelationID, w.Actor, w.ActorKind, now, ms(w.ExpiresAt)).
			Scan(&conflict, &res.Generation, &res.Superseded, &seq, &res.EventID); err != nil {
			return err
		}
		if conflict {
			return &GenerationConflictError{Expected: *w.IfMatch, Current: res.Generation}
		}
		res.Intent = w.intent(seq, res.Generation)
		if err := s.at("after_intent"); err != nil {
			return err
		}
		note(q, ChangeOutbox, w.NodeID)
		e := event(wire.EventIntentAccepted, w.Now, w.NodeID, w.ResourceID, w.IntentID, w.CorrelationID, w.Actor, w.ActorKind, OutcomeAccepted, "")
		e.Data = map[string]any{"generation": res.Generation, "desired_state": w.State}
		res.Txn = txnOf(q)
		return logEvent(q, e, res.EventID, "")
	})
	if err != nil {
		return DesiredResult{}, err
	}
	return res, nil
}

// intent is the pending intent w writes, as stored at seq and generation.
func (w DesiredWrite) intent(seq, generation int64) Intent {
	now := ms(w.Now)
	return Intent{Seq: seq, ID: w.IntentID, Operation: w.Operation, NodeID: w.NodeID, Kind: w.Kind,
		ResourceID: w.ResourceID, Generation: generation, DesiredState: w.State, ConfigVersion: w.ConfigVersion,
		ActionID: w.ActionID, CorrelationID: w.CorrelationID, Actor: w.Actor, ActorKind: w.ActorKind, State: wire.OpPending,
		CreatedAt: tm(now), UpdatedAt: tm(now), ExpiresAt: tm(ms(w.ExpiresAt))}
}

// upsertResource sets the desired state of one resource (r.UpdatedAt
// stored as the update time).
func upsertResource(ctx context.Context, q querier, r Resource) error {
	_, err := q.ExecContext(ctx, `INSERT INTO resources (node_id, resource_kind, resource_id, state, config_version,
		generation, action_id, updated_at) VALUES (?,?,?,?,?,?,?,?)
		ON CONFLICT (node_id, resource_kind, resource_id) DO UPDATE SET state = excluded.state,
		config_version = excluded.config_version, generation = excluded.generation,
		action_id = excluded.action_id, updated_at = excluded.updated_at`,
		r.NodeID, r.Kind, r.ResourceID, r.State, r.ConfigVersion, r.Generation, r.ActionID, ms(r.UpdatedAt))
	return err
}

// supersedePending supersedes the pending intents of one resource at now
// (ms) and marks their outbox rows processed; it returns how many.
// Superseded intents are never dispatched. Usually one intent per
// resource is pending, or two while a timed-out attempt's retry waits
// beside a newer write; each is updated by its seq, a one-row statement
// that needs no statement journal.
func supersedePending(ctx context.Context, q querier, nodeID, kind, resourceID string, now int64) (int, error) {
	pending, err := pendingIntents(ctx, q, nodeID, kind, resourceID)
	if err != nil {
		return 0, err
	}
	for _, p := range pending {
		if _, err := q.ExecContext(ctx, `UPDATE intents SET state = 'superseded', updated_at = ?, finished_at = ? WHERE seq = ?`,
			now, now, p.seq); err != nil {
			return 0, err
		}
		if _, err := q.ExecContext(ctx, `UPDATE outbox SET processed_at = ? WHERE intent_id = ? AND processed_at IS NULL`,
			now, p.id); err != nil {
			return 0, err
		}
	}
	return len(pending), nil
}

// txnOf is the number of the writer transaction q runs in (0 outside the
// writer).
func txnOf(q querier) int64 {
	if c, ok := q.(*stmtConn); ok {
		return c.txn
	}
	return 0
}

type pendingIntent struct {
	seq int64
	id  string
}

// pendingIntents returns the pending intents of one resource.
func pendingIntents(ctx context.Context, q querier, nodeID, kind, resourceID string) ([]pendingIntent, error) {
	rows, err := q.QueryContext(ctx, `SELECT seq, id FROM intents WHERE node_id = ? AND resource_kind = ? AND resource_id = ?
		AND state = 'pending'`, nodeID, kind, resourceID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []pendingIntent
	for rows.Next() {
		var p pendingIntent
		if err := rows.Scan(&p.seq, &p.id); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// GetResource returns the desired state of one resource, or ErrNotFound.
func (s *Store) GetResource(ctx context.Context, nodeID, kind, resourceID string) (Resource, error) {
	r := Resource{NodeID: nodeID, Kind: kind, ResourceID: resourceID}
	var at int64
	err := s.read(ctx, func(q querier) error {
		err := q.QueryRowContext(ctx, `SELECT state, config_version, generation, action_id, updated_at FROM resources
			WHERE node_id = ? AND resource_kind = ? AND resource_id = ?`, nodeID, kind, resourceID).
			Scan(&r.State, &r.ConfigVersion, &r.Generation, &r.ActionID, &at)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		return err
	})
	r.UpdatedAt = tm(at)
	return r, err
}

func scanResources(ctx context.Context, q querier) ([]Resource, error) {
	rows, err := q.QueryContext(ctx, `SELECT node_id, resource_kind, resource_id, state, config_version, generation,
		action_id, updated_at FROM resources ORDER BY node_id, resource_kind, resource_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Resource
	for rows.Next() {
		var r Resource
		var at int64
		if err := rows.Scan(&r.NodeID, &r.Kind, &r.ResourceID, &r.State, &r.ConfigVersion, &r.Generation, &r.ActionID, &at); err != nil {
			return nil, err
		}
		r.UpdatedAt = tm(at)
		out = append(out, r)
	}
	return out, rows.Err()
}
