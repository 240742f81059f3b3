package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// Audit outcomes.
const (
	OutcomeAccepted = "accepted"
	OutcomeRejected = "rejected"
)

// AuditRecord is one audit row (its type is the wire's, which clients
// share).
type AuditRecord = wire.AuditRecord

// Paging selects one page of a collection: Page from 1, PageSize 1..100.
type Paging struct {
	Page     int
	PageSize int
}

// MaxPageSize is the spec's page_size upper bound.
const MaxPageSize = 100

// MaxPage bounds page so that the row offset cannot overflow
// (httpapi.MaxPage).
const MaxPage = 1_000_000

func (p Paging) check() error {
	if p.Page < 1 || p.Page > MaxPage || p.PageSize < 1 || p.PageSize > MaxPageSize {
		return fmt.Errorf("%w: page %d, page_size %d", ErrInvalid, p.Page, p.PageSize)
	}
	return nil
}

func (p Paging) offset() int { return (p.Page - 1) * p.PageSize }

// where builds "WHERE a = ? AND b = ?" from the non-empty filters, in order.
type where struct {
	parts []string
	args  []any
}

func (w *where) eq(col, v string) {
	if v != "" {
		w.parts = append(w.parts, col+" = ?")
		w.args = append(w.args, v)
	}
}

func (w *where) String() string {
	if len(w.parts) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.parts, " AND ")
}

// AppendEvent appends e (its ID is ignored) and returns the new id.
func (s *Store) AppendEvent(ctx context.Context, e wire.Event) (int64, error) {
	var id int64
	err := s.write(ctx, func(ctx context.Context, q querier) error {
		var err error
		id, err = insertEvent(ctx, q, e)
		return err
	})
	return id, err
}

func insertEvent(ctx context.Context, q querier, e wire.Event) (int64, error) {
	data := ""
	if len(e.Data) > 0 {
		b, err := json.Marshal(e.Data)
		if err != nil {
			return 0, fmt.Errorf("%w: event data: %w", ErrInvalid, err)
		}
		data = string(b)
	}
	at := ms(e.OccurredAt.Time)
	id, err := insertRow(ctx, q, "id", `INSERT INTO events (kind, occurred_at, node_id, resource_id, operation_id,
		correlation_id, actor, actor_kind, outcome, message, data) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		e.Kind, at, e.NodeID, e.ResourceID, e.OperationID, e.CorrelationID, e.Actor, e.ActorKind, e.Outcome, e.Message, data)
	if err != nil {
		return 0, err
	}
	return id, logEvent(q, e, id, data)
}

// insertEventsPostgres is insertEvent for each of evs in one statement
// and one round trip: the events' columns as arrays, unnested in order.
// One session assigns the ids of one statement's rows in the order it
// inserts them, so the ids returned, sorted, are evs' ids in order.
func insertEventsPostgres(ctx context.Context, q querier, evs []wire.Event) error {
	n := len(evs)
	kind, node, res, op, corr, actor, actorKind, outcome, msg, data := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	at := make([]int64, n)
	for i, e := range evs {
		if len(e.Data) > 0 {
			b, err := json.Marshal(e.Data)
			if err != nil {
				return fmt.Errorf("%w: event data: %w", ErrInvalid, err)
			}
			data[i] = string(b)
		}
		kind[i], at[i], node[i], res[i], op[i], corr[i] = e.Kind, ms(e.OccurredAt.Time), e.NodeID, e.ResourceID, e.OperationID, e.CorrelationID
		actor[i], actorKind[i], outcome[i], msg[i] = e.Actor, e.ActorKind, e.Outcome, e.Message
	}
	rows, err := q.QueryContext(ctx, `INSERT INTO events (kind, occurred_at, node_id, resource_id, operation_id,
		correlation_id, actor, actor_kind, outcome, message, data)
		SELECT kind, occurred_at, node_id, resource_id, operation_id, correlation_id, actor, actor_kind, outcome, message, data
		FROM unnest(?::text[], ?::bigint[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[])
			WITH ORDINALITY AS e (kind, occurred_at, node_id, resource_id, operation_id, correlation_id, actor, actor_kind, outcome, message, data, n)
		ORDER BY n RETURNING id`, kind, at, node, res, op, corr, actor, actorKind, outcome, msg, data)
	if err != nil {
		return err
	}
	defer rows.Close()
	ids := make([]int64, 0, n)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(ids) != n {
		return fmt.Errorf("%w: %d events inserted, %d ids returned", ErrStorage, n, len(ids))
	}
	slices.Sort(ids)
	for i, e := range evs {
		if err := logEvent(q, e, ids[i], data[i]); err != nil {
			return err
		}
	}
	return nil
}

// insertRow runs the INSERT statement insert of one row and returns the
// row's key column key. On the SQLite writer that is the statement's
// last insert id: a RETURNING clause makes the statement a query, which
// costs more there. Elsewhere the statement returns it.
func insertRow(ctx context.Context, q querier, key, insert string, args ...any) (int64, error) {
	if c, ok := q.(*stmtConn); ok && !c.d.postgres {
		r, err := q.ExecContext(ctx, insert, args...)
		if err != nil {
			return 0, err
		}
		return r.LastInsertId()
	}
	var id int64
	err := q.QueryRowContext(ctx, insert+" RETURNING "+key, args...).Scan(&id)
	return id, err
}

// logEvent keeps event e, stored as id with data as its data's JSON text,
// for delivery once the writer's transaction commits (Store.onEvents).
func logEvent(q querier, e wire.Event, id int64, data string) error {
	c, ok := q.(*stmtConn)
	if !ok || !c.logging {
		return nil
	}
	// The event as a read gives it back: millisecond time in UTC, data
	// decoded from its JSON.
	e.ID, e.OccurredAt = id, wire.At(tm(ms(e.OccurredAt.Time)))
	var err error
	if e.Data, err = decoded(e.Data, data); err != nil {
		return err
	}
	c.logged = append(c.logged, e)
	return nil
}

// decoded is event data as decoding its JSON text gives it back: a copy of
// data whose numbers are float64. Values other than strings, booleans and
// numbers take the JSON way.
func decoded(data map[string]any, text string) (map[string]any, error) {
	if len(data) == 0 {
		return nil, nil
	}
	out := make(map[string]any, len(data))
	for k, v := range data {
		switch v := v.(type) {
		case string, bool, float64, nil:
			out[k] = v
		case int:
			out[k] = float64(v)
		case int64:
			out[k] = float64(v)
		default:
			out = nil
			if err := json.Unmarshal([]byte(text), &out); err != nil {
				return nil, fmt.Errorf("%w: event data: %w", ErrInvalid, err)
			}
			return out, nil
		}
	}
	return out, nil
}

// EventFilter narrows ListEvents; empty fields match everything.
type EventFilter struct {
	Kind, NodeID, ResourceID, OperationID, CorrelationID string
}

func (f EventFilter) where() *where {
	w := &where{}
	w.eq("kind", f.Kind)
	w.eq("node_id", f.NodeID)
	w.eq("resource_id", f.ResourceID)
	w.eq("operation_id", f.OperationID)
	w.eq("correlation_id", f.CorrelationID)
	return w
}

const eventCols = "id, kind, occurred_at, node_id, resource_id, operation_id, correlation_id, actor, actor_kind, outcome, message, data"

// ListEvents returns one page of the events matching f, newest first.
func (s *Store) ListEvents(ctx context.Context, f EventFilter, p Paging) (wire.Page[wire.Event], error) {
	out := wire.Page[wire.Event]{Items: []wire.Event{}, Page: p.Page, PageSize: p.PageSize}
	if err := p.check(); err != nil {
		return out, err
	}
	w := f.where()
	err := s.readTx(ctx, func(q querier) error {
		if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM events"+w.String(), w.args...).Scan(&out.Total); err != nil {
			return err
		}
		rows, err := q.QueryContext(ctx, "SELECT "+eventCols+" FROM events"+w.String()+" ORDER BY id DESC LIMIT ? OFFSET ?",
			append(w.args, p.PageSize, p.offset())...)
		if err != nil {
			return err
		}
		out.Items, err = scanEvents(rows)
		return err
	})
	return out, err
}

// EventsAfter returns up to limit (at most 2048) events with id > after
// that match f, oldest first: the replay of an SSE Last-Event-ID.
func (s *Store) EventsAfter(ctx context.Context, after int64, f EventFilter, limit int) ([]wire.Event, error) {
	if limit < 1 || limit > MaxEvents {
		return nil, fmt.Errorf("%w: limit %d", ErrInvalid, limit)
	}
	w := f.where()
	w.parts = append(w.parts, "id > ?")
	w.args = append(w.args, after)
	var out []wire.Event
	err := s.read(ctx, func(q querier) error {
		rows, err := q.QueryContext(ctx, "SELECT "+eventCols+" FROM events"+w.String()+" ORDER BY id LIMIT ?", append(w.args, limit)...)
		if err != nil {
			return err
		}
		out, err = scanEvents(rows)
		return err
	})
	return out, err
}

func scanEvents(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close() error
}) ([]wire.Event, error) {
	defer rows.Close()
	out := []wire.Event{}
	for rows.Next() {
		var e wire.Event
		var at int64
		var data string
		if err := rows.Scan(&e.ID, &e.Kind, &at, &e.NodeID, &e.ResourceID, &e.OperationID, &e.CorrelationID,
			&e.Actor, &e.ActorKind, &e.Outcome, &e.Message, &data); err != nil {
			return nil, err
		}
		e.OccurredAt = wire.At(tm(at))
		if data != "" {
			if err := json.Unmarshal([]byte(data), &e.Data); err != nil {
				return nil, fmt.Errorf("event %d data: %w", e.ID, err)
			}
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// EventIDs returns the oldest retained event id (0 when the log is empty)
// and the newest id ever assigned, which survives retention: ids never
// repeat. SSE replay sends resync when Last-Event-ID < oldest-1.
func (s *Store) EventIDs(ctx context.Context) (oldest, newest int64, err error) {
	err = s.readTx(ctx, func(q querier) error {
		if err := q.QueryRowContext(ctx, "SELECT COALESCE(MIN(id), 0) FROM events").Scan(&oldest); err != nil {
			return err
		}
		return lastEventID(ctx, q, &newest)
	})
	return oldest, newest, err
}

// LastEventID returns the highest event id ever assigned (0 if none), even
// when that row was reclaimed.
func (s *Store) LastEventID(ctx context.Context) (int64, error) {
	var id int64
	err := s.read(ctx, func(q querier) error { return lastEventID(ctx, q, &id) })
	return id, err
}

func lastEventID(ctx context.Context, q querier, id *int64) error {
	return q.QueryRowContext(ctx, "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)").Scan(id)
}

// AppendAudit appends r (its ID is ignored) and returns the new id.
func (s *Store) AppendAudit(ctx context.Context, r AuditRecord) (int64, error) {
	var id int64
	err := s.write(ctx, func(ctx context.Context, q querier) error {
		var err error
		id, err = insertAudit(ctx, q, r)
		return err
	})
	return id, err
}

func insertAudit(ctx context.Context, q querier, r AuditRecord) (int64, error) {
	if r.Outcome != OutcomeAccepted && r.Outcome != OutcomeRejected {
		return 0, fmt.Errorf("%w: audit outcome %q", ErrInvalid, r.Outcome)
	}
	return insertRow(ctx, q, "id", `INSERT INTO audit (occurred_at, actor, actor_kind, action, resource_type, resource_id, node_id,
		correlation_id, outcome, failure_code, message) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		ms(r.OccurredAt.Time), r.Actor, r.ActorKind, r.Action, r.ResourceType, r.ResourceID, r.NodeID, r.CorrelationID, r.Outcome, r.FailureCode, r.Message)
}

// AuditFilter narrows ListAudit; empty fields match everything. Outcome is
// OutcomeAccepted or OutcomeRejected. Visible, when set, keeps only the
// rows it accepts (a scoped principal's), with exact pages and total
// (listPage).
type AuditFilter struct {
	ResourceID, NodeID, Actor, Action, Outcome string
	Visible                                    func(AuditRecord) bool
}

const auditCols = `id, occurred_at, actor, actor_kind, action, resource_type, resource_id, node_id, correlation_id,
	outcome, failure_code, message`

func scanAudit(r scanner) (AuditRecord, error) {
	var a AuditRecord
	var at int64
	err := r.Scan(&a.ID, &at, &a.Actor, &a.ActorKind, &a.Action, &a.ResourceType, &a.ResourceID, &a.NodeID,
		&a.CorrelationID, &a.Outcome, &a.FailureCode, &a.Message)
	a.OccurredAt = wire.At(tm(at))
	return a, err
}

// ListAudit returns one page of the audit rows matching f, newest first.
func (s *Store) ListAudit(ctx context.Context, f AuditFilter, p Paging) (wire.Page[AuditRecord], error) {
	out := wire.Page[AuditRecord]{Items: []AuditRecord{}, Page: p.Page, PageSize: p.PageSize}
	if err := p.check(); err != nil {
		return out, err
	}
	w := &where{}
	w.eq("resource_id", f.ResourceID)
	w.eq("node_id", f.NodeID)
	w.eq("actor", f.Actor)
	w.eq("action", f.Action)
	w.eq("outcome", f.Outcome)
	err := s.readTx(ctx, func(q querier) error {
		var err error
		out.Items, out.Total, err = listPage(ctx, q, p, f.Visible, scanAudit, "SELECT COUNT(*) FROM audit"+w.String(),
			"SELECT "+auditCols+" FROM audit"+w.String()+" ORDER BY id DESC", w.args...)
		return err
	})
	return out, err
}

// event is a shorthand for the rows write functions append.
func event(kind string, now time.Time, nodeID, resourceID, opID, corr, actor, actorKind, outcome, msg string) wire.Event {
	return wire.Event{Kind: kind, OccurredAt: wire.At(now), NodeID: nodeID, ResourceID: resourceID,
		OperationID: opID, CorrelationID: corr, Actor: actor, ActorKind: actorKind, Outcome: outcome, Message: msg}
}
