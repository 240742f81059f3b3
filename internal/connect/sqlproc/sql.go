package sqlproc

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sqlengine"
)

func init() {
	component.Default.RegisterProcessor(component.Spec{
		Name: "sql",
		Summary: "Runs an SQL query (SQLite's dialect, DataFusion's CAST type names) over the batch as a table " +
			"named `flow`, optionally joined with tables looked up in the stream's temporaries; the result is the new batch.",
		Schema: component.ObjectSchema(map[string]any{
			"query": component.Prop("string", "One SELECT (or WITH ... SELECT) statement over the batch.", nil),
			"table_name": func() map[string]any {
				p := component.Prop("string", "The name of the batch's table in the query.", "flow")
				p["pattern"] = tableNamePattern
				return p
			}(),
			"temporary_list": map[string]any{
				"type":        "array",
				"description": "Tables looked up, per batch, in the stream's temporaries and registered under table_name.",
				"items": component.ObjectSchema(map[string]any{
					"name":       component.Prop("string", "The name of a table in the stream's `temporary` list.", nil),
					"table_name": component.Prop("string", "The table's name in the query.", nil),
					"key":        keySchema(),
				}, "name", "table_name", "key"),
			},
		}, "query"),
		Example: `type: sql
query: "SELECT device, count(*) AS n, avg(reading) AS mean FROM flow WHERE reading > 1 GROUP BY device"
`,
	}, New)
}

const tableNamePattern = `^[A-Za-z_][A-Za-z0-9_]*$`

var tableNameRE = regexp.MustCompile(tableNamePattern)

func keySchema() map[string]any {
	value := component.ObjectSchema(map[string]any{
		"type":  map[string]any{"const": "value"},
		"value": component.Prop("string", "The one key to look up.", nil),
	}, "type", "value")
	expr := component.ObjectSchema(map[string]any{
		"type": map[string]any{"const": "expr"},
		"expr": component.Prop("string", "An SQL expression over the batch's table; its distinct values are the keys.", nil),
	}, "type", "expr")
	return map[string]any{
		"description": "The keys to look up: `{type: value, value: ...}` or `{type: expr, expr: ...}`.",
		"oneOf":       []any{value, expr},
	}
}

// Config is the configuration of the sql processor.
type Config struct {
	Query         string          `json:"query"`
	TableName     string          `json:"table_name"`
	TemporaryList []TemporaryConf `json:"temporary_list"`
}

// TemporaryConf is one entry of temporary_list.
type TemporaryConf struct {
	Name      string         `json:"name"`
	TableName string         `json:"table_name"`
	Key       map[string]any `json:"key"`
}

var (
	_ component.Processor = (*Processor)(nil)
	_ component.Columnar  = (*Processor)(nil)
)

// Processor runs the query over each batch.
type Processor struct {
	engine *sqlengine.Engine
	query  string
	table  string
	temps  []lookup
}

// lookup is a temporary table the query joins.
type lookup struct {
	table component.Temporary
	name  string // in the query
	key   string // a constant key, when keyQuery is empty
	// keyQuery selects the distinct keys from the batch's table.
	keyQuery string
}

// New builds an sql processor; the query is checked now.
func New(conf map[string]any, res component.Resources) (component.Processor, error) {
	var c Config
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	if c.Query == "" {
		return nil, errors.New("query: required")
	}
	if c.TableName == "" {
		c.TableName = "flow"
	}
	if !tableNameRE.MatchString(c.TableName) {
		return nil, fmt.Errorf("table_name: must match %s, got %q", tableNamePattern, c.TableName)
	}
	e, err := sqlengine.New()
	if err != nil {
		return nil, err
	}
	p := &Processor{engine: e, query: c.Query, table: c.TableName}
	if err := p.build(c, res); err != nil {
		_ = e.Close()
		return nil, err
	}
	return p, nil
}

func (p *Processor) build(c Config, res component.Resources) error {
	if err := p.engine.Check(c.Query); err != nil {
		return fmt.Errorf("query: %w", err)
	}
	names := map[string]bool{c.TableName: true}
	for i, t := range c.TemporaryList {
		field := fmt.Sprintf("temporary_list[%d]", i)
		if t.Name == "" {
			return fmt.Errorf("%s.name: required", field)
		}
		var table component.Temporary
		ok := false
		if res.Temporary != nil {
			table, ok = res.Temporary(t.Name)
		}
		if !ok || table == nil {
			return fmt.Errorf("%s.name: the stream has no temporary table named %q", field, t.Name)
		}
		if !tableNameRE.MatchString(t.TableName) {
			return fmt.Errorf("%s.table_name: must match %s, got %q", field, tableNamePattern, t.TableName)
		}
		if names[t.TableName] {
			return fmt.Errorf("%s.table_name: %q is already a table of the query", field, t.TableName)
		}
		names[t.TableName] = true
		l := lookup{table: table, name: t.TableName}
		switch t.Key["type"] {
		case "value":
			v, ok := t.Key["value"].(string)
			if !ok {
				return fmt.Errorf("%s.key.value: a string is required with type value", field)
			}
			l.key = v
		case "expr":
			src, ok := t.Key["expr"].(string)
			if !ok || src == "" {
				return fmt.Errorf("%s.key.expr: an expression is required with type expr", field)
			}
			l.keyQuery = "SELECT DISTINCT CAST((" + src + ") AS TEXT) FROM " + c.TableName
			if err := p.engine.Check(l.keyQuery); err != nil {
				return fmt.Errorf("%s.key.expr: %w", field, err)
			}
		case nil:
			return fmt.Errorf("%s.key: required", field)
		default:
			return fmt.Errorf("%s.key.type: must be value or expr, got %v", field, t.Key["type"])
		}
		p.temps = append(p.temps, l)
	}
	return nil
}

// Columnar marks the processor as reading tables itself.
func (p *Processor) Columnar() {}

// Process runs the query over the batch: its table, or for messages the
// binary table of their payloads (__value__) and metadata (__meta_*).
// An empty batch or an empty result gives no batch.
func (p *Processor) Process(ctx context.Context, b message.Batch) ([]message.Batch, error) {
	if b.Len() == 0 {
		return nil, nil
	}
	rec := b.Table
	if rec == nil {
		var err error
		if rec, err = columnar.FromMessages(b.Messages); err != nil {
			return nil, fmt.Errorf("sql: %w", err)
		}
	}
	tables := map[string]arrow.RecordBatch{p.table: rec}
	for _, l := range p.temps {
		t, err := p.lookup(ctx, l, rec)
		if err != nil {
			return nil, fmt.Errorf("sql: temporary table %s: %w", l.name, err)
		}
		tables[l.name] = t
	}
	out, err := p.engine.Query(ctx, p.query, tables)
	if err != nil {
		return nil, fmt.Errorf("sql: %w", err)
	}
	if out.NumRows() == 0 {
		return nil, nil
	}
	return []message.Batch{{Table: out}}, nil
}

// lookup gets the table l's keys select: the JSON documents stored under
// them, one row each.
func (p *Processor) lookup(ctx context.Context, l lookup, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	keys := []string{l.key}
	if l.keyQuery != "" {
		res, err := p.engine.Query(ctx, l.keyQuery, map[string]arrow.RecordBatch{p.table: rec})
		if err != nil {
			return nil, fmt.Errorf("key: %w", err)
		}
		keys = keys[:0]
		for i := 0; i < int(res.NumRows()); i++ {
			v, err := columnar.Value(res.Column(0), i)
			if err != nil {
				return nil, err
			}
			if s, ok := v.(string); ok { // null keys are skipped
				keys = append(keys, s)
			}
		}
	}
	var docs [][]byte
	if len(keys) > 0 {
		found, err := l.table.Get(ctx, keys)
		if err != nil {
			return nil, fmt.Errorf("lookup: %w", err)
		}
		for _, vals := range found {
			docs = append(docs, vals...)
		}
	}
	t, err := columnar.FromJSON(docs, nil)
	if err != nil {
		return nil, fmt.Errorf("stored value: %w", err)
	}
	return t, nil
}

// Close releases the engine.
func (p *Processor) Close(context.Context) error { return p.engine.Close() }
