package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// ActionStreamUnmanage is the audit action of deleting a stream's desired
// state (the Hub stops managing it).
const ActionStreamUnmanage = "stream_unmanage"

// ReasonNotManaged is the convergence reason of a stream whose desired
// state was deleted: convergence unknown, nobody manages it.
const ReasonNotManaged = "not_managed"

// Unmanage names the stream whose desired state an operator deletes, who,
// and when.
type Unmanage struct {
	NodeID   string
	StreamID string
	// IfMatch, when not nil, is the generation the client expects to be
	// current.
	IfMatch       *int64
	Actor         string
	ActorKind     string
	CorrelationID string
	Now           time.Time
}

// Unmanaged is what UnmanageStream committed.
type Unmanaged struct {
	// Generation is the generation the deleted desired state had.
	Generation int64
	// Superseded counts the pending intents it superseded (never sent).
	Superseded int
	// Txn is the number of the transaction that committed it.
	Txn int64
}

// UnmanageStream deletes a stream's desired state in one transaction: its
// pending intents superseded (never dispatched; one already sent runs its
// course), its resources row removed, an audit row and a
// convergence_changed event to unknown (reason not_managed). A stream
// without desired state is ErrNotFound; an If-Match on another generation
// a *GenerationConflictError. What the node reports of the stream stays.
// The next desired-state write starts again at generation 1.
func (s *Store) UnmanageStream(ctx context.Context, u Unmanage) (Unmanaged, error) {
	var res Unmanaged
	if u.NodeID == "" || u.StreamID == "" || u.Now.IsZero() {
		return res, fmt.Errorf("%w: node id, stream id and now are required", ErrInvalid)
	}
	err := s.write(ctx, func(ctx context.Context, q querier) error {
		res = Unmanaged{}
		err := q.QueryRowContext(ctx, `SELECT generation FROM resources WHERE node_id = ? AND resource_kind = ? AND resource_id = ?`,
			u.NodeID, KindStream, u.StreamID).Scan(&res.Generation)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("stream %s/%s has no desired state: %w", u.NodeID, u.StreamID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if u.IfMatch != nil && *u.IfMatch != res.Generation {
			return &GenerationConflictError{Expected: *u.IfMatch, Current: res.Generation}
		}
		now := ms(u.Now)
		if res.Superseded, err = supersedePending(ctx, q, u.NodeID, KindStream, u.StreamID, now); err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, `DELETE FROM resources WHERE node_id = ? AND resource_kind = ? AND resource_id = ?`,
			u.NodeID, KindStream, u.StreamID); err != nil {
			return err
		}
		// On several Hubs, the leader drops what it held of the stream and
		// looks at the node again.
		note(q, ChangeOutbox, u.NodeID)
		if _, err := insertAudit(ctx, q, AuditRecord{OccurredAt: wire.At(u.Now), Actor: u.Actor, ActorKind: u.ActorKind, Action: ActionStreamUnmanage,
			ResourceType: KindStream, ResourceID: u.StreamID, NodeID: u.NodeID, CorrelationID: u.CorrelationID,
			Outcome: OutcomeAccepted}); err != nil {
			return err
		}
		e := event(wire.EventConvergenceChanged, u.Now, u.NodeID, u.StreamID, "", u.CorrelationID, u.Actor, u.ActorKind, OutcomeAccepted,
			"convergence "+wire.ConvergenceUnknown+": desired state deleted, not managed")
		e.Data = map[string]any{"convergence": wire.ConvergenceUnknown, "reason": ReasonNotManaged, "generation": res.Generation,
			"resource_type": KindStream}
		if _, err := insertEvent(ctx, q, e); err != nil {
			return err
		}
		res.Txn = txnOf(q)
		return nil
	})
	if err != nil {
		return Unmanaged{}, err
	}
	return res, nil
}
