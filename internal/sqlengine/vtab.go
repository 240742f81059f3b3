package sqlengine

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"modernc.org/sqlite/vtab"

	"github.com/flowplane/flowplane/internal/columnar"
)

// moduleName is the virtual table module every connection has.
const moduleName = "flowplane_arrow"

// Declared column types. SQLite reports them for a projected column, which
// is how a result column gets its Arrow type back.
const (
	declInt   = "INTEGER"
	declReal  = "REAL"
	declText  = "TEXT"
	declBlob  = "BLOB"
	declBool  = "BOOLEAN"
	declJSON  = "JSON"
	declTime  = "TIMESTAMP_MS" // not TIMESTAMP: the driver would parse it
	declUint  = "UBIGINT"
	declOther = ""
)

// slot is what one virtual table of one connection reads: the table of
// the current query. The connection's goroutine sets it before a query
// and clears it after.
type slot struct {
	rec  atomic.Pointer[boundTable]
	decl []string // declared types, fixed when the virtual table is created
}

// boundTable is an Arrow table with a reader per column.
type boundTable struct {
	rows int
	cols []func(i int) vtab.Value
}

// slots finds a slot by the id a CREATE VIRTUAL TABLE passes its module.
var slots = struct {
	sync.Mutex
	next int64
	m    map[int64]*slot
}{m: map[int64]*slot{}}

func newSlot(decl []string) (int64, *slot) {
	s := &slot{decl: decl}
	slots.Lock()
	slots.next++
	id := slots.next
	slots.m[id] = s
	slots.Unlock()
	return id, s
}

func dropSlot(id int64) {
	slots.Lock()
	delete(slots.m, id)
	slots.Unlock()
}

var registerOnce sync.Once
var registerErr error

func registerModule() error {
	registerOnce.Do(func() { registerErr = vtab.RegisterModule(nil, moduleName, arrowModule{}) })
	return registerErr
}

type arrowModule struct{}

func (arrowModule) Create(ctx vtab.Context, args []string) (vtab.Table, error) {
	return connectTable(ctx, args)
}

func (arrowModule) Connect(ctx vtab.Context, args []string) (vtab.Table, error) {
	return connectTable(ctx, args)
}

// connectTable declares the table: args are module, database, table name,
// slot id, then the column names (quoted as SQL identifiers).
func connectTable(ctx vtab.Context, args []string) (vtab.Table, error) {
	if len(args) < 4 {
		return nil, fmt.Errorf("%s: missing slot", moduleName)
	}
	id, err := strconv.ParseInt(strings.TrimSpace(args[3]), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%s: bad slot %q", moduleName, args[3])
	}
	slots.Lock()
	s := slots.m[id]
	slots.Unlock()
	if s == nil {
		return nil, fmt.Errorf("%s: no slot %d", moduleName, id)
	}
	names := args[4:]
	if len(names) != len(s.decl) {
		return nil, fmt.Errorf("%s: %d column names for %d columns", moduleName, len(names), len(s.decl))
	}
	var b strings.Builder
	b.WriteString("CREATE TABLE x(")
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n)
		if s.decl[i] != "" {
			b.WriteString(" " + s.decl[i])
		}
	}
	if len(names) == 0 {
		// SQLite has no table without columns: a hidden one nobody reads.
		b.WriteString(`"__no_columns__" HIDDEN`)
	}
	b.WriteString(")")
	if err := ctx.Declare(b.String()); err != nil {
		return nil, err
	}
	return &arrowTable{s: s}, nil
}

type arrowTable struct{ s *slot }

func (t *arrowTable) BestIndex(info *vtab.IndexInfo) error {
	n := int64(1)
	if bt := t.s.rec.Load(); bt != nil {
		n = int64(bt.rows)
	}
	info.EstimatedRows = n
	info.EstimatedCost = float64(n)
	return nil
}

func (t *arrowTable) Open() (vtab.Cursor, error) { return &arrowCursor{s: t.s}, nil }
func (t *arrowTable) Disconnect() error          { return nil }
func (t *arrowTable) Destroy() error             { return nil }

type arrowCursor struct {
	s   *slot
	bt  *boundTable
	row int
}

func (c *arrowCursor) Filter(int, string, []vtab.Value) error {
	c.bt = c.s.rec.Load()
	c.row = 0
	return nil
}

func (c *arrowCursor) Next() error { c.row++; return nil }
func (c *arrowCursor) Eof() bool   { return c.bt == nil || c.row >= c.bt.rows }
func (c *arrowCursor) Column(col int) (vtab.Value, error) {
	if col >= len(c.bt.cols) {
		return nil, nil
	}
	return c.bt.cols[col](c.row), nil
}
func (c *arrowCursor) Rowid() (int64, error) { return int64(c.row), nil }
func (c *arrowCursor) Close() error          { return nil }

// declType is the declared SQLite type of an Arrow field; an error names
// a type the engine cannot expose.
func declType(f arrow.Field) (string, error) {
	switch f.Type.ID() {
	case arrow.BOOL:
		return declBool, nil
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32:
		return declInt, nil
	case arrow.UINT64:
		return declUint, nil
	case arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64:
		return declReal, nil
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		if f.HasMetadata() && f.Metadata.FindKey(columnar.JSONKey) >= 0 {
			return declJSON, nil
		}
		return declText, nil
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW, arrow.FIXED_SIZE_BINARY:
		return declBlob, nil
	case arrow.TIMESTAMP:
		return declTime, nil
	case arrow.DATE32, arrow.DATE64:
		return declText, nil
	case arrow.NULL:
		return declOther, nil
	}
	return "", fmt.Errorf("column %s: type %s is not supported in SQL", f.Name, f.Type)
}

// reader returns a function reading row i of a as an SQLite value:
// integers as int64, floats as float64, bool as 0/1, text as string,
// binary as []byte, timestamps as int64 milliseconds since the epoch
// (UTC), dates as text YYYY-MM-DD.
func reader(a arrow.Array) func(i int) vtab.Value {
	nullable := func(f func(i int) vtab.Value) func(i int) vtab.Value {
		if a.NullN() == 0 {
			return f
		}
		return func(i int) vtab.Value {
			if a.IsNull(i) {
				return nil
			}
			return f(i)
		}
	}
	switch c := a.(type) {
	case *array.Boolean:
		return nullable(func(i int) vtab.Value {
			if c.Value(i) {
				return int64(1)
			}
			return int64(0)
		})
	case *array.Int8:
		return nullable(func(i int) vtab.Value { return int64(c.Value(i)) })
	case *array.Int16:
		return nullable(func(i int) vtab.Value { return int64(c.Value(i)) })
	case *array.Int32:
		return nullable(func(i int) vtab.Value { return int64(c.Value(i)) })
	case *array.Int64:
		return nullable(func(i int) vtab.Value { return c.Value(i) })
	case *array.Uint8:
		return nullable(func(i int) vtab.Value { return int64(c.Value(i)) })
	case *array.Uint16:
		return nullable(func(i int) vtab.Value { return int64(c.Value(i)) })
	case *array.Uint32:
		return nullable(func(i int) vtab.Value { return int64(c.Value(i)) })
	case *array.Uint64:
		return nullable(func(i int) vtab.Value {
			if v := c.Value(i); v <= math.MaxInt64 {
				return int64(v)
			}
			return float64(c.Value(i))
		})
	case *array.Float16:
		return nullable(func(i int) vtab.Value { return float64(c.Value(i).Float32()) })
	case *array.Float32:
		return nullable(func(i int) vtab.Value { return float64(c.Value(i)) })
	case *array.Float64:
		return nullable(func(i int) vtab.Value { return c.Value(i) })
	case *array.String:
		return nullable(func(i int) vtab.Value { return c.Value(i) })
	case *array.LargeString:
		return nullable(func(i int) vtab.Value { return c.Value(i) })
	case *array.StringView:
		return nullable(func(i int) vtab.Value { return c.Value(i) })
	case *array.Binary:
		return nullable(func(i int) vtab.Value { return c.Value(i) })
	case *array.LargeBinary:
		return nullable(func(i int) vtab.Value { return c.Value(i) })
	case *array.BinaryView:
		return nullable(func(i int) vtab.Value { return c.Value(i) })
	case *array.FixedSizeBinary:
		return nullable(func(i int) vtab.Value { return c.Value(i) })
	case *array.Timestamp:
		unit := c.DataType().(*arrow.TimestampType).Unit
		return nullable(func(i int) vtab.Value { return c.Value(i).ToTime(unit).UnixMilli() })
	case *array.Date32:
		return nullable(func(i int) vtab.Value { return c.Value(i).FormattedString() })
	case *array.Date64:
		return nullable(func(i int) vtab.Value { return c.Value(i).FormattedString() })
	}
	return func(int) vtab.Value { return nil }
}

// bind makes the readers of rec's columns.
func bind(rec arrow.RecordBatch) *boundTable {
	bt := &boundTable{rows: int(rec.NumRows()), cols: make([]func(int) vtab.Value, rec.NumCols())}
	for i := range bt.cols {
		bt.cols[i] = reader(rec.Column(i))
	}
	return bt
}
