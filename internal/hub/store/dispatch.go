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

// StartAttempts records several dispatches in one transaction (one fsync),
// each as StartAttempt does. An intent that is no longer pending (cancelled
// or superseded since it was planned) is skipped: its index is in the
// returned list and nothing is written for it.
func (s *Store) StartAttempts(ctx context.Context, as []AttemptStart) (skipped []int, err error) {
	if len(as) == 0 {
		return nil, nil
	}
	err = s.write(ctx, func(ctx context.Context, q querier) error {
		skipped = skipped[:0]
		for i, a := range as {
			ok, err := startAttempt(ctx, q, a)
			if err != nil {
				return err
			}
			if !ok {
				skipped = append(skipped, i)
			}
		}
		return nil
	})
	return skipped, err
}

// startAttempt is one dispatch; it reports false, writing nothing, for an
// intent that is not pending.
func startAttempt(ctx context.Context, q querier, a AttemptStart) (bool, error) {
	i, err := getIntent(ctx, q, a.IntentID)
	if err != nil {
		return false, err
	}
	if i.State != wire.OpPending {
		return false, nil
	}
	node := a.NodeID
	if node == "" {
		node = i.NodeID
	}
	now := ms(a.Now)
	if _, err := q.ExecContext(ctx, `UPDATE outbox SET processed_at = ? WHERE intent_id = ? AND processed_at IS NULL`,
		now, i.ID); err != nil {
		return false, err
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO attempts (id, intent_id, node_id, state, created_at, updated_at, expires_at)
		VALUES (?,?,?,'dispatched',?,?,?)`, a.AttemptID, i.ID, node, now, now, ms(a.ExpiresAt)); err != nil {
		return false, err
	}
	note(q, ChangeAttempts, node)
	if _, err := q.ExecContext(ctx, `UPDATE intents SET state = 'dispatched', attempt_id = ?, dispatched_at = ?, updated_at = ?
		WHERE id = ?`, a.AttemptID, now, now, i.ID); err != nil {
		return false, err
	}
	e := event(wire.EventCommandDispatched, a.Now, node, i.ResourceID, i.ID, i.CorrelationID, "", "", "", "")
	e.Data = map[string]any{"attempt_id": a.AttemptID, "generation": i.Generation}
	_, err = insertEvent(ctx, q, e)
	return err == nil, err
}

// AppendEvents appends events (their IDs ignored) in one transaction.
func (s *Store) AppendEvents(ctx context.Context, evs []wire.Event) error {
	if len(evs) == 0 {
		return nil
	}
	return s.write(ctx, func(ctx context.Context, q querier) error {
		if s.d.postgres && len(evs) > 1 {
			return insertEventsPostgres(ctx, q, evs)
		}
		for _, e := range evs {
			if _, err := insertEvent(ctx, q, e); err != nil {
				return err
			}
		}
		return nil
	})
}

// Probe writes one row and returns once it is on disk: it tells whether the
// storage takes writes (again) after a failure.
func (s *Store) Probe(ctx context.Context, now time.Time) error {
	return s.write(ctx, func(ctx context.Context, q querier) error {
		_, err := q.ExecContext(ctx, "INSERT INTO probe (id, at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET at = excluded.at", ms(now))
		return err
	})
}

// ResourceState is everything convergence looks at for one resource that
// has a desired state: the desire, its latest intent and the node's latest
// observation (nil when none).
type ResourceState struct {
	Resource
	Latest   *Intent
	Observed *ObservedStream
	// ObservedJob is the node's observation of a job resource (nil when
	// none, and for streams).
	ObservedJob *ObservedJob
	// ObservedConfig is the configuration the node last reported, for a
	// configuration resource (nil when no report carried one, and for
	// other kinds).
	ObservedConfig *ObservedConfig
}

// ResourceStates returns the state of every resource with a desired state,
// of one node when nodeID is not empty, ordered by node, kind and id, read
// in one consistent transaction with two queries whatever their number.
func (s *Store) ResourceStates(ctx context.Context, nodeID string) ([]ResourceState, error) {
	var out []ResourceState
	err := s.readTx(ctx, func(q querier) error {
		w := &where{}
		w.eq("r.node_id", nodeID)
		rows, err := q.QueryContext(ctx, `SELECT r.node_id, r.resource_kind, r.resource_id, r.state, r.config_version, r.generation,
			r.action_id, r.updated_at, o.stream_id IS NOT NULL, COALESCE(o.state, ''), COALESCE(o.generation, 0),
			COALESCE(o.config_version, ''), COALESCE(o.action_id, ''), COALESCE(o.last_error, ''), COALESCE(o.last_error_at, 0),
			COALESCE(o.updated_at, 0), j.job_id IS NOT NULL, COALESCE(j.state, ''), COALESCE(j.generation, 0),
			COALESCE(j.version, 0), COALESCE(j.action_id, ''), COALESCE(j.last_error, ''), COALESCE(j.last_error_at, 0),
			COALESCE(j.detail, ''), COALESCE(j.updated_at, 0), COALESCE(n.config_node_version, ''),
			COALESCE(n.config_hub_version, ''), COALESCE(n.config_generation, 0), COALESCE(n.config_reported_at, 0)
			FROM resources r LEFT JOIN observed_streams o
			ON r.resource_kind = 'stream' AND o.node_id = r.node_id AND o.stream_id = r.resource_id
			LEFT JOIN observed_jobs j ON r.resource_kind = 'job' AND j.node_id = r.node_id AND j.job_id = r.resource_id
			LEFT JOIN nodes n ON r.resource_kind = 'configuration' AND n.node_id = r.node_id`+w.String()+`
			ORDER BY r.node_id, r.resource_kind, r.resource_id`, w.args...)
		if err != nil {
			return err
		}
		if out, err = scanResourceStates(rows); err != nil {
			return err
		}
		latest, err := latestIntents(ctx, q, nodeID)
		if err != nil {
			return err
		}
		for i := range out {
			if in, ok := latest[[3]string{out[i].NodeID, out[i].Kind, out[i].ResourceID}]; ok {
				out[i].Latest = &in
			}
		}
		return nil
	})
	return out, err
}

func scanResourceStates(rows *sql.Rows) ([]ResourceState, error) {
	defer rows.Close()
	var out []ResourceState
	for rows.Next() {
		var r ResourceState
		var o ObservedStream
		var oj ObservedJob
		var observed, observedJob bool
		var at, le, ou, jle, ju, cgen, cat int64
		var detail, cnv, chv string
		if err := rows.Scan(&r.NodeID, &r.Kind, &r.ResourceID, &r.State, &r.ConfigVersion, &r.Generation, &r.ActionID, &at,
			&observed, &o.State, &o.Generation, &o.ConfigVersion, &o.ActionID, &o.LastError, &le, &ou,
			&observedJob, &oj.State, &oj.Generation, &oj.Version, &oj.ActionID, &oj.LastError, &jle, &detail, &ju,
			&cnv, &chv, &cgen, &cat); err != nil {
			return nil, err
		}
		r.UpdatedAt = tm(at)
		if r.Kind == KindConfiguration {
			r.ObservedConfig = observedConfig(cnv, chv, cgen, cat)
		}
		if observed {
			o.StreamID, o.LastErrorAt, o.UpdatedAt = r.ResourceID, tm(le), tm(ou)
			r.Observed = &o
		}
		if observedJob {
			oj.NodeID, oj.JobID, oj.LastErrorAt, oj.UpdatedAt = r.NodeID, r.ResourceID, tm(jle), tm(ju)
			if detail != "" {
				oj.Detail = json.RawMessage(detail)
			}
			r.ObservedJob = &oj
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// latestIntents returns the newest intent of every resource (of one node
// when nodeID is not empty), by node, kind and resource id.
func latestIntents(ctx context.Context, q querier, nodeID string) (map[[3]string]Intent, error) {
	w := &where{}
	w.eq("node_id", nodeID)
	rows, err := q.QueryContext(ctx, "SELECT "+intentCols+` FROM intents WHERE seq IN
		(SELECT MAX(seq) FROM intents`+w.String()+` GROUP BY node_id, resource_kind, resource_id)`, w.args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[[3]string]Intent{}
	for rows.Next() {
		in, err := scanIntent(rows)
		if err != nil {
			return nil, err
		}
		out[[3]string{in.NodeID, in.Kind, in.ResourceID}] = in
	}
	return out, rows.Err()
}

// GetResourceState returns the state of one resource, or ErrNotFound when
// it has no desired state.
func (s *Store) GetResourceState(ctx context.Context, nodeID, kind, resourceID string) (ResourceState, error) {
	var out ResourceState
	err := s.readTx(ctx, func(q querier) error {
		var at int64
		out.Resource = Resource{NodeID: nodeID, Kind: kind, ResourceID: resourceID}
		err := q.QueryRowContext(ctx, `SELECT state, config_version, generation, action_id, updated_at FROM resources
			WHERE node_id = ? AND resource_kind = ? AND resource_id = ?`, nodeID, kind, resourceID).
			Scan(&out.State, &out.ConfigVersion, &out.Generation, &out.ActionID, &at)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("resource %s/%s/%s: %w", nodeID, kind, resourceID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		out.UpdatedAt = tm(at)
		return fillResourceState(ctx, q, &out)
	})
	return out, err
}

func fillResourceState(ctx context.Context, q querier, r *ResourceState) error {
	in, err := scanIntent(q.QueryRowContext(ctx, "SELECT "+intentCols+` FROM intents
		WHERE node_id = ? AND resource_kind = ? AND resource_id = ? ORDER BY seq DESC LIMIT 1`, r.NodeID, r.Kind, r.ResourceID))
	switch {
	case err == nil:
		r.Latest = &in
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	if r.Kind == KindConfiguration {
		var nv, hv string
		var gen, at int64
		err := q.QueryRowContext(ctx, `SELECT config_node_version, config_hub_version, config_generation, config_reported_at
			FROM nodes WHERE node_id = ?`, r.NodeID).Scan(&nv, &hv, &gen, &at)
		switch {
		case err == nil:
			r.ObservedConfig = observedConfig(nv, hv, gen, at)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		return nil
	}
	if r.Kind == KindJob {
		o, err := scanObservedJob(q.QueryRowContext(ctx, "SELECT "+observedJobCols+" FROM observed_jobs WHERE node_id = ? AND job_id = ?",
			r.NodeID, r.ResourceID))
		switch {
		case err == nil:
			r.ObservedJob = &o
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		return nil
	}
	if r.Kind != KindStream {
		return nil
	}
	var o ObservedStream
	var le, u int64
	err = q.QueryRowContext(ctx, `SELECT stream_id, state, generation, config_version, action_id, last_error, last_error_at,
		updated_at FROM observed_streams WHERE node_id = ? AND stream_id = ?`, r.NodeID, r.ResourceID).
		Scan(&o.StreamID, &o.State, &o.Generation, &o.ConfigVersion, &o.ActionID, &o.LastError, &le, &u)
	switch {
	case err == nil:
		o.LastErrorAt, o.UpdatedAt = tm(le), tm(u)
		r.Observed = &o
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	return nil
}

// AllObservedStreams returns every node's observed streams, by node and
// stream id.
func (s *Store) AllObservedStreams(ctx context.Context) (map[string][]ObservedStream, error) {
	out := map[string][]ObservedStream{}
	err := s.read(ctx, func(q querier) error {
		rows, err := q.QueryContext(ctx, `SELECT node_id, stream_id, state, generation, config_version, action_id, last_error,
			last_error_at, updated_at FROM observed_streams ORDER BY node_id, stream_id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var n string
			var o ObservedStream
			var le, u int64
			if err := rows.Scan(&n, &o.StreamID, &o.State, &o.Generation, &o.ConfigVersion, &o.ActionID, &o.LastError, &le, &u); err != nil {
				return err
			}
			o.LastErrorAt, o.UpdatedAt = tm(le), tm(u)
			out[n] = append(out[n], o)
		}
		return rows.Err()
	})
	return out, err
}

// ActiveCommands returns every attempt in flight with its intent, oldest
// first: what the Hub must be able to redeliver after a restart. With a
// node id, only that node's.
func (s *Store) ActiveCommands(ctx context.Context, nodeID ...string) ([]ActiveCommand, error) {
	if len(nodeID) > 1 {
		return nil, fmt.Errorf("%w: one node at most", ErrInvalid)
	}
	var out []ActiveCommand
	err := s.readTx(ctx, func(q querier) error {
		as, err := activeAttempts(ctx, q, nodeID...)
		if err != nil {
			return err
		}
		for _, a := range as {
			i, err := getIntent(ctx, q, a.IntentID)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			out = append(out, ActiveCommand{Attempt: a, Intent: i})
		}
		return nil
	})
	return out, err
}

// ActiveCommand is an attempt in flight and its intent.
type ActiveCommand struct {
	Attempt Attempt
	Intent  Intent
}

// OutboxFor returns up to limit unprocessed outbox rows, oldest first, of
// the given nodes and, whatever their node, of intents expired by now.
func (s *Store) OutboxFor(ctx context.Context, nodeIDs []string, now time.Time, limit int) ([]OutboxEntry, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit %d", ErrInvalid, limit)
	}
	ids, err := json.Marshal(nonNil(nodeIDs))
	if err != nil {
		return nil, err
	}
	var out []OutboxEntry
	err = s.read(ctx, func(q querier) error {
		rows, err := q.QueryContext(ctx, outboxSelect+` WHERE o.processed_at IS NULL AND (o.node_id IN (SELECT value FROM json_each(?))
			OR (i.expires_at > 0 AND i.expires_at <= ?)) ORDER BY o.seq LIMIT ?`, string(ids), ms(now), limit)
		if err != nil {
			return err
		}
		out, err = scanOutbox(rows)
		return err
	})
	return out, err
}

// OperationStats are the counts behind GET /operations/status.
type OperationStats struct {
	ByState         map[string]int
	OldestPendingAt time.Time // created_at of the oldest pending intent; zero if none
	OutboxDepth     int       // unprocessed outbox rows
}

// OperationStats counts intents by state, the oldest pending one and the
// unprocessed outbox rows, in one read transaction.
func (s *Store) OperationStats(ctx context.Context) (OperationStats, error) {
	out := OperationStats{ByState: map[string]int{}}
	err := s.readTx(ctx, func(q querier) error {
		rows, err := q.QueryContext(ctx, "SELECT state, COUNT(*) FROM intents GROUP BY state")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var st string
			var n int
			if err := rows.Scan(&st, &n); err != nil {
				return err
			}
			out.ByState[st] = n
		}
		if err := rows.Err(); err != nil {
			return err
		}
		var oldest int64
		if err := q.QueryRowContext(ctx, "SELECT COALESCE(MIN(created_at), 0) FROM intents WHERE state = 'pending'").Scan(&oldest); err != nil {
			return err
		}
		out.OldestPendingAt = tm(oldest)
		return q.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox WHERE processed_at IS NULL").Scan(&out.OutboxDepth)
	})
	return out, err
}
