package strexpr

import (
	"context"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sqlengine"
)

// The SQL engine of every SQL expression, made on first use.
var sqlEngine = struct {
	once sync.Once
	e    *sqlengine.Engine
	err  error
}{}

func engine() (*sqlengine.Engine, error) {
	sqlEngine.once.Do(func() { sqlEngine.e, sqlEngine.err = sqlengine.New() })
	return sqlEngine.e, sqlEngine.err
}

// sqlTable is the table an SQL expression reads.
const sqlTable = "flow"

// sqlQuery is the query evaluating src per row of the flow table.
func sqlQuery(src string) string {
	return "SELECT CAST((" + src + ") AS TEXT) FROM " + sqlTable
}

// compileSQL checks src as an SQL expression over the flow table.
func compileSQL(src string) (string, error) {
	e, err := engine()
	if err != nil {
		return "", err
	}
	q := sqlQuery(src)
	if err := e.Check(q); err != nil {
		return "", err
	}
	return q, nil
}

// table is the one-row table of m for an SQL expression: the fields of
// its JSON object payload as columns, or, for a payload that is not a
// JSON object, the binary table (__value__ and __meta_* columns).
func table(msgs []message.Message) (arrow.RecordBatch, error) {
	payloads := make([][]byte, len(msgs))
	for i := range msgs {
		p, err := msgs[i].Payload()
		if err != nil {
			return nil, err
		}
		payloads[i] = p
	}
	if rec, err := columnar.FromJSON(payloads, nil); err == nil {
		return rec, nil
	}
	return columnar.FromMessages(msgs)
}

// evalSQL runs the expression's query over msgs and returns one string
// per message.
func (e *Expr) evalSQL(ctx context.Context, msgs []message.Message) ([]string, error) {
	eng, err := engine()
	if err != nil {
		return nil, err
	}
	rec, err := table(msgs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.field, err)
	}
	res, err := eng.Query(ctx, e.sql, map[string]arrow.RecordBatch{sqlTable: rec})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.field, err)
	}
	col, ok := res.Column(0).(*array.String)
	if !ok || col.Len() != len(msgs) {
		return nil, fmt.Errorf("%s: the expression gave %d %s values for %d messages", e.field, res.Column(0).Len(), res.Column(0).DataType(), len(msgs))
	}
	out := make([]string, len(msgs))
	for i := range out {
		if col.IsNull(i) {
			return nil, fmt.Errorf("%s: the expression gave null", e.field)
		}
		out[i] = col.Value(i)
	}
	return out, nil
}
