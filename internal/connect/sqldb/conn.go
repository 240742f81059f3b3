package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
)

// conn is a connection as the input and the output use it: database/sql
// for mysql and sqlite, pgx's own connection for postgres. It is used by
// one goroutine at a time.
type conn interface {
	query(ctx context.Context, q string, args ...any) (rowSet, error)
	// inTx runs fn in a transaction and commits it when fn returns nil.
	inTx(ctx context.Context, fn func(exec func(q string, args ...any) error) error) error
	close(ctx context.Context) error
}

// rowSet is an open query result.
type rowSet interface {
	// columns returns the column names and their upper-case database type
	// names.
	columns() (names, types []string, err error)
	next() bool
	values() ([]any, error)
	err() error
	close()
}

// sqlConn is a database/sql pool.
type sqlConn struct {
	db      *sql.DB
	release func() error // what the pool's files need held (sqlitePath)
}

func (c sqlConn) query(ctx context.Context, q string, args ...any) (rowSet, error) {
	rows, err := c.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return &sqlRows{rows: rows}, nil
}

func (c sqlConn) inTx(ctx context.Context, fn func(exec func(q string, args ...any) error) error) error {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	if err := fn(func(q string, args ...any) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	}); err != nil {
		return err
	}
	return tx.Commit()
}

func (c sqlConn) close(context.Context) error { return errors.Join(c.db.Close(), c.release()) }

type sqlRows struct {
	rows *sql.Rows
	n    int
}

func (r *sqlRows) columns() ([]string, []string, error) {
	names, err := r.rows.Columns()
	if err != nil {
		return nil, nil, err
	}
	cts, err := r.rows.ColumnTypes()
	if err != nil {
		return nil, nil, err
	}
	types := make([]string, len(cts))
	for i, ct := range cts {
		types[i] = strings.ToUpper(ct.DatabaseTypeName())
	}
	r.n = len(names)
	return names, types, nil
}

func (r *sqlRows) next() bool { return r.rows.Next() }

func (r *sqlRows) values() ([]any, error) {
	vals := make([]any, r.n)
	ptrs := make([]any, r.n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := r.rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	return vals, nil
}

func (r *sqlRows) err() error { return r.rows.Err() }
func (r *sqlRows) close()     { _ = r.rows.Close() }

// pgConn is one pgx connection, opened again on the next use after the
// server dropped it.
type pgConn struct {
	cfg *pgx.ConnConfig
	c   *pgx.Conn
}

func (p *pgConn) get(ctx context.Context) (*pgx.Conn, error) {
	if p.c != nil && !p.c.IsClosed() {
		return p.c, nil
	}
	if p.c != nil {
		_ = p.c.Close(ctx)
		p.c = nil
	}
	c, err := pgx.ConnectConfig(ctx, p.cfg)
	if err != nil {
		return nil, err
	}
	p.c = c
	return c, nil
}

func (p *pgConn) query(ctx context.Context, q string, args ...any) (rowSet, error) {
	c, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := c.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return &pgRows{rows: rows, tm: c}, nil
}

func (p *pgConn) inTx(ctx context.Context, fn func(exec func(q string, args ...any) error) error) error {
	c, err := p.get(ctx)
	if err != nil {
		return err
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { // a no-op after Commit
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dialTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	if err := fn(func(q string, args ...any) error {
		_, err := tx.Exec(ctx, q, args...)
		return err
	}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (p *pgConn) close(ctx context.Context) error {
	if p.c == nil {
		return nil
	}
	err := p.c.Close(ctx)
	p.c = nil
	return err
}

type pgRows struct {
	rows pgx.Rows
	tm   *pgx.Conn
}

func (r *pgRows) columns() ([]string, []string, error) {
	fds := r.rows.FieldDescriptions()
	names := make([]string, len(fds))
	types := make([]string, len(fds))
	for i, fd := range fds {
		names[i] = fd.Name
		if t, ok := r.tm.TypeMap().TypeForOID(fd.DataTypeOID); ok {
			types[i] = strings.ToUpper(t.Name)
		}
	}
	return names, types, nil
}

func (r *pgRows) next() bool             { return r.rows.Next() }
func (r *pgRows) values() ([]any, error) { return r.rows.Values() }
func (r *pgRows) err() error             { return r.rows.Err() }
func (r *pgRows) close()                 { r.rows.Close() }
