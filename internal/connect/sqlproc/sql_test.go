package sqlproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	_ "github.com/flowplane/flowplane/internal/connect/processor" // mapping, filter
	"github.com/flowplane/flowplane/internal/message"
)

// mapTemporary is an in-memory Temporary: each key holds JSON documents.
type mapTemporary struct {
	mu   sync.Mutex
	data map[string][]string
	asks [][]string // the keys of each Get
	err  error
}

func (m *mapTemporary) Connect(context.Context) error { return nil }
func (m *mapTemporary) Close(context.Context) error   { return nil }
func (m *mapTemporary) Get(_ context.Context, keys []string) ([][][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asks = append(m.asks, append([]string(nil), keys...))
	if m.err != nil {
		return nil, m.err
	}
	out := make([][][]byte, len(keys))
	for i, k := range keys {
		for _, v := range m.data[k] {
			out[i] = append(out[i], []byte(v))
		}
	}
	return out, nil
}

func resources(temps map[string]component.Temporary) component.Resources {
	return component.Resources{Temporary: func(name string) (component.Temporary, bool) {
		t, ok := temps[name]
		return t, ok
	}}
}

func msgs(payloads ...string) []message.Message {
	out := make([]message.Message, len(payloads))
	for i, p := range payloads {
		out[i] = message.New([]byte(p))
	}
	return out
}

// jsonTable is the batch json_to_arrow makes of payloads.
func jsonTable(t testing.TB, payloads ...string) message.Batch {
	t.Helper()
	ps := make([][]byte, len(payloads))
	for i, p := range payloads {
		ps[i] = []byte(p)
	}
	rec, err := columnar.FromJSON(ps, nil)
	if err != nil {
		t.Fatal(err)
	}
	return message.Batch{Table: rec}
}

// rows runs p over b and returns the result rows as JSON.
func rows(t testing.TB, p component.Processor, b message.Batch) ([]string, error) {
	t.Helper()
	out, err := p.Process(context.Background(), b)
	if err != nil {
		return nil, err
	}
	var got []string
	for _, ob := range out {
		if ob.Table == nil {
			t.Fatalf("output is not a table: %+v", ob)
		}
		js, err := columnar.ToJSON(ob.Table, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range js {
			got = append(got, string(j))
		}
	}
	return got, nil
}

func build(t testing.TB, conf map[string]any, res component.Resources) component.Processor {
	t.Helper()
	p, err := component.Default.NewProcessor("sql", conf, res)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

var readings = []string{
	`{"device":"oven","reading":3,"temp":20.5,"ok":true}`,
	`{"device":"lamp","reading":1,"temp":18,"ok":false}`,
	`{"device":"oven","reading":5,"temp":22.5,"ok":true}`,
	`{"device":"fan","reading":2,"temp":19.25,"ok":true}`,
}

func TestExample(t *testing.T) {
	conf := componenttest.Example(t, component.Default, component.KindProcessor, "sql")
	p := build(t, conf, component.Resources{})
	got, err := rows(t, p, jsonTable(t, readings...))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{"device":"fan","n":1,"mean":2}`, `{"device":"oven","n":2,"mean":4}`}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

func TestQueries(t *testing.T) {
	for _, tc := range []struct {
		name  string
		query string
		table string
		in    message.Batch
		want  []string
	}{
		{name: "projection", query: "SELECT device, temp FROM flow", in: jsonTable(t, readings...),
			want: []string{`{"device":"oven","temp":20.5}`, `{"device":"lamp","temp":18}`, `{"device":"oven","temp":22.5}`, `{"device":"fan","temp":19.25}`}},
		{name: "filter", query: "SELECT * FROM flow WHERE reading >= 3 AND ok", in: jsonTable(t, readings...),
			want: []string{`{"device":"oven","reading":3,"temp":20.5,"ok":true}`, `{"device":"oven","reading":5,"temp":22.5,"ok":true}`}},
		{name: "aggregation", in: jsonTable(t, readings...),
			query: "SELECT device, count(*) AS n, sum(reading) AS s, avg(temp) AS a, min(temp) AS lo, max(reading) AS hi FROM flow GROUP BY device ORDER BY device",
			want: []string{
				`{"device":"fan","n":1,"s":2,"a":19.25,"lo":19.25,"hi":2}`,
				`{"device":"lamp","n":1,"s":1,"a":18,"lo":18,"hi":1}`,
				`{"device":"oven","n":2,"s":8,"a":21.5,"lo":20.5,"hi":5}`,
			}},
		{name: "table_name", query: "SELECT count(*) AS n FROM readings", table: "readings", in: jsonTable(t, readings...),
			want: []string{`{"n":4}`}},
		{name: "messages are the binary table", query: "SELECT cast(__value__ AS string) AS v FROM flow",
			in:   message.Batch{Messages: msgs(`{"a":1}`, "plain text")},
			want: []string{`{"v":"{\"a\":1}"}`, `{"v":"plain text"}`}},
		{name: "nothing matched", query: "SELECT * FROM flow WHERE reading > 100", in: jsonTable(t, readings...)},
		{name: "empty batch", query: "SELECT * FROM flow", in: message.Batch{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := map[string]any{"query": tc.query}
			if tc.table != "" {
				conf["table_name"] = tc.table
			}
			got, err := rows(t, build(t, conf, component.Resources{}), tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestTemporary(t *testing.T) {
	devices := &mapTemporary{data: map[string][]string{
		"device:oven": {`{"name":"oven","room":"kitchen"}`},
		"device:lamp": {`{"name":"lamp","room":"hall"}`},
	}}
	res := resources(map[string]component.Temporary{"devices": devices})
	t.Run("value key", func(t *testing.T) {
		p := build(t, map[string]any{
			"query": "SELECT flow.device, info.room FROM flow LEFT JOIN info ON flow.device = info.name ORDER BY flow.device",
			"temporary_list": []any{map[string]any{"name": "devices", "table_name": "info",
				"key": map[string]any{"type": "value", "value": "device:oven"}}},
		}, res)
		got, err := rows(t, p, jsonTable(t, readings...))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{`{"device":"fan","room":null}`, `{"device":"lamp","room":null}`, `{"device":"oven","room":"kitchen"}`, `{"device":"oven","room":"kitchen"}`}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("(-want +got)\n%s", d)
		}
	})
	t.Run("expr key", func(t *testing.T) {
		devices.asks = nil
		p := build(t, map[string]any{
			"query": "SELECT info.room, count(*) AS n FROM flow JOIN info ON flow.device = info.name GROUP BY info.room ORDER BY info.room",
			"temporary_list": []any{map[string]any{"name": "devices", "table_name": "info",
				"key": map[string]any{"type": "expr", "expr": "concat('device:', device)"}}},
		}, res)
		got, err := rows(t, p, jsonTable(t, readings...))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{`{"room":"hall","n":1}`, `{"room":"kitchen","n":2}`}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("(-want +got)\n%s", d)
		}
		if d := cmp.Diff([][]string{{"device:oven", "device:lamp", "device:fan"}}, devices.asks); d != "" {
			t.Errorf("keys asked (-want +got)\n%s", d)
		}
	})
	t.Run("nothing found", func(t *testing.T) {
		p := build(t, map[string]any{
			"query": "SELECT flow.device FROM flow LEFT JOIN info WHERE flow.reading = 1",
			"temporary_list": []any{map[string]any{"name": "devices", "table_name": "info",
				"key": map[string]any{"type": "value", "value": "nothing"}}},
		}, res)
		got, err := rows(t, p, jsonTable(t, readings...))
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{`{"device":"lamp"}`}, got); d != "" {
			t.Errorf("(-want +got)\n%s", d)
		}
	})
	t.Run("lookup fails", func(t *testing.T) {
		broken := &mapTemporary{err: errors.New("connection refused")}
		p := build(t, map[string]any{
			"query": "SELECT * FROM flow JOIN info",
			"temporary_list": []any{map[string]any{"name": "devices", "table_name": "info",
				"key": map[string]any{"type": "value", "value": "k"}}},
		}, resources(map[string]component.Temporary{"devices": broken}))
		_, err := rows(t, p, jsonTable(t, readings...))
		if err == nil || err.Error() != "sql: temporary table info: lookup: connection refused" {
			t.Errorf("error %v", err)
		}
	})
}

func TestBuildErrors(t *testing.T) {
	res := resources(map[string]component.Temporary{"devices": &mapTemporary{}})
	temp := func(m map[string]any) map[string]any {
		base := map[string]any{"query": "SELECT * FROM flow", "temporary_list": []any{m}}
		return base
	}
	for _, tc := range []struct {
		name string
		conf map[string]any
		err  string
	}{
		{"no query", map[string]any{}, "query: required"},
		{"bad SQL", map[string]any{"query": "SELECT * FROM flow WHERE a = = 1"}, `query: SQL logic error: near "=": syntax error (1)`},
		{"DML", map[string]any{"query": "DELETE FROM flow"}, "query: only SELECT (or WITH ... SELECT) is allowed, got DELETE"},
		{"DDL", map[string]any{"query": "CREATE TABLE t(a)"}, "query: only SELECT (or WITH ... SELECT) is allowed, got CREATE"},
		{"two statements", map[string]any{"query": "SELECT 1; SELECT 2"}, "query: only one statement is allowed"},
		{"bad table_name", map[string]any{"query": "SELECT 1", "table_name": "a b"}, `table_name: must match ^[A-Za-z_][A-Za-z0-9_]*$, got "a b"`},
		{"missing temporary", temp(map[string]any{"name": "nope", "table_name": "t", "key": map[string]any{"type": "value", "value": "k"}}),
			`temporary_list[0].name: the stream has no temporary table named "nope"`},
		{"no table_name", temp(map[string]any{"name": "devices", "key": map[string]any{"type": "value", "value": "k"}}),
			`temporary_list[0].table_name: must match ^[A-Za-z_][A-Za-z0-9_]*$, got ""`},
		{"table_name taken", temp(map[string]any{"name": "devices", "table_name": "flow", "key": map[string]any{"type": "value", "value": "k"}}),
			`temporary_list[0].table_name: "flow" is already a table of the query`},
		{"no key", temp(map[string]any{"name": "devices", "table_name": "t"}), "temporary_list[0].key: required"},
		{"bad key type", temp(map[string]any{"name": "devices", "table_name": "t", "key": map[string]any{"type": "x"}}),
			"temporary_list[0].key.type: must be value or expr, got x"},
		{"no key value", temp(map[string]any{"name": "devices", "table_name": "t", "key": map[string]any{"type": "value"}}),
			"temporary_list[0].key.value: a string is required with type value"},
		{"no key expr", temp(map[string]any{"name": "devices", "table_name": "t", "key": map[string]any{"type": "expr"}}),
			"temporary_list[0].key.expr: an expression is required with type expr"},
		{"bad key expr", temp(map[string]any{"name": "devices", "table_name": "t", "key": map[string]any{"type": "expr", "expr": "a +"}}),
			`temporary_list[0].key.expr: SQL logic error: near ")": syntax error (1)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := component.Default.NewProcessor("sql", tc.conf, res)
			if err == nil {
				_ = p.Close(context.Background())
				t.Fatal("no error")
			}
			if !strings.HasSuffix(err.Error(), tc.err) {
				t.Errorf("error %q, want one ending %q", err, tc.err)
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	for _, tc := range []struct{ query, err string }{
		{"SELECT * FROM missing", "sql: SQL logic error: no such table: missing (1)"},
		{"SELECT nope FROM flow", "sql: SQL logic error: no such column: nope (1)"},
	} {
		_, err := rows(t, build(t, map[string]any{"query": tc.query}, component.Resources{}), jsonTable(t, readings...))
		if err == nil || err.Error() != tc.err {
			t.Errorf("%q: error %v, want %q", tc.query, err, tc.err)
		}
	}
}

// TestSameAsMappingFilter runs one input through sql and through mapping
// + filter and compares the JSON rows.
func TestSameAsMappingFilter(t *testing.T) {
	var in []string
	for i := 0; i < 200; i++ {
		in = append(in, fmt.Sprintf(`{"id":%d,"device":"dev-%d","temp":%d.5,"ok":%v}`, i, i%7, i%40, i%3 == 0))
	}
	sqlp := build(t, map[string]any{"query": "SELECT id, device, temp * 2 AS double_temp FROM flow WHERE temp > 20 AND ok"}, component.Resources{})
	got, err := rows(t, sqlp, jsonTable(t, in...))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mapping, err := component.Default.NewProcessor("mapping", map[string]any{
		"expression": `{"id": this.id, "device": this.device, "double_temp": this.temp * 2, "keep": this.temp > 20 && this.ok}`}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	filter, err := component.Default.NewProcessor("filter", map[string]any{"condition": "this.keep"}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	drop, err := component.Default.NewProcessor("mapping", map[string]any{
		"expression": `{"id": this.id, "device": this.device, "double_temp": this.double_temp}`}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	batches := []message.Batch{{Messages: msgs(in...)}}
	for _, p := range []component.Processor{mapping, filter, drop} {
		var next []message.Batch
		for _, b := range batches {
			out, err := p.Process(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			next = append(next, out...)
		}
		batches = next
	}
	var want []string
	for _, b := range batches {
		for i := range b.Messages {
			p, _ := b.Messages[i].Payload()
			want = append(want, string(p))
		}
	}
	if len(want) == 0 {
		t.Fatal("the mapping pipeline kept nothing")
	}
	// mapping writes keys in sorted order, sql in column order: compare
	// the decoded objects.
	decode := func(rows []string) []map[string]any {
		var out []map[string]any
		for _, r := range rows {
			var m map[string]any
			if err := json.Unmarshal([]byte(r), &m); err != nil {
				t.Fatalf("%s: %v", r, err)
			}
			out = append(out, m)
		}
		return out
	}
	if d := cmp.Diff(decode(want), decode(got)); d != "" {
		t.Errorf("mapping+filter (-) vs sql (+)\n%s", d)
	}
}
