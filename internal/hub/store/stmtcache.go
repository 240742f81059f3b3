package store

import (
	"context"
	"database/sql"
	"sync"

	"github.com/flowplane/flowplane/internal/wire"
)

// maxStmts bounds the writer's prepared-statement cache; the write paths
// use a fixed set of statement texts, well below it.
const maxStmts = 256

// stmtConn is the writer's connection with its prepared statements; parsing
// was a third of a write's CPU. Owned by the writer goroutine.
type stmtConn struct {
	c     *sql.Conn
	d     *dialect
	stmts map[string]*sql.Stmt
	// logging makes insertEvent keep the events of the transaction in
	// logged, for the event sink; txn is the transaction's number.
	logging bool
	logged  []wire.Event
	txn     int64
	// fence is the lease epoch fenced writes of the transaction must carry
	// (fenceEpoch), read once per transaction: fenceKnown is reset at
	// BEGIN and by lease writes.
	fence      int64
	fenceKnown bool
	// notes are the changes the transaction notes for the other Hubs
	// (note, sendNotes).
	notes map[string]bool
}

func (s *stmtConn) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := s.stmts[query]; ok {
		return st, nil
	}
	st, err := s.c.PrepareContext(ctx, s.d.text(query))
	if err != nil {
		return nil, err
	}
	if len(s.stmts) >= maxStmts {
		for k, old := range s.stmts {
			_ = old.Close()
			delete(s.stmts, k)
		}
	}
	s.stmts[query] = st
	return st, nil
}

func (s *stmtConn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := s.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, s.d.args(args)...)
}

func (s *stmtConn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := s.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, s.d.args(args)...)
}

func (s *stmtConn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := s.stmt(ctx, query)
	if err != nil {
		// Let the error surface through Row.Scan.
		return s.c.QueryRowContext(ctx, s.d.text(query), s.d.args(args)...)
	}
	return st.QueryRowContext(ctx, s.d.args(args)...)
}

func (s *stmtConn) close() {
	for k, st := range s.stmts {
		_ = st.Close()
		delete(s.stmts, k)
	}
}

// readStmts caches the read pool's prepared statements by text: the
// convergence worker and the event pump run the same few queries many
// times a second, and preparing them was most of their CPU. database/sql
// prepares a cached statement on each pooled connection the first time it
// runs there and keeps it. Entries are never evicted (a statement may be
// in use); past maxStmts texts, queries are prepared per call as before.
type readStmts struct {
	db    *sql.DB
	d     *dialect
	mu    sync.Mutex // guards stmts
	stmts map[string]*sql.Stmt
}

// stmt returns the cached statement for query, or nil when the cache is
// full or preparing failed (the caller then runs query unprepared, so that
// an error surfaces from the query itself).
func (r *readStmts) stmt(ctx context.Context, query string) *sql.Stmt {
	r.mu.Lock()
	st, ok := r.stmts[query]
	full := len(r.stmts) >= maxStmts
	r.mu.Unlock()
	if ok || full {
		return st
	}
	st, err := r.db.PrepareContext(ctx, r.d.text(query))
	if err != nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.stmts[query]; ok {
		_ = st.Close()
		return old
	}
	r.stmts[query] = st
	return st
}

func (r *readStmts) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, st := range r.stmts {
		_ = st.Close()
		delete(r.stmts, k)
	}
}

// readQuerier runs reads through the statement cache, on the pool or in
// the read transaction tx.
type readQuerier struct {
	r  *readStmts
	tx *sql.Tx // nil: the pool
}

func (q readQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	query, args = q.r.d.text(query), q.r.d.args(args)
	if q.tx != nil {
		return q.tx.ExecContext(ctx, query, args...)
	}
	return q.r.db.ExecContext(ctx, query, args...)
}

func (q readQuerier) prepared(ctx context.Context, query string) *sql.Stmt {
	st := q.r.stmt(ctx, query)
	if st != nil && q.tx != nil {
		st = q.tx.StmtContext(ctx, st)
	}
	return st
}

func (q readQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	args = q.r.d.args(args)
	if st := q.prepared(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	query = q.r.d.text(query)
	if q.tx != nil {
		return q.tx.QueryContext(ctx, query, args...)
	}
	return q.r.db.QueryContext(ctx, query, args...)
}

func (q readQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	args = q.r.d.args(args)
	if st := q.prepared(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	query = q.r.d.text(query)
	if q.tx != nil {
		return q.tx.QueryRowContext(ctx, query, args...)
	}
	return q.r.db.QueryRowContext(ctx, query, args...)
}
