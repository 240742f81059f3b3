package sqldb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterOutput(component.Spec{
		Name: "sql",
		Summary: "Writes each message, a JSON object, as a row of `table_name` in PostgreSQL, MySQL or SQLite: " +
			"one transaction per batch holding multi-row INSERTs, committed before the batch counts as written. " +
			"Columns are `columns`, or the union of the batch's fields; a missing field is NULL, a nested " +
			"object or array is stored as its JSON text. `mode: upsert` updates the row with the same " +
			"`key_columns` (ON CONFLICT DO UPDATE; ON DUPLICATE KEY UPDATE on MySQL), which makes a " +
			"redelivered batch harmless: at-least-once delivery with an exactly-once effect. Plain inserts " +
			"are at-least-once: a batch retried after an unanswered commit may be inserted twice.",
		Schema: component.ObjectSchema(map[string]any{
			"output_type": dbSchema("The database to write to (ArkFlow's tagged object).", false),
			"table_name":  component.Prop("string", "Table to write to; `schema.table` is quoted part by part.", nil),
			"columns": func() map[string]any {
				p := component.Prop("array", "Columns to write, taken from the message fields of the same name "+
					"(absent fields are NULL, other fields ignored). Default: every field of the batch's messages.", nil)
				p["items"] = map[string]any{"type": "string", "minLength": 1}
				p["uniqueItems"] = true
				return p
			}(),
			"mode": component.EnumProp("`insert` or `upsert` (needs `key_columns` and a unique index on them).",
				modeInsert, modeInsert, modeUpsert),
			"key_columns": func() map[string]any {
				p := component.Prop("array", "The unique key of an upsert: the conflict target, and the fields "+
					"every message must have.", nil)
				p["items"] = map[string]any{"type": "string", "minLength": 1}
				p["uniqueItems"] = true
				return p
			}(),
		}, "output_type", "table_name"),
		Example: `type: sql
output_type:
  type: postgres
  uri: postgres://flowplane:secret@127.0.0.1:5432/app?sslmode=disable
table_name: events
columns: [id, name, updated_at]
mode: upsert
key_columns: [id]
`,
	}, NewOutput)
}

var _ component.Output = (*Output)(nil)

// Write modes of the sql output.
const (
	modeInsert = "insert"
	modeUpsert = "upsert"
)

// maxParams bounds the bind parameters of one statement, below every
// supported database's limit (SQLite 32766, PostgreSQL and MySQL 65535).
const maxParams = 30000

// OutputConfig is the configuration of the sql output.
type OutputConfig struct {
	OutputType DBConfig `json:"output_type"`
	TableName  string   `json:"table_name"`
	Columns    []string `json:"columns"`
	Mode       string   `json:"mode"`
	KeyColumns []string `json:"key_columns"`
}

// Output writes batches as rows.
type Output struct {
	conf    OutputConfig
	db      *database
	dialect dialect
	log     *slog.Logger

	conn conn // set by Connect
}

// NewOutput builds an sql output from its configuration.
func NewOutput(conf map[string]any, res component.Resources) (component.Output, error) {
	c := OutputConfig{Mode: modeInsert}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	var errs []error
	db, err := parseDB("output_type", c.OutputType, res)
	if err != nil {
		errs = append(errs, err)
	}
	if strings.TrimSpace(c.TableName) == "" {
		errs = append(errs, errors.New("table_name: required"))
	} else if slices.Contains(strings.Split(c.TableName, "."), "") {
		errs = append(errs, fmt.Errorf("table_name: %q has an empty part", c.TableName))
	}
	errs = append(errs, checkNames("columns", c.Columns)...)
	switch c.Mode {
	case modeInsert:
		if len(c.KeyColumns) > 0 {
			errs = append(errs, errors.New("key_columns: only for mode upsert"))
		}
	case modeUpsert:
		if len(c.KeyColumns) == 0 {
			errs = append(errs, errors.New("key_columns: required for mode upsert"))
		}
		errs = append(errs, checkNames("key_columns", c.KeyColumns)...)
		if len(c.Columns) > 0 {
			for _, k := range c.KeyColumns {
				if !slices.Contains(c.Columns, k) {
					errs = append(errs, fmt.Errorf("key_columns: %q is not one of columns", k))
				}
			}
		}
	default:
		errs = append(errs, fmt.Errorf("mode: %q is not insert or upsert", c.Mode))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Output{conf: c, db: db, dialect: dialect{kind: db.kind}, log: res.Logger}, nil
}

func checkNames(field string, names []string) []error {
	var errs []error
	seen := map[string]bool{}
	for i, n := range names {
		switch {
		case n == "":
			errs = append(errs, fmt.Errorf("%s[%d]: must not be empty", field, i))
		case seen[n]:
			errs = append(errs, fmt.Errorf("%s[%d]: %q is listed twice", field, i, n))
		}
		seen[n] = true
	}
	return errs
}

// Connect opens the connection pool and checks the server answers. It may
// be called again after it failed.
func (o *Output) Connect(ctx context.Context) error {
	if o.conn != nil {
		return nil
	}
	db, err := o.db.connect(ctx)
	if err != nil {
		return fmt.Errorf("sql output: %w", err)
	}
	o.conn = db
	return nil
}

// Write inserts (or upserts) the batch in one transaction and returns nil
// only once it is committed.
func (o *Output) Write(ctx context.Context, b message.Batch) error {
	if o.conn == nil {
		return errors.New("sql output: not connected")
	}
	if b.Len() == 0 {
		return nil
	}
	rows, err := o.rows(b)
	if err != nil {
		return fmt.Errorf("sql output: %w", err)
	}
	cols := o.conf.Columns
	if len(cols) == 0 {
		cols = unionFields(rows)
	}
	if o.conf.Mode == modeUpsert {
		if rows, err = lastPerKey(rows, o.conf.KeyColumns); err != nil {
			return fmt.Errorf("sql output: %w", err)
		}
		for _, k := range o.conf.KeyColumns {
			if !slices.Contains(cols, k) {
				cols = append(cols, k)
			}
		}
	}
	if len(cols) == 0 {
		return errors.New("sql output: no columns to write: the messages have no fields")
	}
	if err := o.write(ctx, cols, rows); err != nil {
		return fmt.Errorf("sql output: %s: %w", o.conf.TableName, o.db.scrub(err))
	}
	return nil
}

func (o *Output) write(ctx context.Context, cols []string, rows []map[string]any) error {
	per := max(1, maxParams/len(cols))
	return o.conn.inTx(ctx, func(exec func(q string, args ...any) error) error {
		for start := 0; start < len(rows); start += per {
			chunk := rows[start:min(start+per, len(rows))]
			args := make([]any, 0, len(chunk)*len(cols))
			for i, r := range chunk {
				for _, c := range cols {
					bind := bindValue
					if o.dialect.kind == typePostgres {
						bind = textParam
					}
					v, err := bind(r[c])
					if err != nil {
						return fmt.Errorf("message %d field %q: %w", start+i, c, err)
					}
					args = append(args, v)
				}
			}
			if err := exec(o.statement(cols, len(chunk)), args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// statement is the INSERT of n rows of cols, with the upsert clause in
// upsert mode. Identifiers are quoted; values are bind parameters only.
func (o *Output) statement(cols []string, n int) string {
	d := o.dialect
	var b strings.Builder
	b.WriteString("INSERT INTO ")
	b.WriteString(d.table(o.conf.TableName))
	b.WriteString(" (")
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(d.quote(c))
	}
	b.WriteString(") VALUES ")
	p := 1
	for r := range n {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for i := range cols {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(d.param(p))
			p++
		}
		b.WriteByte(')')
	}
	if o.conf.Mode != modeUpsert {
		return b.String()
	}
	var set []string
	for _, c := range cols {
		if slices.Contains(o.conf.KeyColumns, c) {
			continue
		}
		q := d.quote(c)
		if d.kind == typeMySQL {
			set = append(set, q+" = VALUES("+q+")")
		} else {
			set = append(set, q+" = EXCLUDED."+q)
		}
	}
	if d.kind == typeMySQL {
		if len(set) == 0 { // every column is a key: nothing to update
			k := d.quote(o.conf.KeyColumns[0])
			set = []string{k + " = " + k}
		}
		b.WriteString(" ON DUPLICATE KEY UPDATE ")
		b.WriteString(strings.Join(set, ", "))
		return b.String()
	}
	b.WriteString(" ON CONFLICT (")
	for i, k := range o.conf.KeyColumns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(d.quote(k))
	}
	if len(set) == 0 {
		b.WriteString(") DO NOTHING")
		return b.String()
	}
	b.WriteString(") DO UPDATE SET ")
	b.WriteString(strings.Join(set, ", "))
	return b.String()
}

// rows decodes every message of b as a JSON object.
func (o *Output) rows(b message.Batch) ([]map[string]any, error) {
	rows := make([]map[string]any, 0, b.Len())
	for i := range b.Messages {
		p, err := b.Messages[i].Payload()
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		m, err := decodeObject(p)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		rows = append(rows, m)
	}
	return rows, nil
}

// unionFields lists every field of rows, sorted.
func unionFields(rows []map[string]any) []string {
	seen := map[string]bool{}
	var cols []string
	for _, r := range rows {
		for k := range r {
			if !seen[k] {
				seen[k] = true
				cols = append(cols, k)
			}
		}
	}
	slices.Sort(cols)
	return cols
}

// lastPerKey keeps, for each key, the last row of the batch that has it:
// a database refuses to upsert the same key twice in one statement, and
// the last write wins anyway.
func lastPerKey(rows []map[string]any, keys []string) ([]map[string]any, error) {
	index := make(map[string]int, len(rows))
	out := make([]map[string]any, 0, len(rows))
	for i, r := range rows {
		kv := make([]any, len(keys))
		for j, k := range keys {
			v, ok := r[k]
			if !ok || v == nil {
				return nil, fmt.Errorf("message %d: key column %q is missing or null", i, k)
			}
			kv[j] = v
		}
		id, err := json.Marshal(kv)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		if at, ok := index[string(id)]; ok {
			out[at] = r
			continue
		}
		index[string(id)] = len(out)
		out = append(out, r)
	}
	return out, nil
}

// Close closes the pool.
func (o *Output) Close(ctx context.Context) error {
	if o.conn != nil {
		err := o.conn.close(ctx)
		o.conn = nil
		return err
	}
	return nil
}
