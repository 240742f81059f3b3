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

// OutboxEntry is one unprocessed outbox row with what a command needs of
// its intent. Attempts is how many attempts the intent has had;
// LastFinishedAt when the newest of them finished (zero if none).
type OutboxEntry struct {
	Seq            int64
	IntentID       string
	NodeID         string
	CreatedAt      time.Time
	Operation      string
	Kind           string
	ResourceID     string
	Generation     int64
	DesiredState   string
	ConfigVersion  string
	ActionID       string
	Payload        json.RawMessage
	ExpiresAt      time.Time
	Attempts       int
	LastFinishedAt time.Time
}

// Attempt is one dispatch of an intent's command to its node.
type Attempt struct {
	ID         string
	IntentID   string
	NodeID     string
	State      string // dispatched, acknowledged, succeeded, failed, timed_out
	CreatedAt  time.Time
	UpdatedAt  time.Time
	ExpiresAt  time.Time
	FinishedAt time.Time
	Failure    *wire.Failure
	Result     json.RawMessage
}

const outboxSelect = `SELECT o.seq, o.intent_id, o.node_id, o.created_at, i.operation, i.resource_kind, i.resource_id,
	i.generation, i.desired_state, i.config_version, i.action_id, i.payload, i.expires_at,
	(SELECT COUNT(*) FROM attempts a WHERE a.intent_id = o.intent_id),
	(SELECT COALESCE(MAX(a.finished_at), 0) FROM attempts a WHERE a.intent_id = o.intent_id)
	FROM outbox o JOIN intents i ON i.id = o.intent_id`

const outboxQuery = outboxSelect + ` WHERE o.processed_at IS NULL ORDER BY o.seq`

// PendingOutbox returns up to limit unprocessed outbox rows, oldest first.
func (s *Store) PendingOutbox(ctx context.Context, limit int) ([]OutboxEntry, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit %d", ErrInvalid, limit)
	}
	var out []OutboxEntry
	err := s.read(ctx, func(q querier) error {
		var err error
		out, err = pendingOutbox(ctx, q, limit)
		return err
	})
	return out, err
}

func pendingOutbox(ctx context.Context, q querier, limit int) ([]OutboxEntry, error) {
	query, args := outboxQuery, []any{}
	if limit > 0 {
		query += " LIMIT ?"
		args = append(args, limit)
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return scanOutbox(rows)
}

func scanOutbox(rows *sql.Rows) ([]OutboxEntry, error) {
	defer rows.Close()
	var out []OutboxEntry
	for rows.Next() {
		var e OutboxEntry
		var c, x, lf int64
		var payload string
		if err := rows.Scan(&e.Seq, &e.IntentID, &e.NodeID, &c, &e.Operation, &e.Kind, &e.ResourceID, &e.Generation,
			&e.DesiredState, &e.ConfigVersion, &e.ActionID, &payload, &x, &e.Attempts, &lf); err != nil {
			return nil, err
		}
		if payload != "" {
			e.Payload = json.RawMessage(payload)
		}
		e.CreatedAt, e.ExpiresAt, e.LastFinishedAt = tm(c), tm(x), tm(lf)
		out = append(out, e)
	}
	return out, rows.Err()
}

// AttemptStart names a new attempt of a pending intent.
type AttemptStart struct {
	IntentID  string
	AttemptID string
	NodeID    string
	Now       time.Time
	ExpiresAt time.Time
}

// StartAttempt records a dispatch: the intent's outbox rows processed, a new
// active attempt, the intent dispatched and a command_dispatched event. An
// intent that is not pending returns ErrNotPending.
func (s *Store) StartAttempt(ctx context.Context, a AttemptStart) error {
	return s.write(ctx, func(ctx context.Context, q querier) error {
		ok, err := startAttempt(ctx, q, a)
		if err == nil && !ok {
			return fmt.Errorf("intent %q: %w", a.IntentID, ErrNotPending)
		}
		return err
	})
}

// AttemptFinish is the outcome of one attempt.
type AttemptFinish struct {
	AttemptID string
	State     string // acknowledged, succeeded, failed or timed_out
	Failure   *wire.Failure
	Result    json.RawMessage
	Now       time.Time
}

// FinishAttempt records an attempt's transport state or outcome and moves
// its intent: acknowledged keeps both active; succeeded and failed end
// them; timed_out ends the attempt and, while the intent has not expired,
// puts the intent back to pending with its outbox row unprocessed (a retry;
// the reconciler applies the backoff), else fails it with code expired. One
// event per call. A finished attempt returns ErrAttemptFinished.
func (s *Store) FinishAttempt(ctx context.Context, f AttemptFinish) error {
	kinds := map[string]string{wire.OpAcknowledged: wire.EventCommandAcknowledged, wire.OpSucceeded: wire.EventCommandSucceeded,
		wire.OpFailed: wire.EventCommandFailed, wire.OpTimedOut: wire.EventCommandTimedOut}
	kind, ok := kinds[f.State]
	if !ok {
		return fmt.Errorf("%w: attempt state %q", ErrInvalid, f.State)
	}
	if len(f.Result) > 0 && !json.Valid(f.Result) {
		return fmt.Errorf("%w: result is not JSON", ErrInvalid)
	}
	return s.write(ctx, func(ctx context.Context, q querier) error {
		var intentID, node, state string
		err := q.QueryRowContext(ctx, "SELECT intent_id, node_id, state FROM attempts WHERE id = ?", f.AttemptID).Scan(&intentID, &node, &state)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("attempt %q: %w", f.AttemptID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if state != wire.OpDispatched && state != wire.OpAcknowledged {
			return fmt.Errorf("attempt %q is %s: %w", f.AttemptID, state, ErrAttemptFinished)
		}
		i, err := getIntent(ctx, q, intentID)
		if err != nil {
			return err
		}
		now := ms(f.Now)
		var fc, fcode, fmsg string
		if f.Failure != nil {
			fc, fcode, fmsg = f.Failure.Class, f.Failure.Code, f.Failure.Message
		}
		fin := now
		if f.State == wire.OpAcknowledged {
			fin = 0
		}
		if _, err := q.ExecContext(ctx, `UPDATE attempts SET state = ?, updated_at = ?, finished_at = ?, failure_class = ?,
			failure_code = ?, failure_message = ?, result = ? WHERE id = ?`,
			f.State, now, fin, fc, fcode, fmsg, string(f.Result), f.AttemptID); err != nil {
			return err
		}
		note(q, ChangeAttempts, node)
		// Only the intent's current attempt moves it.
		if i.AttemptID == f.AttemptID && !terminal(i.State) {
			if err := moveIntent(ctx, q, i, f, now); err != nil {
				return err
			}
		}
		e := event(kind, f.Now, node, i.ResourceID, i.ID, i.CorrelationID, "", "", "", fmsg)
		e.Data = map[string]any{"attempt_id": f.AttemptID}
		if fcode != "" {
			e.Data["failure_code"] = fcode
		}
		_, err = insertEvent(ctx, q, e)
		return err
	})
}

func moveIntent(ctx context.Context, q querier, i Intent, f AttemptFinish, now int64) error {
	var fc, fcode, fmsg string
	if f.Failure != nil {
		fc, fcode, fmsg = f.Failure.Class, f.Failure.Code, f.Failure.Message
	}
	switch f.State {
	case wire.OpAcknowledged:
		_, err := q.ExecContext(ctx, `UPDATE intents SET state = 'acknowledged', acknowledged_at = ?, updated_at = ? WHERE id = ?`,
			now, now, i.ID)
		return err
	case wire.OpSucceeded, wire.OpFailed:
		if _, err := q.ExecContext(ctx, `UPDATE intents SET state = ?, updated_at = ?, finished_at = ?, failure_class = ?,
			failure_code = ?, failure_message = ?, result = ? WHERE id = ?`,
			f.State, now, now, fc, fcode, fmsg, string(f.Result), i.ID); err != nil {
			return err
		}
		if f.State == wire.OpFailed && refusalCodes[fcode] {
			// The node refused the work: audited as the Hub's own
			// refusals are, with the node's code.
			_, err := insertAudit(ctx, q, AuditRecord{OccurredAt: wire.At(tm(now)), Actor: i.Actor, ActorKind: i.ActorKind, Action: i.Operation,
				ResourceType: i.Kind, ResourceID: i.ResourceID, NodeID: i.NodeID, CorrelationID: i.CorrelationID,
				Outcome: OutcomeRejected, FailureCode: fcode})
			return err
		}
		return nil
	}
	// timed_out: retry until the intent's own expiry.
	if !i.ExpiresAt.IsZero() && now >= ms(i.ExpiresAt) {
		return failIntent(ctx, q, i, "timeout", CodeExpired, "intent expired", now)
	}
	// The intent keeps the reason of its last failed attempt: the Agent's,
	// or the Hub's own timeout.
	if fc == "" && fcode == "" {
		fc, fcode = "timeout", wire.OpTimedOut
	}
	if _, err := q.ExecContext(ctx, `UPDATE intents SET state = 'pending', retry_count = retry_count + 1, updated_at = ?,
		failure_class = ?, failure_code = ?, failure_message = ? WHERE id = ?`, now, fc, fcode, fmsg, i.ID); err != nil {
		return err
	}
	note(q, ChangeOutbox, i.NodeID)
	_, err := q.ExecContext(ctx, `INSERT INTO outbox (intent_id, node_id, created_at) VALUES (?,?,?)`, i.ID, i.NodeID, now)
	return err
}

// refusalCodes are the failure codes with which a node refuses a command
// (its remote policy, or a capability that policy switched off): the
// outcome is audited, as a refusal at the Hub is.
var refusalCodes = map[string]bool{"policy_denied": true, "incompatible_capability": true}

// CodeExpired is the stable failure code of an intent past its expiry.
const CodeExpired = "expired"

func failIntent(ctx context.Context, q querier, i Intent, class, code, msg string, now int64) error {
	if _, err := q.ExecContext(ctx, `UPDATE intents SET state = 'failed', updated_at = ?, finished_at = ?, failure_class = ?,
		failure_code = ?, failure_message = ? WHERE id = ?`, now, now, class, code, msg, i.ID); err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, `UPDATE outbox SET processed_at = ? WHERE intent_id = ? AND processed_at IS NULL`, now, i.ID); err != nil {
		return err
	}
	if _, err := insertAudit(ctx, q, AuditRecord{OccurredAt: wire.At(tm(now)), Actor: i.Actor, ActorKind: i.ActorKind, Action: i.Operation,
		ResourceType: i.Kind, ResourceID: i.ResourceID, NodeID: i.NodeID, CorrelationID: i.CorrelationID,
		Outcome: OutcomeRejected, FailureCode: code}); err != nil {
		return err
	}
	e := event(wire.EventCommandFailed, tm(now), i.NodeID, i.ResourceID, i.ID, i.CorrelationID, "", "", "", msg)
	e.Data = map[string]any{"failure_code": code}
	_, err := insertEvent(ctx, q, e)
	return err
}

// FailIntent fails a pending intent the reconciler gave up on (code is a
// stable failure code: expired, incompatible_capability, ...): intent
// failed, outbox rows processed, an audit row (outcome rejected) and a
// command_failed event. A non-pending intent returns ErrNotPending.
func (s *Store) FailIntent(ctx context.Context, intentID, code, message string, now time.Time) error {
	return s.write(ctx, func(ctx context.Context, q querier) error {
		i, err := getIntent(ctx, q, intentID)
		if err != nil {
			return err
		}
		if i.State != wire.OpPending {
			return fmt.Errorf("intent %q is %s: %w", i.ID, i.State, ErrNotPending)
		}
		return failIntent(ctx, q, i, "permanent", code, message, ms(now))
	})
}

// ActiveAttempts returns every attempt in flight (dispatched or
// acknowledged), oldest first. Their number is bounded by the dispatcher's
// per-node queue bound.
func (s *Store) ActiveAttempts(ctx context.Context) ([]Attempt, error) {
	var out []Attempt
	err := s.read(ctx, func(q querier) error {
		var err error
		out, err = activeAttempts(ctx, q)
		return err
	})
	return out, err
}

func activeAttempts(ctx context.Context, q querier, nodeIDs ...string) ([]Attempt, error) {
	query, args := `SELECT id, intent_id, node_id, state, created_at, updated_at, expires_at FROM attempts
		WHERE state IN ('dispatched', 'acknowledged') ORDER BY seq`, []any(nil)
	if len(nodeIDs) == 1 {
		query, args = `SELECT id, intent_id, node_id, state, created_at, updated_at, expires_at FROM attempts
		WHERE state IN ('dispatched', 'acknowledged') AND node_id = ? ORDER BY seq`, []any{nodeIDs[0]}
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var a Attempt
		var c, u, x int64
		if err := rows.Scan(&a.ID, &a.IntentID, &a.NodeID, &a.State, &c, &u, &x); err != nil {
			return nil, err
		}
		a.CreatedAt, a.UpdatedAt, a.ExpiresAt = tm(c), tm(u), tm(x)
		out = append(out, a)
	}
	return out, rows.Err()
}

// GetAttempt returns one attempt, or ErrNotFound.
func (s *Store) GetAttempt(ctx context.Context, id string) (Attempt, error) {
	var a Attempt
	err := s.read(ctx, func(q querier) error {
		var c, u, x, f int64
		var fc, fcode, fmsg, res string
		err := q.QueryRowContext(ctx, `SELECT id, intent_id, node_id, state, created_at, updated_at, expires_at, finished_at,
			failure_class, failure_code, failure_message, result FROM attempts WHERE id = ?`, id).
			Scan(&a.ID, &a.IntentID, &a.NodeID, &a.State, &c, &u, &x, &f, &fc, &fcode, &fmsg, &res)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("attempt %q: %w", id, ErrNotFound)
		}
		if err != nil {
			return err
		}
		a.CreatedAt, a.UpdatedAt, a.ExpiresAt, a.FinishedAt = tm(c), tm(u), tm(x), tm(f)
		if fc != "" || fcode != "" {
			a.Failure = &wire.Failure{Class: fc, Code: fcode, Message: fmsg}
		}
		if res != "" {
			a.Result = json.RawMessage(res)
		}
		return nil
	})
	return a, err
}
