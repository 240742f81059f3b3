package store

import (
	"context"
	"time"
)

// Retention limits (spec "Limits").
const (
	TerminalRetention = 24 * time.Hour
	MaxTerminalRows   = 4096
	MaxEvents         = 2048
	AuditRetention    = 30 * 24 * time.Hour
	MaxAuditRows      = 100000
)

// Swept counts the rows one Sweep deleted, per table.
type Swept struct {
	Intents, Outbox, Attempts, Events, Audit, Idempotency, Artifacts int64
}

// Sweep reclaims, in one transaction: terminal intents, processed outbox
// rows and terminal attempts older than 24 h or beyond the newest 4096 of
// each; events beyond the newest 2048; audit rows older than 30 days or
// beyond the newest 100000; idempotency keys older than 24 h; pending and
// failed job artifact records older than 24 h (a command whose result never
// came; completed records stay, as the artifacts do). Unprocessed
// outbox rows, active attempts and non-terminal intents are never deleted,
// nor are configuration versions, rollouts and their nodes (a rollback
// deletes no record); terminal intents of the configuration kinds go as
// any other.
func (s *Store) Sweep(ctx context.Context, now time.Time) (Swept, error) {
	var out Swept
	day := ms(now.Add(-TerminalRetention))
	month := ms(now.Add(-AuditRetention))
	steps := []struct {
		n     *int64
		query string
		args  []any
	}{
		{&out.Intents, `DELETE FROM intents WHERE state IN ('succeeded','failed','cancelled','superseded') AND (updated_at < ? OR seq <=
			(SELECT seq FROM intents WHERE state IN ('succeeded','failed','cancelled','superseded') ORDER BY seq DESC LIMIT 1 OFFSET ?))`,
			[]any{day, MaxTerminalRows}},
		{&out.Outbox, `DELETE FROM outbox WHERE processed_at IS NOT NULL AND (processed_at < ? OR seq <=
			(SELECT seq FROM outbox WHERE processed_at IS NOT NULL ORDER BY seq DESC LIMIT 1 OFFSET ?))`,
			[]any{day, MaxTerminalRows}},
		{&out.Attempts, `DELETE FROM attempts WHERE state IN ('succeeded','failed','timed_out') AND (updated_at < ? OR seq <=
			(SELECT seq FROM attempts WHERE state IN ('succeeded','failed','timed_out') ORDER BY seq DESC LIMIT 1 OFFSET ?))`,
			[]any{day, MaxTerminalRows}},
		{&out.Events, `DELETE FROM events WHERE id <= (SELECT id FROM events ORDER BY id DESC LIMIT 1 OFFSET ?)`,
			[]any{MaxEvents}},
		{&out.Audit, `DELETE FROM audit WHERE occurred_at < ? OR id <= (SELECT id FROM audit ORDER BY id DESC LIMIT 1 OFFSET ?)`,
			[]any{month, MaxAuditRows}},
		{&out.Idempotency, `DELETE FROM idempotency WHERE created_at < ?`, []any{day}},
		{&out.Artifacts, `DELETE FROM job_artifacts WHERE state IN ('pending','failed') AND created_at < ?`, []any{day}},
	}
	err := s.write(ctx, func(ctx context.Context, q querier) error {
		out = Swept{}
		for _, st := range steps {
			r, err := q.ExecContext(ctx, st.query, st.args...)
			if err != nil {
				return err
			}
			if *st.n, err = r.RowsAffected(); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}
