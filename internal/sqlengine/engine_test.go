package sqlengine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/go-cmp/cmp"
)

// sample is a table of every supported column type, one row with nulls.
func sample(t testing.TB) arrow.RecordBatch {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int32},
		{Name: "device", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "temp", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "__value__", Type: arrow.BinaryTypes.Binary},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "big", Type: arrow.PrimitiveTypes.Uint64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.Int32Builder).AppendValues([]int32{1, 2, 3}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"a", "b", ""}, []bool{true, true, false})
	b.Field(2).(*array.Float64Builder).AppendValues([]float64{20.5, 31, 0}, []bool{true, true, false})
	b.Field(3).(*array.BooleanBuilder).AppendValues([]bool{true, false, false}, []bool{true, true, false})
	b.Field(4).(*array.BinaryBuilder).AppendValues([][]byte{[]byte(`{"x":1}`), []byte("raw"), {}}, nil)
	ts := time.Date(2026, 1, 2, 3, 4, 5, 6000000, time.UTC).UnixMicro()
	b.Field(5).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{arrow.Timestamp(ts), 0, 0}, []bool{true, false, false})
	b.Field(6).(*array.Uint64Builder).AppendValues([]uint64{7, 1 << 63, 9}, nil)
	return b.NewRecordBatch()
}

// dump renders a result: "name type" per column, then each row as JSON
// values in column order.
func dump(t testing.TB, rec arrow.RecordBatch) []string {
	t.Helper()
	var out []string
	for _, f := range rec.Schema().Fields() {
		s := f.Name + " " + f.Type.String()
		if f.HasMetadata() {
			s += " " + f.Metadata.String()
		}
		out = append(out, s)
	}
	for r := 0; r < int(rec.NumRows()); r++ {
		var row []string
		for c := 0; c < int(rec.NumCols()); c++ {
			a := rec.Column(c)
			if a.IsNull(r) {
				row = append(row, "null")
				continue
			}
			var v any
			switch x := a.(type) {
			case *array.Binary:
				v = "b:" + string(x.Value(r))
			case *array.Timestamp:
				v = x.Value(r).ToTime(arrow.Millisecond).Format(time.RFC3339Nano)
			default:
				v = x.GetOneForMarshal(r)
			}
			j, _ := json.Marshal(v)
			row = append(row, string(j))
		}
		out = append(out, strings.Join(row, ","))
	}
	return out
}

func TestQuery(t *testing.T) {
	for _, insert := range []bool{false, true} {
		t.Run(fmt.Sprintf("insert=%v", insert), func(t *testing.T) { testQuery(t, insert) })
	}
}

func testQuery(t *testing.T, insert bool) {
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	e.insert = insert
	defer e.Close()
	rec := sample(t)
	other := func() arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{
			{Name: "device", Type: arrow.BinaryTypes.String},
			{Name: "room", Type: arrow.BinaryTypes.String},
		}, nil))
		defer b.Release()
		b.Field(0).(*array.StringBuilder).AppendValues([]string{"a", "b"}, nil)
		b.Field(1).(*array.StringBuilder).AppendValues([]string{"kitchen", "hall"}, nil)
		return b.NewRecordBatch()
	}()
	for _, tc := range []struct {
		name, query string
		want        []string
	}{
		{"projection keeps types", "SELECT id, device, temp, ok, at, big FROM flow",
			[]string{"id int64", "device utf8", "temp float64", "ok bool", "at timestamp[ms, tz=UTC]", "big float64",
				`1,"a",20.5,true,"2026-01-02T03:04:05.006Z",7`,
				`2,"b",31,false,null,9223372036854776000`,
				`3,null,null,null,null,9`}},
		{"filter", "SELECT device FROM flow WHERE temp > 30",
			[]string{"device utf8", `"b"`}},
		{"cast value as string", "SELECT cast(__value__ AS string) AS v, CAST(id AS varchar) AS s FROM flow WHERE id < 3",
			[]string{"v utf8", "s utf8", `"{\"x\":1}","1"`, `"raw","2"`}},
		{"cast numbers", "SELECT cast('7' AS bigint) AS i, cast('2.5' AS double) AS d, cast(1 AS float) AS f, try_cast('x' AS int) AS z",
			[]string{"i int64", "d float64", "f float64", "z int64", `7,2.5,1,0`}},
		{"binary stays binary", "SELECT __value__ FROM flow WHERE id = 2",
			[]string{"__value__ binary", `"b:raw"`}},
		{"aggregates", "SELECT count(*) AS n, sum(id) AS s, avg(temp) AS a, min(device) AS lo, max(temp) AS hi FROM flow",
			[]string{"n int64", "s int64", "a float64", "lo utf8", "hi float64", `3,6,25.75,"a",31`}},
		{"group by", "SELECT ok, count(*) AS n FROM flow GROUP BY ok ORDER BY ok",
			[]string{"ok bool", "n int64", "null,1", "false,1", "true,1"}},
		{"join", "SELECT f.id, d.room FROM flow f JOIN rooms d ON f.device = d.device ORDER BY f.id",
			[]string{"id int64", "room utf8", `1,"kitchen"`, `2,"hall"`}},
		{"mixed text and numbers", "SELECT CASE WHEN id = 1 THEN 'one' ELSE id END AS x FROM flow",
			[]string{"x utf8", `"one"`, `"2"`, `"3"`}},
		{"no rows keeps columns", "SELECT id, device FROM flow WHERE id > 10",
			[]string{"id int64", "device utf8"}},
		{"with", "WITH t AS (SELECT id FROM flow) SELECT max(id) AS m FROM t",
			[]string{"m int64", "3"}},
		{"literal with keywords", "SELECT 'x AS string; DELETE' AS s",
			[]string{"s utf8", `"x AS string; DELETE"`}},
		{"trailing semicolon", "SELECT 1 AS one;",
			[]string{"one int64", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.Query(context.Background(), tc.query, map[string]arrow.RecordBatch{"flow": rec, "rooms": other})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, dump(t, got)); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestQueryErrors(t *testing.T) {
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	tables := map[string]arrow.RecordBatch{"flow": sample(t)}
	for _, tc := range []struct {
		query string
		is    error
		err   string
	}{
		{query: "DELETE FROM flow", is: ErrNotReadOnly},
		{query: "INSERT INTO flow VALUES (1)", is: ErrNotReadOnly},
		{query: "CREATE TABLE x(a)", is: ErrNotReadOnly},
		{query: "PRAGMA table_info(flow)", is: ErrNotReadOnly},
		{query: "WITH t AS (SELECT 1) DELETE FROM flow", is: ErrNotReadOnly},
		{query: "SELECT * FROM pragma_table_info('flow')", is: ErrNotReadOnly},
		{query: "SELECT 1; SELECT 2", is: ErrMultiple},
		{query: "SELECT 1; DROP TABLE flow", is: ErrMultiple},
		{query: "", err: "empty query"},
		{query: "SELECT 'abc", err: "unterminated '"},
		{query: "SELEC 1", is: ErrNotReadOnly},
		{query: "SELECT FROM WHERE", err: "syntax error"},
		{query: "SELECT * FROM nothere", err: "no such table: nothere"},
		{query: "SELECT nope FROM flow", err: "no such column: nope"},
	} {
		_, err := e.Query(context.Background(), tc.query, tables)
		if err == nil {
			t.Errorf("%q: no error", tc.query)
			continue
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%q: %v, want %v", tc.query, err, tc.is)
		}
		if tc.err != "" && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: %v, want one containing %q", tc.query, err, tc.err)
		}
	}
}

func TestCheck(t *testing.T) {
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, tc := range []struct {
		query string
		err   string
	}{
		{query: "SELECT * FROM flow WHERE a > 1"},
		{query: "SELECT cast(__value__ AS string) FROM flow"},
		{query: "WITH t AS (SELECT 1 AS a) SELECT a FROM t"},
		{query: "SELECT count(*), sum(x) FROM flow GROUP BY y"},
		{query: "SELECT * FROM flow WHERE", err: "incomplete input"},
		{query: "SELECT * FROM flow WHERE a = = 1", err: "syntax error"},
		{query: "UPDATE flow SET a = 1", err: ErrNotReadOnly.Error()},
		{query: "SELECT 1; SELECT 2", err: ErrMultiple.Error()},
		{query: "SELECT nope()", err: "no such function: nope"},
	} {
		err := e.Check(tc.query)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: %v, want %q", tc.query, err, tc.err)
		}
	}
}

// TestSchemaChange reuses a connection's virtual table while the schema
// stays and recreates it when it changes or a table goes.
func TestSchemaChange(t *testing.T) {
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	rec := sample(t)
	for i := 0; i < 2; i++ {
		got, err := e.Query(ctx, "SELECT count(*) AS n FROM flow", map[string]arrow.RecordBatch{"flow": rec})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"n int64", "3"}, dump(t, got)); d != "" {
			t.Error(d)
		}
	}
	small := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil),
		[]arrow.Array{func() arrow.Array {
			b := array.NewStringBuilder(memory.DefaultAllocator)
			b.Append("z")
			return b.NewArray()
		}()}, 1)
	got, err := e.Query(ctx, "SELECT id FROM t2", map[string]arrow.RecordBatch{"t2": small})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"id utf8", `"z"`}, dump(t, got)); d != "" {
		t.Error(d)
	}
	if _, err := e.Query(ctx, "SELECT id FROM flow", map[string]arrow.RecordBatch{"t2": small}); err == nil || !strings.Contains(err.Error(), "no such table: flow") {
		t.Errorf("a table not given stays: %v", err)
	}
	got, err = e.Query(ctx, "SELECT id FROM flow", map[string]arrow.RecordBatch{"flow": small})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"id utf8", `"z"`}, dump(t, got)); d != "" {
		t.Error(d)
	}
}

func TestConcurrent(t *testing.T) {
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rec := sample(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				got, err := e.Query(context.Background(), "SELECT sum(id) AS s FROM flow", map[string]arrow.RecordBatch{"flow": rec})
				if err != nil {
					errs <- err
					return
				}
				if s := got.Column(0).(*array.Int64).Value(0); s != 6 {
					errs <- fmt.Errorf("sum %d", s)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestTranslate(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"SELECT cast(x AS string) FROM t", "SELECT cast(x AS TEXT) FROM t"},
		{"SELECT CAST(x as BIGINT), cast(y AS Double)", "SELECT CAST(x as INTEGER), cast(y AS REAL)"},
		{"SELECT cast(cast(a AS int) + 1 AS utf8)", "SELECT cast(cast(a AS INTEGER) + 1 AS TEXT)"},
		{"SELECT (SELECT a AS string) AS string", "SELECT (SELECT a AS string) AS string"},
		{"SELECT 'cast(x AS string)', \"string\"", "SELECT 'cast(x AS string)', \"string\""},
		{"SELECT try_cast(x AS bytea) -- cast(y AS string)", "SELECT CAST(x AS BLOB) -- cast(y AS string)"},
		{"SELECT cast(x AS /* c */ boolean)", "SELECT cast(x AS /* c */ INTEGER)"},
	} {
		got, err := translate(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func FuzzTranslate(f *testing.F) {
	for _, s := range []string{"SELECT cast(x AS string) FROM t", "WITH a AS (SELECT 1) SELECT * FROM a", "SELECT 'a''b' /* c */ -- d", "SELECT [x], `y`"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		toks, err := tokenize(q)
		if err != nil {
			return
		}
		var b strings.Builder
		for _, tk := range toks {
			b.WriteString(tk.text)
		}
		if b.String() != q {
			t.Fatalf("tokens do not give the input back: %q", b.String())
		}
		_, _ = translate(q)
	})
}

func benchTable(b *testing.B, n int) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "device", Type: arrow.BinaryTypes.String},
		{Name: "temp", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	for i := 0; i < n; i++ {
		rb.Field(0).(*array.Int64Builder).Append(int64(i))
		rb.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("dev-%d", i%10))
		rb.Field(2).(*array.Float64Builder).Append(float64(i%50) + 0.5)
	}
	return rb.NewRecordBatch()
}

// BenchmarkQuery compares the two ways of giving SQLite a 1000-row table:
// virtual tables reading the Arrow columns in place, and INSERT into a
// temporary table.
func BenchmarkQuery(b *testing.B) {
	rec := benchTable(b, 1000)
	for _, mode := range []string{"vtab", "insert"} {
		for _, q := range []struct{ name, query string }{
			{"filter", "SELECT id, device, temp FROM flow WHERE temp > 25"},
			{"groupby", "SELECT device, count(*), avg(temp) FROM flow GROUP BY device"},
		} {
			b.Run(mode+"/"+q.name, func(b *testing.B) {
				e, err := New()
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				e.insert = mode == "insert"
				tables := map[string]arrow.RecordBatch{"flow": rec}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := e.Query(context.Background(), q.query, tables); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestNoColumns: a table without columns (a lookup that found nothing)
// can still be joined.
func TestNoColumns(t *testing.T) {
	for _, insert := range []bool{false, true} {
		e, err := New()
		if err != nil {
			t.Fatal(err)
		}
		e.insert = insert
		empty := array.NewRecordBatch(arrow.NewSchema(nil, nil), nil, 0)
		got, err := e.Query(context.Background(), "SELECT flow.id FROM flow LEFT JOIN t ORDER BY id",
			map[string]arrow.RecordBatch{"flow": sample(t), "t": empty})
		if err != nil {
			t.Fatalf("insert=%v: %v", insert, err)
		}
		if d := cmp.Diff([]string{"id int64", "1", "2", "3"}, dump(t, got)); d != "" {
			t.Error(d)
		}
		e.Close()
	}
}
