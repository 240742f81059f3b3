package buffer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sqlengine"
)

// fieldInputName is the metadata field naming the multiple_inputs child a
// message came from (multi.FieldInputName): the table it joins as.
const fieldInputName = "input_name"

// joinSchema is the schema of the session_window's join field, ArkFlow's
// JoinConfig.
func joinSchema() map[string]any {
	codec := component.Prop("object", "Decodes each input's payloads into its table: {type: json} (one "+
		"column per field of the JSON objects), or any other codec.", nil)
	codec["required"] = []any{"type"}
	codec["properties"] = map[string]any{"type": map[string]any{"type": "string"}}
	threads := countProp("Accepted for ArkFlow's configurations; decoding runs on the buffer's reader.", nil)
	s := component.ObjectSchema(map[string]any{
		"query": component.Prop("string", "SQL (SELECT) run over the session's tables, one per named input "+
			"of multiple_inputs; its result is the session's batch.", nil),
		"value_field": component.Prop("string", "Column holding the payloads when a batch is already a table "+
			"(default __value__).", nil),
		"codec":      codec,
		"thread_num": threads,
	}, "query", "codec")
	s["description"] = "Joins the inputs of a closed session with SQL: its messages grouped by input name " +
		"(multiple_inputs children's name) into one table each, decoded with codec."
	return s
}

// JoinConfig is the configuration of a session_window's join.
type JoinConfig struct {
	Query      string         `json:"query"`
	ValueField string         `json:"value_field"`
	Codec      map[string]any `json:"codec"`
	ThreadNum  *int           `json:"thread_num"`
}

// sqlEngine is the engine of every join: safe for concurrent use, it is
// shared, so that a buffer built only to be checked leaves nothing open.
// It is made when the package loads, outside any goroutine a component is
// built from (database/sql starts a goroutine of its own).
var sqlEngine, errSQLEngine = sqlengine.New()

// join runs a session's query. Its fields are set at build; schemas is
// owned by the buffer's reader (Read is called from one goroutine).
type join struct {
	query      string
	valueField string
	decode     func(ctx context.Context, b message.Batch) (arrow.RecordBatch, error)
	eng        *sqlengine.Engine
	reads      []string // tables the query reads, lower case (see queryTables)

	schemas map[string]*arrow.Schema // last schema of each input name, lower case
}

// newJoin builds a join from its configuration, checking the query and
// the codec; errors name the field under join.
func newJoin(c *JoinConfig, res component.Resources) (*join, error) {
	if strings.TrimSpace(c.Query) == "" {
		return nil, errors.New("join.query: required")
	}
	if c.ThreadNum != nil && *c.ThreadNum < 1 {
		return nil, fmt.Errorf("join.thread_num: must be at least 1, got %d", *c.ThreadNum)
	}
	if errSQLEngine != nil {
		return nil, fmt.Errorf("join: %w", errSQLEngine)
	}
	eng := sqlEngine
	if err := eng.Check(c.Query); err != nil {
		return nil, fmt.Errorf("join.query: %w", err)
	}
	j := &join{query: c.Query, valueField: c.ValueField, eng: eng, reads: queryTables(c.Query),
		schemas: map[string]*arrow.Schema{}}
	if j.valueField == "" {
		j.valueField = columnar.ValueField
	}
	decode, err := joinDecoder(c.Codec, j.valueField, res)
	if err != nil {
		return nil, err
	}
	j.decode = decode
	return j, nil
}

// joinDecoder returns the function turning one input's batch into its
// table: json through columnar.FromJSON, other codecs through the
// registry.
func joinDecoder(conf map[string]any, valueField string, res component.Resources) (func(context.Context, message.Batch) (arrow.RecordBatch, error), error) {
	typ, _ := conf["type"].(string)
	if typ == "" {
		return nil, errors.New("join.codec.type: required")
	}
	if typ == "json" {
		if len(conf) > 1 {
			return nil, errors.New("join.codec: the json codec takes no fields besides type")
		}
		return func(_ context.Context, b message.Batch) (arrow.RecordBatch, error) {
			payloads, err := columnar.Payloads(b, valueField)
			if err != nil {
				return nil, err
			}
			return columnar.FromJSON(payloads, nil)
		}, nil
	}
	fields := maps.Clone(conf)
	delete(fields, "type")
	codec, err := component.Default.NewCodec(typ, fields, res)
	if err != nil {
		var u *component.UnknownError
		if errors.As(err, &u) {
			return nil, fmt.Errorf("join.codec.type: %w", err)
		}
		return nil, fmt.Errorf("join.codec.%w", err)
	}
	return func(ctx context.Context, b message.Batch) (arrow.RecordBatch, error) {
		out, err := codec.Decode(ctx, b)
		if err != nil {
			return nil, err
		}
		if out.Table == nil {
			return columnar.FromMessages(out.Messages)
		}
		return out.Table, nil
	}, nil
}

// run joins the messages of one session: grouped by input name into one
// table each, then the query over them. Messages of an unnamed input take
// no part (as in ArkFlow). A table the query reads that the session lacks
// is, when an earlier session had it, empty with its last schema, so the
// result is the query's (an inner join: no rows); when no session had it
// yet, its columns are unknown and the session yields no rows, which is
// what ArkFlow does whenever an input is missing.
func (j *join) run(ctx context.Context, b message.Batch) (message.Batch, error) {
	var order []string
	groups := map[string][]message.Message{}
	for _, m := range b.Messages {
		name := m.Meta.Fields[fieldInputName]
		if name == "" {
			continue
		}
		if _, seen := groups[name]; !seen {
			order = append(order, name)
		}
		groups[name] = append(groups[name], m)
	}
	tables := make(map[string]arrow.RecordBatch, len(order))
	present := map[string]bool{}
	for _, name := range order {
		t, err := j.decode(ctx, message.Batch{Messages: groups[name]})
		if err != nil {
			return message.Batch{}, fmt.Errorf("decoding the messages of input %q: %w", name, err)
		}
		tables[name] = t
		present[strings.ToLower(name)] = true
		j.schemas[strings.ToLower(name)] = t.Schema()
	}
	for _, name := range j.reads {
		if present[name] {
			continue
		}
		s, ok := j.schemas[name]
		if !ok {
			return message.Batch{}, nil
		}
		tables[name] = emptyTable(s)
	}
	out, err := j.eng.Query(ctx, j.query, tables)
	if err != nil {
		return message.Batch{}, fmt.Errorf("query: %w", err)
	}
	return message.Batch{Table: out}, nil
}

// emptyTable is a table of schema s without rows.
func emptyTable(s *arrow.Schema) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	return b.NewRecordBatch()
}
