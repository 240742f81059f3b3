package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Several Hubs on one PostgreSQL database learn of each other's writes
// through LISTEN/NOTIFY: a write transaction that changes what another
// Hub keeps in memory (a node's lease or report, a node's attempts, the
// event log) notes it, and the notes are sent with pg_notify inside the
// transaction, so they are delivered at its commit and only if it commits.
// A Hub listens on one connection of its own (Watch). Notifications are
// not durable: a Hub that reconnects is told to resynchronize (ChangeAll),
// and the Hub keeps a slow poll besides, so a lost one only delays. On
// SQLite nothing of this runs: one Hub owns the file.

// NotifyChannel is the PostgreSQL channel of the Hubs' change notes.
const NotifyChannel = "flowplane_hub"

// maxNotifyPayload bounds a notification's payload below PostgreSQL's
// 8000 bytes: a transaction that notes more sends ChangeAll instead.
const maxNotifyPayload = 7000

// Kinds of Change.
const (
	// ChangeEvents: events were committed.
	ChangeEvents = "e"
	// ChangeNode: a node's row changed (registration, lease, report, mode,
	// forgotten).
	ChangeNode = "n"
	// ChangeAttempts: attempts of a node started, were acknowledged or
	// finished.
	ChangeAttempts = "a"
	// ChangeOutbox: a node has a new outbox row (an operator write): the
	// leader dispatches it.
	ChangeOutbox = "o"
	// ChangeJobs: a node's job observations changed: the leader looks at
	// its convergence.
	ChangeJobs = "j"
	// ChangeAll: anything may have changed (a notification was lost, or
	// too much changed to say): resynchronize.
	ChangeAll = "*"
)

// Change is one note of a committed write: its kind and, for ChangeNode
// and ChangeAttempts, the node.
type Change struct {
	Kind   string
	NodeID string
}

// SetOrigin names this store's Hub in the notifications it sends, so that
// Watch passes over the Hub's own. Call it before the first write.
func (s *Store) SetOrigin(id string) { s.origin = id }

// note records a change for the notification of the write transaction q
// runs (PostgreSQL only; reads and SQLite note nothing).
func note(q querier, kind, nodeID string) {
	if c, ok := q.(*stmtConn); ok && c.d.postgres {
		if c.notes == nil {
			c.notes = map[string]bool{}
		}
		c.notes[kind+":"+nodeID] = true
	}
}

// notifyPayload is the payload of the transaction's notes: the origin,
// then one note a line; "" when nothing was noted.
func notifyPayload(origin string, notes map[string]bool, events bool) string {
	if events {
		notes[ChangeEvents+":"] = true
	}
	if len(notes) == 0 {
		return ""
	}
	lines := make([]string, 0, len(notes)+1)
	for n := range notes {
		lines = append(lines, n)
	}
	slices.Sort(lines)
	p := origin + "\n" + strings.Join(lines, "\n")
	if len(p) > maxNotifyPayload {
		p = origin + "\n" + ChangeAll + ":"
	}
	return p
}

// parsePayload returns the origin and the changes of a notification.
func parsePayload(p string) (origin string, changes []Change) {
	origin, rest, _ := strings.Cut(p, "\n")
	for line := range strings.SplitSeq(rest, "\n") {
		kind, node, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		changes = append(changes, Change{Kind: kind, NodeID: node})
	}
	return origin, changes
}

// sendNotes sends the notes of the writer's transaction, before its
// COMMIT. The notes are reset for the next transaction.
func (s *Store) sendNotes(ctx context.Context) error {
	if !s.d.postgres {
		return nil
	}
	c := s.wq
	if c.notes == nil {
		c.notes = map[string]bool{}
	}
	p := notifyPayload(s.origin, c.notes, len(c.logged) > 0)
	clear(c.notes)
	if p == "" {
		return nil
	}
	_, err := c.c.ExecContext(ctx, "SELECT pg_notify($1, $2)", NotifyChannel, p)
	return err
}

// Watch backoff bounds.
const (
	watchMinBackoff = 100 * time.Millisecond
	watchMaxBackoff = 5 * time.Second
)

// Watch listens for the change notes of the other Hubs on the database
// until ctx ends, on a connection of its own (outside the pool), and
// gives them to fn, one notification at a time. After each (re)connection
// it gives ChangeAll first: notifications sent while it was not listening
// are lost. A lost connection is reopened with backoff. On SQLite Watch
// returns at once. fn runs on Watch's goroutine.
func (s *Store) Watch(ctx context.Context, fn func([]Change)) {
	if !s.d.postgres || s.pgConfig == nil {
		return
	}
	backoff := watchMinBackoff
	for ctx.Err() == nil {
		listened, err := s.watchOnce(ctx, fn)
		if ctx.Err() != nil {
			return
		}
		if listened {
			backoff = watchMinBackoff
		}
		_ = err // the caller learns of storage failures from its writes and the lease
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, watchMaxBackoff)
	}
}

// watchOnce is one connection of Watch: it reports whether LISTEN ran.
func (s *Store) watchOnce(ctx context.Context, fn func([]Change)) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, s.pgConfig.ConnectTimeout+time.Second)
	conn, err := pgx.ConnectConfig(cctx, s.pgConfig.Copy())
	cancel()
	if err != nil {
		return false, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return false, err
	}
	fn([]Change{{Kind: ChangeAll}})
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) || ctx.Err() != nil {
				return true, nil
			}
			return true, err
		}
		origin, changes := parsePayload(n.Payload)
		if origin == s.origin && s.origin != "" {
			continue // this Hub's own write: it told its fleet itself
		}
		fn(changes)
	}
}

// OutboxNodes returns the nodes with unprocessed outbox rows, by id: what a
// leader that may have missed a ChangeOutbox marks for dispatch.
func (s *Store) OutboxNodes(ctx context.Context) ([]string, error) {
	var out []string
	err := s.read(ctx, func(q querier) error {
		rows, err := q.QueryContext(ctx, "SELECT DISTINCT node_id FROM outbox WHERE processed_at IS NULL ORDER BY node_id")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			out = append(out, id)
		}
		return rows.Err()
	})
	return out, err
}
