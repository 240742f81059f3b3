package store

import (
	"context"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// ActionNodeForget is the audit action of forgetting a node.
const ActionNodeForget = "node_forget"

// Forget is an operator's (or the node GC's) forgetting of a node.
type Forget struct {
	NodeID        string
	Actor         string
	CorrelationID string
	// Reason is the event's message ("" for an operator's forget).
	Reason string
	Now    time.Time
}

// ForgetNode removes a registered node: its registry row with its identity
// binding and session, and what it reported (observed streams and jobs).
// Its desired state (resources, intents, jobs placed on it) stays (spec
// rule 10). It is audited as node_forget and appends a node_forgotten
// event. An unregistered node returns ErrNotFound.
func (s *Store) ForgetNode(ctx context.Context, f Forget) error {
	return s.write(ctx, func(ctx context.Context, q querier) error {
		r, err := q.ExecContext(ctx, "DELETE FROM nodes WHERE node_id = ?", f.NodeID)
		if err != nil {
			return err
		}
		if err := mustAffect(r, "node "+f.NodeID); err != nil {
			return err
		}
		for _, stmt := range []string{"DELETE FROM observed_streams WHERE node_id = ?", "DELETE FROM observed_jobs WHERE node_id = ?"} {
			if _, err := q.ExecContext(ctx, stmt, f.NodeID); err != nil {
				return err
			}
		}
		if _, err := insertAudit(ctx, q, AuditRecord{OccurredAt: wire.At(f.Now), Actor: f.Actor, Action: ActionNodeForget,
			ResourceType: "node", ResourceID: f.NodeID, NodeID: f.NodeID, CorrelationID: f.CorrelationID,
			Outcome: OutcomeAccepted, Message: f.Reason}); err != nil {
			return err
		}
		msg := f.Reason
		if msg == "" {
			msg = "node forgotten"
		}
		_, err = insertEvent(ctx, q, event(wire.EventNodeForgotten, f.Now, f.NodeID, f.NodeID, "", f.CorrelationID, f.Actor, OutcomeAccepted, msg))
		return err
	})
}
