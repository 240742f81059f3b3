package store

import (
	"context"
	"database/sql"
)

// maxStmts bounds the writer's prepared-statement cache; the write paths
// use a fixed set of statement texts, well below it.
const maxStmts = 256

// stmtConn is the writer's connection with its prepared statements; parsing
// was a third of a write's CPU. Owned by the writer goroutine.
type stmtConn struct {
	c     *sql.Conn
	stmts map[string]*sql.Stmt
}

func (s *stmtConn) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := s.stmts[query]; ok {
		return st, nil
	}
	st, err := s.c.PrepareContext(ctx, query)
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
	return st.ExecContext(ctx, args...)
}

func (s *stmtConn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := s.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (s *stmtConn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := s.stmt(ctx, query)
	if err != nil {
		// Let the error surface through Row.Scan.
		return s.c.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

func (s *stmtConn) close() {
	for _, st := range s.stmts {
		_ = st.Close()
	}
}

// txStmts is a read transaction that prepares each statement text once: a
// read running one query per row (ResourceStates, two per resource) spent
// most of its time parsing the same SQL again. Owned by the read's
// goroutine; the statements close with the transaction.
type txStmts struct {
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
}

func (t *txStmts) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := t.stmts[query]; ok {
		return st, nil
	}
	st, err := t.tx.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	t.stmts[query] = st
	return st, nil
}

func (t *txStmts) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (t *txStmts) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (t *txStmts) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := t.stmt(ctx, query)
	if err != nil {
		// Let the error surface through Row.Scan.
		return t.tx.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}
