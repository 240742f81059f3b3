package store

import "context"

// Snapshot is what the Hub rebuilds in memory at start, read in one
// consistent transaction.
type Snapshot struct {
	Nodes          []Node
	Resources      []Resource
	PendingOutbox  []OutboxEntry
	ActiveAttempts []Attempt
	LastEventID    int64
}

// Snapshot reads the restore state. Every pending outbox row is included:
// they are never reclaimed, and the Hub must know all of them.
func (s *Store) Snapshot(ctx context.Context) (Snapshot, error) {
	var out Snapshot
	err := s.readTx(ctx, func(q querier) error {
		var err error
		if out.Nodes, err = allNodes(ctx, q); err != nil {
			return err
		}
		if out.Resources, err = scanResources(ctx, q); err != nil {
			return err
		}
		if out.PendingOutbox, err = pendingOutbox(ctx, q, 0); err != nil {
			return err
		}
		if out.ActiveAttempts, err = activeAttempts(ctx, q); err != nil {
			return err
		}
		return lastEventID(ctx, q, &out.LastEventID)
	})
	return out, err
}
