package sqldb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterInput(component.Spec{
		Name: "sql",
		Summary: "Reads rows of a `select_sql` query from PostgreSQL, MySQL or SQLite, one JSON object message " +
			"per row (keys in column order). The query runs once (then the input ends) or every `interval`. " +
			"With `cursor`, the query gets the last acknowledged value of the cursor column as its one bind " +
			"parameter ($1 for postgres, ? otherwise), so each poll reads only new rows; the query must order " +
			"by that column. The cursor advances only after the rows' batches are acknowledged and is kept in " +
			"memory (a restarted stream starts from `cursor.initial`); in a job it is the checkpointed " +
			"position, so a restore resumes after it. At-least-once: a failed batch is redelivered.",
		Schema: component.ObjectSchema(map[string]any{
			"select_sql": component.Prop("string", "The query. With `cursor`, it takes the cursor value as its "+
				"one bind parameter and orders by the cursor column, e.g. "+
				"`SELECT * FROM events WHERE id > $1 ORDER BY id LIMIT 1000`.", nil),
			"input_type": dbSchema("The database or file to read from (ArkFlow's tagged object).", true),
			"interval": component.DurationProp("Run the query again this long after the previous run "+
				"ended; absent or \"0s\" runs it once, then the input ends.", "0s"),
			"cursor": func() map[string]any {
				p := component.ObjectSchema(map[string]any{
					"column": component.Prop("string", "Result column whose value, from the last row of the "+
						"last acknowledged batch, is bound into the next query.", nil),
					"initial": map[string]any{
						"type":        []any{"string", "number", "boolean"},
						"description": "Cursor value bound into the first query.",
					},
				}, "column", "initial")
				p["description"] = "Incremental reads: see the summary."
				return p
			}(),
			"batch_size": func() map[string]any {
				p := component.Prop("integer", "Maximum rows per batch.", 100)
				p["minimum"] = 1
				return p
			}(),
		}, "select_sql", "input_type"),
		Example: `type: sql
select_sql: SELECT id, name, updated_at FROM events WHERE id > $1 ORDER BY id LIMIT 1000
input_type:
  type: postgres
  uri: postgres://flowplane:secret@127.0.0.1:5432/app?sslmode=disable
interval: 5s
cursor:
  column: id
  initial: 0
batch_size: 100
`,
	}, NewInput)
}

var _ component.Replayable = (*Input)(nil)

// InputConfig is the configuration of the sql input.
type InputConfig struct {
	SelectSQL string        `json:"select_sql"`
	InputType DBConfig      `json:"input_type"`
	Interval  string        `json:"interval"`
	Cursor    *CursorConfig `json:"cursor"`
	BatchSize int           `json:"batch_size"`
}

// CursorConfig is the cursor of incremental reads.
type CursorConfig struct {
	Column  string          `json:"column"`
	Initial json.RawMessage `json:"initial"`
}

// Input reads query results as messages.
//
// Read runs the query and hands out its rows batch by batch. In a stream,
// before the next query (a poll, or a retry after a failed read) it waits
// until every batch handed out is acknowledged, so the cursor it binds is
// the last acknowledged one; a batch acknowledged with an error is handed
// out again. In a job (once Position or Seek was called) it does not wait:
// the kernel acknowledges at checkpoints and replays from the position.
type Input struct {
	db        *database
	query     string
	interval  time.Duration
	cursorCol string
	batchSize int
	log       *slog.Logger

	conn conn // set by Connect

	// Owned by the goroutine that calls Read.
	rows      rowSet
	cols      []string
	types     []string
	cursorIdx int
	completed bool  // the last query ran to its end
	ran       bool  // a query ran since Connect or Seek
	emitted   any   // cursor of the last batch Read returned (JSON form, for Position)
	readBind  any   // the same cursor as a bind value
	inJob     bool  // Position or Seek was called: a job's kernel runs the input
	skip      int64 // rows of the first query to discard (Seek without cursor)
	rowsOut   int64 // rows handed out, for Position without cursor and metadata offsets

	wake chan struct{} // buffered(1): an acknowledgement arrived

	mu      sync.Mutex // guards flights, redo, cursor
	flights []*flight  // batches handed out and not yet acknowledged, in order
	redo    []redoBatch
	cursor  any // bind value of the next query: the last acknowledged cursor
}

// flight is one batch handed out.
type flight struct {
	cursor any // bind value after this batch (nil without cursor)
	done   bool
}

type redoBatch struct {
	b message.Batch
	f *flight
}

// NewInput builds an sql input from its configuration.
func NewInput(conf map[string]any, res component.Resources) (component.Input, error) {
	c := InputConfig{Interval: "0s", BatchSize: 100}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	if c.InputType.Type == typeJSON {
		return newFileInput(c, res)
	}
	var errs []error
	if strings.TrimSpace(c.SelectSQL) == "" {
		errs = append(errs, errors.New("select_sql: required"))
	}
	if c.InputType.ObjectStore != nil {
		errs = append(errs, errors.New("input_type.object_store: only for type json"))
	}
	db, err := parseDB("input_type", c.InputType, res)
	if err != nil {
		errs = append(errs, err)
	}
	interval, err := time.ParseDuration(c.Interval)
	if err != nil || interval < 0 {
		errs = append(errs, fmt.Errorf("interval: %q is not a non-negative duration such as \"5s\"", c.Interval))
	}
	if c.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("batch_size: must be at least 1, got %d", c.BatchSize))
	}
	in := &Input{
		db: db, query: c.SelectSQL, interval: interval, batchSize: c.BatchSize,
		log: res.Logger, wake: make(chan struct{}, 1), cursorIdx: -1,
	}
	if c.Cursor != nil {
		if c.Cursor.Column == "" {
			errs = append(errs, errors.New("cursor.column: required"))
		}
		in.cursorCol = c.Cursor.Column
		if len(c.Cursor.Initial) == 0 || string(c.Cursor.Initial) == "null" {
			errs = append(errs, errors.New("cursor.initial: required"))
		} else if v, err := decodeScalar(c.Cursor.Initial); err != nil {
			errs = append(errs, fmt.Errorf("cursor.initial: %w", err))
		} else {
			in.cursor, in.emitted, in.readBind = v, v, in.param(v)
			in.cursor = in.readBind
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return in, nil
}

// Connect opens the connection pool and checks the server answers. It may
// be called again after it failed.
func (in *Input) Connect(ctx context.Context) error {
	if in.conn != nil {
		return nil
	}
	db, err := in.db.connect(ctx)
	if err != nil {
		return fmt.Errorf("sql input: %w", err)
	}
	in.conn = db
	return nil
}

// Read returns the next batch of rows; see Input.
func (in *Input) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	if in.conn == nil {
		return message.Batch{}, nil, errors.New("sql input: not connected")
	}
	for {
		if err := ctx.Err(); err != nil {
			return message.Batch{}, nil, err
		}
		if r, ok := in.popRedo(); ok {
			return r.b, in.ackFor(r.b, r.f), nil
		}
		if in.rows != nil {
			b, cur, err := in.nextBatch()
			if err != nil {
				in.closeRows()
				return message.Batch{}, nil, fmt.Errorf("sql input: read rows: %w", in.db.scrub(err))
			}
			if b.Len() > 0 {
				f := &flight{cursor: cur}
				in.mu.Lock()
				in.flights = append(in.flights, f)
				in.mu.Unlock()
				return b, in.ackFor(b, f), nil
			}
			in.closeRows()
			in.completed = true
			continue
		}
		// Between queries: wait for every batch out to be acknowledged.
		// In a job acknowledgements come with checkpoints and the position
		// is what makes reads repeatable, so the input does not wait.
		if !in.inJob && in.pending() {
			select {
			case <-in.wake:
			case <-ctx.Done():
			}
			continue
		}
		if in.completed {
			if in.interval == 0 {
				return message.Batch{}, nil, message.ErrEndOfInput
			}
			t := time.NewTimer(in.interval)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				continue
			}
			in.completed = false
		}
		if err := in.runQuery(ctx); err != nil {
			return message.Batch{}, nil, fmt.Errorf("sql input: query: %w", in.db.scrub(err))
		}
	}
}

// runQuery starts the query, bound to the acknowledged cursor.
func (in *Input) runQuery(ctx context.Context) error {
	var args []any
	switch {
	case in.cursorCol != "" && in.inJob:
		args = []any{in.readBind}
	case in.cursorCol != "":
		in.mu.Lock()
		args = []any{in.cursor}
		in.mu.Unlock()
	}
	rows, err := in.conn.query(ctx, in.query, args...)
	if err != nil {
		return err
	}
	cols, types, err := rows.columns()
	if err != nil {
		rows.close()
		return err
	}
	in.cols, in.types, in.cursorIdx = cols, types, -1
	if in.cursorCol != "" {
		in.cursorIdx = slices.Index(cols, in.cursorCol)
		if in.cursorIdx < 0 {
			rows.close()
			return fmt.Errorf("cursor.column %q is not a column of the result (%s)", in.cursorCol, strings.Join(cols, ", "))
		}
	}
	in.rows = rows
	if in.ran {
		in.skip = 0 // a Seek's skip applies to the first query only
	}
	in.ran = true
	return nil
}

// nextBatch reads up to batchSize rows of the open result, with the
// cursor's bind value after the last of them.
func (in *Input) nextBatch() (message.Batch, any, error) {
	var msgs []message.Message
	var cur any
	for len(msgs) < in.batchSize && in.rows.next() {
		vals, err := in.rows.values()
		if err != nil {
			return message.Batch{}, nil, err
		}
		if in.skip > 0 {
			in.skip--
			in.rowsOut++
			continue
		}
		payload, err := rowJSON(in.cols, in.types, vals)
		if err != nil {
			return message.Batch{}, nil, err
		}
		m := message.New(payload)
		m.Meta.Source = "sql"
		m.Meta.Offset = in.rowsOut
		in.rowsOut++
		if in.cursorIdx >= 0 {
			cur = cursorBind(vals[in.cursorIdx])
			in.readBind = cur
			in.emitted = jsonValue(vals[in.cursorIdx], in.types[in.cursorIdx])
			m.SetMeta("sql_cursor", cursorText(in.emitted))
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		if err := in.rows.err(); err != nil {
			return message.Batch{}, nil, err
		}
	}
	return message.Batch{Messages: msgs}, cur, nil
}

// cursorBind copies a scanned cursor value so that it outlives the row
// (drivers may reuse []byte buffers).
func cursorBind(v any) any {
	if b, ok := v.([]byte); ok {
		return slices.Clone(b)
	}
	return v
}

func cursorText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func (in *Input) closeRows() {
	if in.rows != nil {
		in.rows.close()
		in.rows = nil
	}
}

func (in *Input) pending() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.flights) > 0
}

func (in *Input) popRedo() (redoBatch, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.redo) == 0 {
		return redoBatch{}, false
	}
	r := in.redo[0]
	in.redo = in.redo[1:]
	return r, true
}

// ackFor returns the AckFunc of b: nil advances the cursor past every
// acknowledged batch at the head of the line, an error queues b again.
func (in *Input) ackFor(b message.Batch, f *flight) message.AckFunc {
	b = message.Batch{Messages: slices.Clone(b.Messages)}
	return func(_ context.Context, err error) error {
		in.mu.Lock()
		if err != nil {
			in.log.Warn("batch failed; redelivering it", "messages", b.Len(), "error", err)
			in.redo = append(in.redo, redoBatch{b: b, f: f})
		} else {
			f.done = true
			for len(in.flights) > 0 && in.flights[0].done {
				if in.cursorCol != "" && in.flights[0].cursor != nil {
					in.cursor = in.flights[0].cursor
				}
				in.flights = in.flights[1:]
			}
		}
		in.mu.Unlock()
		select {
		case in.wake <- struct{}{}:
		default:
		}
		return nil
	}
}

// inputPosition is the checkpointed position of an sql input.
type inputPosition struct {
	// Cursor is the cursor after the last batch Read returned (with cursor).
	Cursor any `json:"cursor,omitempty"`
	// Rows is how many rows of the first query were handed out (without
	// cursor): a restore skips them, assuming the query returns rows in a
	// stable order.
	Rows int64 `json:"rows,omitempty"`
}

// Position returns the cursor of the last batch Read returned, or, without
// cursor, the number of rows handed out.
func (in *Input) Position() ([]byte, error) {
	in.inJob = true
	if in.cursorCol != "" {
		return json.Marshal(inputPosition{Cursor: in.emitted})
	}
	return json.Marshal(inputPosition{Rows: in.rowsOut})
}

// Seek makes the next query start after pos.
func (in *Input) Seek(_ context.Context, pos []byte) error {
	var p struct {
		Cursor json.RawMessage `json:"cursor"`
		Rows   int64           `json:"rows"`
	}
	if err := json.Unmarshal(pos, &p); err != nil {
		return fmt.Errorf("sql input: position %s: %w", pos, err)
	}
	in.inJob = true
	if in.cursorCol == "" {
		if p.Rows < 0 {
			return fmt.Errorf("sql input: position %s: negative rows", pos)
		}
		in.skip, in.rowsOut, in.ran = p.Rows, 0, false
		return nil
	}
	if len(p.Cursor) == 0 {
		return nil // nothing was read before the checkpoint
	}
	v, err := decodeScalar(p.Cursor)
	if err != nil {
		return fmt.Errorf("sql input: position %s: cursor %w", pos, err)
	}
	in.emitted, in.readBind = jsonValue(v, ""), in.param(v)
	in.mu.Lock()
	in.cursor = in.readBind
	in.mu.Unlock()
	return nil
}

// param is a configured or restored cursor value as a bind parameter:
// text for postgres, which parses it into the cursor column's type.
func (in *Input) param(v any) any {
	if in.db == nil || in.db.kind != typePostgres {
		return v
	}
	p, err := textParam(v)
	if err != nil {
		return v
	}
	return p
}

// Close ends the open query and closes the pool.
func (in *Input) Close(ctx context.Context) error {
	in.closeRows()
	if in.conn != nil {
		err := in.conn.close(ctx)
		in.conn = nil
		return err
	}
	return nil
}
