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
	ActorKind     string
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
		note(q, ChangeNode, f.NodeID)
		for _, stmt := range []string{"DELETE FROM observed_streams WHERE node_id = ?", "DELETE FROM observed_jobs WHERE node_id = ?"} {
			if _, err := q.ExecContext(ctx, stmt, f.NodeID); err != nil {
				return err
			}
		}
		if _, err := insertAudit(ctx, q, AuditRecord{OccurredAt: wire.At(f.Now), Actor: f.Actor, ActorKind: f.ActorKind, Action: ActionNodeForget,
			ResourceType: "node", ResourceID: f.NodeID, NodeID: f.NodeID, CorrelationID: f.CorrelationID,
			Outcome: OutcomeAccepted, Message: f.Reason}); err != nil {
			return err
		}
		msg := f.Reason
		if msg == "" {
			msg = "node forgotten"
		}
		_, err = insertEvent(ctx, q, event(wire.EventNodeForgotten, f.Now, f.NodeID, f.NodeID, "", f.CorrelationID, f.Actor, f.ActorKind, OutcomeAccepted, msg))
		return err
	})
}

// NodesHoldingState returns the ids of the nodes that hold desired state
// (resources: streams, jobs, configuration), are a job's node or one of a
// split job's task nodes, or have an intent not finished: the node GC
// never forgets them.
func (s *Store) NodesHoldingState(ctx context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	err := s.read(ctx, func(q querier) error {
		rows, err := q.QueryContext(ctx, `SELECT node_id FROM resources
			UNION SELECT node_id FROM jobs
			UNION SELECT t.value FROM jobs, json_each(CASE WHEN jobs.task_nodes = '' THEN '{}' ELSE jobs.task_nodes END) AS t
			UNION SELECT node_id FROM intents WHERE state IN (?, ?, ?)`, wire.OpPending, wire.OpDispatched, wire.OpAcknowledged)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			out[id] = true
		}
		return rows.Err()
	})
	return out, err
}
