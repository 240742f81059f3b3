package sqlengine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"modernc.org/sqlite"
)

// Engine runs queries; it is safe for concurrent use. Each concurrent
// Query takes a connection of its own (an in-memory SQLite database), so
// workers run in parallel; idle connections are kept for the next query.
type Engine struct {
	db     *sql.DB
	insert bool // load tables with INSERT instead of virtual tables (benchmark)

	mu     sync.Mutex // guards free, all, closed
	free   []*conn
	all    []*conn
	closed bool

	checkMu sync.Mutex // guards check
	check   *conn      // a connection without tables, for Check
}

// conn is one SQLite connection and the virtual tables created on it.
type conn struct {
	c        *sql.Conn
	internal atomic.Bool // the engine's own statements: the authorizer allows all
	tables   map[string]*table
}

// table is a virtual table of a connection, reused while the Arrow schema
// of the table registered under its name stays the same.
type table struct {
	id  int64
	s   *slot
	sig string
}

// New returns an engine.
func New() (*Engine, error) {
	if err := registerModule(); err != nil {
		return nil, fmt.Errorf("sqlengine: %w", err)
	}
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return nil, fmt.Errorf("sqlengine: %w", err)
	}
	db.SetMaxIdleConns(0)
	return &Engine{db: db}, nil
}

// Check reports, without tables, whether query is one read-only statement
// (SELECT or WITH ... SELECT) that parses. Names of tables and columns
// are not checked: they exist only when the query runs.
func (e *Engine) Check(query string) error {
	q, err := translate(query)
	if err != nil {
		return err
	}
	e.checkMu.Lock()
	defer e.checkMu.Unlock()
	if e.check == nil {
		c, err := e.open(context.Background())
		if err != nil {
			return err
		}
		e.check = c
	}
	st, err := e.check.c.PrepareContext(context.Background(), q)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return nil // it parsed: the tables come with the query
		}
		return cleanError(err)
	}
	return st.Close()
}

// Query runs query with each table registered under its name and returns
// the result as a table (zero rows with the result's columns when nothing
// matched).
func (e *Engine) Query(ctx context.Context, query string, tables map[string]arrow.RecordBatch) (arrow.RecordBatch, error) {
	q, err := translate(query)
	if err != nil {
		return nil, err
	}
	c, err := e.get(ctx)
	if err != nil {
		return nil, err
	}
	defer e.put(c)
	if e.insert {
		err = c.load(ctx, tables)
	} else {
		err = c.bind(ctx, tables)
	}
	if err != nil {
		return nil, err
	}
	defer c.unbind()
	rows, err := c.c.QueryContext(ctx, q)
	if err != nil {
		return nil, cleanError(err)
	}
	defer rows.Close()
	rec, err := buildResult(rows)
	if err != nil {
		return nil, cleanError(err)
	}
	return rec, nil
}

// Close releases the engine's connections.
func (e *Engine) Close() error {
	e.mu.Lock()
	e.closed = true
	all := e.all
	e.all, e.free = nil, nil
	e.mu.Unlock()
	var errs []error
	for _, c := range all {
		errs = append(errs, c.close())
	}
	e.checkMu.Lock()
	if e.check != nil {
		errs = append(errs, e.check.close())
		e.check = nil
	}
	e.checkMu.Unlock()
	errs = append(errs, e.db.Close())
	return errors.Join(errs...)
}

func (e *Engine) get(ctx context.Context) (*conn, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, errors.New("sqlengine: closed")
	}
	if n := len(e.free); n > 0 {
		c := e.free[n-1]
		e.free = e.free[:n-1]
		e.mu.Unlock()
		return c, nil
	}
	e.mu.Unlock()
	c, err := e.open(ctx)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		_ = c.close()
		return nil, errors.New("sqlengine: closed")
	}
	e.all = append(e.all, c)
	return c, nil
}

func (e *Engine) put(c *conn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		e.free = append(e.free, c)
	}
}

// open makes a connection whose authorizer lets queries only read.
func (e *Engine) open(ctx context.Context) (*conn, error) {
	sc, err := e.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlengine: %w", err)
	}
	c := &conn{c: sc, tables: map[string]*table{}}
	err = sc.Raw(func(dc any) error {
		r, ok := dc.(sqlite.AuthorizerRegisterer)
		if !ok {
			return errors.New("the driver has no authorizer")
		}
		return r.RegisterAuthorizer(func(action sqlite.AuthorizerActionCode, _, _, _, _ string) sqlite.AuthorizerReturnCode {
			if c.internal.Load() {
				return sqlite.AuthorizerOK
			}
			switch action {
			case sqlite.AuthSelect, sqlite.AuthRead, sqlite.AuthFunction, sqlite.AuthRecursive:
				return sqlite.AuthorizerOK
			}
			return sqlite.AuthorizerDeny
		})
	})
	if err != nil {
		_ = sc.Close()
		return nil, fmt.Errorf("sqlengine: %w", err)
	}
	return c, nil
}

func (c *conn) close() error {
	for _, t := range c.tables {
		dropSlot(t.id)
	}
	return c.c.Close()
}

// exec runs the engine's own statement.
func (c *conn) exec(ctx context.Context, q string, args ...any) error {
	c.internal.Store(true)
	defer c.internal.Store(false)
	_, err := c.c.ExecContext(ctx, q, args...)
	return err
}

// bind points the connection's virtual tables at tables, creating those
// whose name or schema is new and dropping those no longer given.
func (c *conn) bind(ctx context.Context, tables map[string]arrow.RecordBatch) error {
	for name, t := range c.tables {
		if _, ok := tables[name]; !ok {
			if err := c.drop(ctx, name, t); err != nil {
				return err
			}
		}
	}
	for name, rec := range tables {
		decl, sig, err := schemaOf(rec.Schema())
		if err != nil {
			return fmt.Errorf("table %s: %w", name, err)
		}
		t := c.tables[name]
		if t != nil && t.sig != sig {
			if err := c.drop(ctx, name, t); err != nil {
				return err
			}
			t = nil
		}
		if t == nil {
			id, s := newSlot(decl)
			var b strings.Builder
			fmt.Fprintf(&b, "CREATE VIRTUAL TABLE temp.%s USING %s(%d", quoteIdent(name), moduleName, id)
			for _, f := range rec.Schema().Fields() {
				b.WriteString(", " + quoteIdent(f.Name))
			}
			b.WriteString(")")
			if err := c.exec(ctx, b.String()); err != nil {
				dropSlot(id)
				return fmt.Errorf("table %s: %w", name, cleanError(err))
			}
			t = &table{id: id, s: s, sig: sig}
			c.tables[name] = t
		}
		t.s.rec.Store(bind(rec))
	}
	return nil
}

func (c *conn) drop(ctx context.Context, name string, t *table) error {
	delete(c.tables, name)
	dropSlot(t.id)
	if err := c.exec(ctx, "DROP TABLE temp."+quoteIdent(name)); err != nil {
		return fmt.Errorf("table %s: %w", name, cleanError(err))
	}
	return nil
}

// unbind forgets the query's tables so their memory is not held.
func (c *conn) unbind() {
	for _, t := range c.tables {
		t.s.rec.Store(nil)
	}
}

// load copies tables into temporary tables with INSERT: the alternative
// to virtual tables, kept for the benchmark that compares them.
func (c *conn) load(ctx context.Context, tables map[string]arrow.RecordBatch) error {
	for name, rec := range tables {
		decl, _, err := schemaOf(rec.Schema())
		if err != nil {
			return fmt.Errorf("table %s: %w", name, err)
		}
		if err := c.exec(ctx, "DROP TABLE IF EXISTS temp."+quoteIdent(name)); err != nil {
			return cleanError(err)
		}
		var cols, marks []string
		for i, f := range rec.Schema().Fields() {
			cols = append(cols, strings.TrimSpace(quoteIdent(f.Name)+" "+decl[i]))
			marks = append(marks, "?")
		}
		if len(cols) == 0 {
			cols = append(cols, `"__no_columns__"`)
		}
		if err := c.exec(ctx, "CREATE TEMP TABLE "+quoteIdent(name)+"("+strings.Join(cols, ", ")+")"); err != nil {
			return cleanError(err)
		}
		bt := bind(rec)
		if len(bt.cols) == 0 {
			continue
		}
		c.internal.Store(true)
		err = func() error {
			defer c.internal.Store(false)
			tx, err := c.c.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback() }()
			st, err := tx.PrepareContext(ctx, "INSERT INTO temp."+quoteIdent(name)+" VALUES ("+strings.Join(marks, ", ")+")")
			if err != nil {
				return err
			}
			defer st.Close()
			args := make([]any, len(bt.cols))
			for r := 0; r < bt.rows; r++ {
				for i, f := range bt.cols {
					args[i] = f(r)
				}
				if _, err := st.ExecContext(ctx, args...); err != nil {
					return err
				}
			}
			return tx.Commit()
		}()
		if err != nil {
			return fmt.Errorf("table %s: %w", name, cleanError(err))
		}
	}
	return nil
}

// schemaOf returns the declared types of a schema's fields and a
// signature telling two schemas apart.
func schemaOf(s *arrow.Schema) ([]string, string, error) {
	decl := make([]string, s.NumFields())
	var sig strings.Builder
	for i, f := range s.Fields() {
		d, err := declType(f)
		if err != nil {
			return nil, "", err
		}
		decl[i] = d
		sig.WriteString(strconv.Quote(f.Name))
		sig.WriteString(" " + d + ",")
	}
	return decl, sig.String(), nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// cleanError turns the driver's errors into readable ones: the
// authorizer's refusal becomes ErrNotReadOnly, SQLite's result code
// suffix goes.
func cleanError(err error) error {
	msg := err.Error()
	if strings.Contains(msg, "not authorized") {
		return fmt.Errorf("%w (%s)", ErrNotReadOnly, msg)
	}
	return err
}
