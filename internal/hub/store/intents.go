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

// Intent is one stored intent; Operation() turns it into the wire record.
type Intent struct {
	Seq           int64
	ID            string
	Operation     string
	NodeID        string
	Kind          string
	ResourceID    string
	Generation    int64
	DesiredState  string
	ConfigVersion string
	ActionID      string
	CorrelationID string
	Actor         string
	ActorKind     string
	State         string
	AttemptID     string
	RetryCount    int
	Failure       *wire.Failure
	Result        json.RawMessage
	// Payload is the command payload of a job intent (wire.CommandPayload
	// JSON); empty for streams.
	Payload      json.RawMessage
	CreatedAt    time.Time
	UpdatedAt    time.Time
	DispatchedAt time.Time
	AckedAt      time.Time
	FinishedAt   time.Time
	ExpiresAt    time.Time
}

// Wire returns the operation record without the derived fields
// (convergence, observed, retry.next_at), which the Hub fills in.
func (i Intent) Wire() wire.Operation {
	op := wire.Operation{OperationID: i.ID, IntentID: i.ID, AttemptID: i.AttemptID, Operation: i.Operation,
		NodeID: i.NodeID, ResourceID: i.ResourceID, Generation: i.Generation, State: i.State,
		Retry: wire.Retry{Count: i.RetryCount}, Failure: i.Failure, CorrelationID: i.CorrelationID, Actor: i.Actor, ActorKind: i.ActorKind,
		CreatedAt: wire.At(i.CreatedAt), UpdatedAt: wire.At(i.UpdatedAt), DispatchedAt: wire.At(i.DispatchedAt),
		AcknowledgedAt: wire.At(i.AckedAt), FinishedAt: wire.At(i.FinishedAt), ExpiresAt: wire.At(i.ExpiresAt)}
	if len(i.Result) > 0 {
		op.Result = i.Result
	}
	return op
}

// terminal reports whether an intent state is final.
func terminal(state string) bool {
	switch state {
	case wire.OpSucceeded, wire.OpFailed, wire.OpCancelled, wire.OpSuperseded:
		return true
	}
	return false
}

const intentCols = `seq, id, operation, node_id, resource_kind, resource_id, generation, desired_state, config_version,
	action_id, correlation_id, actor, actor_kind, state, attempt_id, retry_count, failure_class, failure_code, failure_message, result,
	created_at, updated_at, dispatched_at, acknowledged_at, finished_at, expires_at, payload`

type scanner interface{ Scan(...any) error }

func scanIntent(r scanner) (Intent, error) {
	var i Intent
	var fc, fcode, fmsg, result, payload string
	var c, u, d, a, f, e int64
	err := r.Scan(&i.Seq, &i.ID, &i.Operation, &i.NodeID, &i.Kind, &i.ResourceID, &i.Generation, &i.DesiredState,
		&i.ConfigVersion, &i.ActionID, &i.CorrelationID, &i.Actor, &i.ActorKind, &i.State, &i.AttemptID, &i.RetryCount,
		&fc, &fcode, &fmsg, &result, &c, &u, &d, &a, &f, &e, &payload)
	if err != nil {
		return i, err
	}
	if fc != "" || fcode != "" {
		i.Failure = &wire.Failure{Class: fc, Code: fcode, Message: fmsg}
	}
	if result != "" {
		i.Result = json.RawMessage(result)
	}
	if payload != "" {
		i.Payload = json.RawMessage(payload)
	}
	i.CreatedAt, i.UpdatedAt, i.DispatchedAt, i.AckedAt, i.FinishedAt, i.ExpiresAt = tm(c), tm(u), tm(d), tm(a), tm(f), tm(e)
	return i, nil
}

// GetIntent returns one intent, or ErrNotFound.
func (s *Store) GetIntent(ctx context.Context, id string) (Intent, error) {
	var i Intent
	err := s.read(ctx, func(q querier) error {
		var err error
		i, err = getIntent(ctx, q, id)
		return err
	})
	return i, err
}

func getIntent(ctx context.Context, q querier, id string) (Intent, error) {
	i, err := scanIntent(q.QueryRowContext(ctx, "SELECT "+intentCols+" FROM intents WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return i, fmt.Errorf("intent %q: %w", id, ErrNotFound)
	}
	return i, err
}

// IntentFilter narrows ListIntents; empty fields match everything.
// Visible, when set, keeps only the intents it accepts (a scoped
// principal's), with exact pages and total (listPage).
type IntentFilter struct {
	NodeID, ResourceID, Operation, State, CorrelationID string
	Visible                                             func(Intent) bool
}

// ListIntents returns one page of the intents matching f, newest first.
func (s *Store) ListIntents(ctx context.Context, f IntentFilter, p Paging) (wire.Page[Intent], error) {
	out := wire.Page[Intent]{Items: []Intent{}, Page: p.Page, PageSize: p.PageSize}
	if err := p.check(); err != nil {
		return out, err
	}
	w := &where{}
	w.eq("node_id", f.NodeID)
	w.eq("resource_id", f.ResourceID)
	w.eq("operation", f.Operation)
	w.eq("state", f.State)
	w.eq("correlation_id", f.CorrelationID)
	err := s.readTx(ctx, func(q querier) error {
		var err error
		out.Items, out.Total, err = listPage(ctx, q, p, f.Visible, scanIntent, "SELECT COUNT(*) FROM intents"+w.String(),
			"SELECT "+intentCols+" FROM intents"+w.String()+" ORDER BY seq DESC", w.args...)
		return err
	})
	return out, err
}

// ActionCancel is the audit action of an operation cancel.
const ActionCancel = "operation_cancel"

// Cancellation names who cancels which intent, and when.
type Cancellation struct {
	IntentID      string
	Actor         string
	ActorKind     string
	CorrelationID string
	Now           time.Time
}

// CancelIntent cancels a pending intent (state cancelled, its outbox rows
// processed, an audit row and an operation_cancelled event, in one
// transaction). Any other state returns ErrNotCancellable; an unknown id
// ErrNotFound.
func (s *Store) CancelIntent(ctx context.Context, c Cancellation) (Intent, error) {
	var out Intent
	err := s.write(ctx, func(ctx context.Context, q querier) error {
		i, err := getIntent(ctx, q, c.IntentID)
		if err != nil {
			return err
		}
		if i.State != wire.OpPending {
			return fmt.Errorf("intent %q is %s: %w", i.ID, i.State, ErrNotCancellable)
		}
		now := ms(c.Now)
		if _, err := q.ExecContext(ctx, `UPDATE intents SET state = 'cancelled', updated_at = ?, finished_at = ? WHERE id = ?`,
			now, now, i.ID); err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, `UPDATE outbox SET processed_at = ? WHERE intent_id = ? AND processed_at IS NULL`,
			now, i.ID); err != nil {
			return err
		}
		if _, err := insertAudit(ctx, q, AuditRecord{OccurredAt: wire.At(c.Now), Actor: c.Actor, ActorKind: c.ActorKind, Action: ActionCancel,
			ResourceType: i.Kind, ResourceID: i.ResourceID, NodeID: i.NodeID, CorrelationID: c.CorrelationID,
			Outcome: OutcomeAccepted}); err != nil {
			return err
		}
		if _, err := insertEvent(ctx, q, event(wire.EventOperationCancelled, c.Now, i.NodeID, i.ResourceID, i.ID,
			c.CorrelationID, c.Actor, c.ActorKind, OutcomeAccepted, "")); err != nil {
			return err
		}
		out, err = getIntent(ctx, q, i.ID)
		return err
	})
	return out, err
}
