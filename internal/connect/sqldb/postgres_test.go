package sqldb

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/pgtest"
	"github.com/flowplane/flowplane/internal/stream"
)

func pgType(uri string) map[string]any { return map[string]any{"type": "postgres", "uri": uri} }

// TestPostgresStream runs generate -> sql output, then sql input -> file,
// and checks every row arrives with its SQL types mapped to JSON.
func TestPostgresStream(t *testing.T) {
	pg := pgtest.Start(t)
	pg.Exec(t, `CREATE TABLE events (id bigint PRIMARY KEY, name text, score double precision, ok boolean,
		at timestamptz, doc jsonb, amount numeric(10,2), note text)`)
	const n = 200
	e := componenttest.Engine(t, nodeDoc(t, map[string]any{
		"id": "load",
		"input": map[string]any{"type": "generate", "count": n, "batch_size": 10, "interval": "0s",
			"context": `{"id": {{count}}, "name": "n{{count}}", "score": 1.5, "ok": true, "at": "2026-01-02T03:04:05Z", "doc": {"a": {{count}}}, "amount": "12.50"}`},
		"output": map[string]any{"type": "sql", "output_type": pgType(pg.URI()), "table_name": "public.events"},
	}))
	waitStream(t, e, "load", "load completed", 30*time.Second, completed)
	if got := pg.Count(t, "SELECT count(*) FROM events"); got != n {
		t.Fatalf("rows = %d, want %d", got, n)
	}

	path := filepath.Join(t.TempDir(), "out.jsonl")
	e2 := componenttest.Engine(t, nodeDoc(t, map[string]any{
		"id": "dump",
		"input": map[string]any{"type": "sql", "select_sql": "SELECT * FROM events ORDER BY id",
			"input_type": pgType(pg.URI()), "batch_size": 7},
		"output": map[string]any{"type": "file", "path": path},
	}))
	waitStream(t, e2, "dump", "dump completed", 30*time.Second, completed)
	lines := readLines(t, path)
	if len(lines) != n {
		t.Fatalf("lines = %d, want %d", len(lines), n)
	}
	want := map[string]any{"id": 1.0, "name": "n1", "score": 1.5, "ok": true, "at": "2026-01-02T03:04:05Z",
		"doc": map[string]any{"a": 1.0}, "amount": 12.5, "note": nil}
	got := lines[0]
	// The server's time zone decides the offset; compare the instant.
	if at, err := time.Parse(time.RFC3339Nano, got["at"].(string)); err == nil {
		got["at"] = at.UTC().Format(time.RFC3339)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("first row (-want +got):\n%s", diff)
	}
}

// TestPostgresCursorPoll reads only new rows on each poll.
func TestPostgresCursorPoll(t *testing.T) {
	pg := pgtest.Start(t)
	pg.Exec(t, `CREATE TABLE src (id bigserial PRIMARY KEY, v text)`,
		`INSERT INTO src (v) SELECT 'a' || g FROM generate_series(1, 5) g`)
	path := filepath.Join(t.TempDir(), "out.jsonl")
	e := componenttest.Engine(t, nodeDoc(t, map[string]any{
		"id": "poll",
		"input": map[string]any{"type": "sql", "select_sql": "SELECT id, v FROM src WHERE id > $1 ORDER BY id LIMIT 3",
			"input_type": pgType(pg.URI()), "interval": "20ms", "batch_size": 2,
			"cursor": map[string]any{"column": "id", "initial": 0}},
		"output": map[string]any{"type": "file", "path": path},
	}))
	waitFor(t, "5 rows", 30*time.Second, func() bool { return len(readLines(t, path)) >= 5 })
	pg.Exec(t, `INSERT INTO src (v) SELECT 'b' || g FROM generate_series(1, 7) g`)
	waitFor(t, "12 rows", 30*time.Second, func() bool { return len(readLines(t, path)) >= 12 })
	// Polls ran after row 12 was read; one more row shows they re-read nothing.
	pg.Exec(t, `INSERT INTO src (v) VALUES ('last')`)
	waitFor(t, "13 rows", 30*time.Second, func() bool { return len(readLines(t, path)) >= 13 })
	lines := readLines(t, path)
	counts := idCounts(lines)
	for id := int64(1); id <= 13; id++ {
		if counts[id] != 1 {
			t.Errorf("id %d read %d times", id, counts[id])
		}
	}
	if len(lines) != 13 {
		t.Errorf("lines = %d, want 13", len(lines))
	}
	if st := componenttest.Stream(t, e, "poll"); st.Received != 13 {
		t.Errorf("received %d, want 13", st.Received)
	}
}

// TestPostgresUpsertIdempotent writes the same batch twice: the table ends
// as if it was written once, with the last value of a key repeated in the
// batch.
func TestPostgresUpsertIdempotent(t *testing.T) {
	pg := pgtest.Start(t)
	pg.Exec(t, `CREATE TABLE kv ("id" int PRIMARY KEY, "v" text, "we""ird" text)`)
	out := newOutput(t, map[string]any{"output_type": pgType(pg.URI()), "table_name": "kv",
		"mode": "upsert", "key_columns": []any{"id"}})
	ctx := ctxT(t)
	if err := out.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	b := batchOf(`{"id": 1, "v": "one"}`, `{"id": 2, "v": "two"}`, `{"id": 2, "v": "'); DROP TABLE kv; --", "we\"ird": "x"}`)
	for range 2 {
		if err := out.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if got := pg.Count(t, "SELECT count(*) FROM kv"); got != 2 {
		t.Fatalf("rows = %d, want 2", got)
	}
	if got := pg.Count(t, `SELECT count(*) FROM kv WHERE id = 2 AND v = '''); DROP TABLE kv; --' AND "we""ird" = 'x'`); got != 1 {
		t.Fatalf("id 2 does not hold the batch's last value")
	}
	// A missing key is refused rather than inserted as NULL.
	if err := out.Write(ctx, batchOf(`{"v": "no key"}`)); err == nil || !strings.Contains(err.Error(), `key column "id"`) {
		t.Fatalf("write without key: %v", err)
	}
}

// TestPostgresDownAtStart: Connect fails fast with a clear error that
// does not show the password, and succeeds once the server is up.
func TestPostgresDownAtStart(t *testing.T) {
	pg := pgtest.New(t) // initialized, not started
	out := newOutput(t, map[string]any{"output_type": pgType(pg.URI()), "table_name": "t"})
	in := newInput(t, map[string]any{"select_sql": "SELECT 1 AS id", "input_type": pgType(pg.URI())})
	ctx := ctxT(t)
	for _, c := range []interface{ Connect(context.Context) error }{out, in} {
		err := c.Connect(ctx)
		if err == nil {
			t.Fatal("Connect succeeded with the server down")
		}
		msg := err.Error()
		if !strings.Contains(msg, "connect to postgres 127.0.0.1:") || strings.Contains(msg, pgtest.Password) {
			t.Errorf("Connect error = %q; want it to name the server and hide the password", msg)
		}
	}
	pg.Start(t)
	pg.Exec(t, `CREATE TABLE t (id int)`)
	if err := out.Connect(ctx); err != nil {
		t.Fatalf("Connect after the server started: %v", err)
	}
	if err := out.Write(ctx, batchOf(`{"id": 1}`)); err != nil {
		t.Fatal(err)
	}
	if err := in.Connect(ctx); err != nil {
		t.Fatalf("input Connect after the server started: %v", err)
	}
}

// TestPostgresDownAtStartStream: a stream whose database is down stays
// starting with the error shown, and runs once the server is up.
func TestPostgresDownAtStartStream(t *testing.T) {
	pg := pgtest.New(t)
	const n = 50
	e := componenttest.Engine(t, nodeDoc(t, map[string]any{
		"id":     "late",
		"input":  map[string]any{"type": "generate", "count": n, "batch_size": 5, "interval": "0s", "context": `{"id": {{count}}}`},
		"output": map[string]any{"type": "sql", "output_type": pgType(pg.URI()), "table_name": "t"},
	}))
	st := waitStream(t, e, "late", "the connect error", 30*time.Second, func(st engine.StreamStatus) bool { return st.LastError != "" })
	if st.State != stream.StateStarting || strings.Contains(st.LastError, pgtest.Password) {
		t.Fatalf("status %+v; want starting, with an error hiding the password", st.Status)
	}
	pg.Start(t)
	pg.Exec(t, `CREATE TABLE t (id int)`)
	waitStream(t, e, "late", "completed", 60*time.Second, completed)
	if got := pg.Count(t, "SELECT count(DISTINCT id) FROM t"); got != n {
		t.Fatalf("distinct rows = %d, want %d", got, n)
	}
}

// TestPostgresRestartMidStream stops and restarts the server while a
// stream writes to it and while another reads from it: nothing is lost;
// duplicates are counted and bounded.
func TestPostgresRestartMidStream(t *testing.T) {
	pg := pgtest.Start(t)
	pg.Exec(t, `CREATE TABLE sink (id bigint)`)
	const n = 3000
	e := componenttest.Engine(t, nodeDoc(t, map[string]any{
		"id":     "write",
		"input":  map[string]any{"type": "generate", "count": n, "batch_size": 5, "interval": "3ms", "context": `{"id": {{count}}}`},
		"output": map[string]any{"type": "sql", "output_type": pgType(pg.URI()), "table_name": "sink"},
	}))
	waitFor(t, "some rows written", 30*time.Second, func() bool { return pg.Count(t, "SELECT count(*) FROM sink") >= 200 })
	pg.Stop(t)
	waitStream(t, e, "write", "a write error", 30*time.Second, func(st engine.StreamStatus) bool { return st.LastError != "" })
	pg.Start(t)
	waitStream(t, e, "write", "write completed", 60*time.Second, completed)
	total, distinct := pg.Count(t, "SELECT count(*) FROM sink"), pg.Count(t, "SELECT count(DISTINCT id) FROM sink")
	t.Logf("output across a restart: %d rows for %d messages, %d duplicates", total, n, total-distinct)
	if distinct != n || total-distinct > 50 {
		t.Fatalf("distinct %d (want %d), duplicates %d (want <= 50)", distinct, n, total-distinct)
	}

	// The input side: poll the sink by cursor into a file across a restart.
	path := filepath.Join(t.TempDir(), "out.jsonl")
	pg.Exec(t, `CREATE TABLE src AS SELECT g::bigint AS id FROM generate_series(1, 2000) g`)
	e2 := componenttest.Engine(t, nodeDoc(t, map[string]any{
		"id": "read",
		"input": map[string]any{"type": "sql", "select_sql": "SELECT id FROM src WHERE id > $1 ORDER BY id LIMIT 20",
			"input_type": pgType(pg.URI()), "interval": "5ms", "batch_size": 5,
			"cursor": map[string]any{"column": "id", "initial": 0}},
		"output": map[string]any{"type": "file", "path": path},
	}))
	waitFor(t, "some rows read", 30*time.Second, func() bool { return len(readLines(t, path)) >= 100 })
	pg.Stop(t)
	waitStream(t, e2, "read", "a read error", 30*time.Second, func(st engine.StreamStatus) bool { return st.LastError != "" })
	pg.Start(t)
	waitFor(t, "every row read", 60*time.Second, func() bool { return len(idCounts(readLines(t, path))) >= 2000 })
	lines := readLines(t, path)
	t.Logf("input across a restart: %d lines for 2000 rows, %d duplicates", len(lines), len(lines)-2000)
	if c := idCounts(lines); len(c) != 2000 || len(lines)-2000 > 50 {
		t.Fatalf("distinct %d (want 2000), duplicates %d (want <= 50)", len(c), len(lines)-2000)
	}
}

// TestPostgresValueBinding: JSON values reach columns of other types as
// text the server parses, and read back as the same JSON.
func TestPostgresValueBinding(t *testing.T) {
	pg := pgtest.Start(t)
	pg.Exec(t, `CREATE TABLE p (n serial, a text, b bigint, c boolean, d double precision, e numeric, f jsonb, g timestamptz)`)
	out := newOutput(t, map[string]any{"output_type": pgType(pg.URI()), "table_name": "p"})
	ctx := ctxT(t)
	if err := out.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	payloads := []string{`{"a": 5}`, `{"a": 1.5}`, `{"a": true}`, `{"b": "7"}`, `{"c": "true"}`, `{"d": "2.5"}`,
		`{"e": 123456789012345678901234567890.5}`, `{"f": {"x": [1, "y"]}}`, `{"a": {"x": 1}}`, `{"g": "2026-05-06T07:08:09.5+02:00"}`}
	if err := out.Write(ctx, batchOf(payloads...)); err != nil {
		t.Fatal(err)
	}
	in := newInput(t, map[string]any{"select_sql": "SELECT a, b, c, d, e, f, g AT TIME ZONE 'UTC' AS g FROM p ORDER BY n",
		"input_type": pgType(pg.URI()), "batch_size": 100})
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	b, _, err := in.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range b.Messages {
		p, _ := m.Payload()
		got = append(got, string(p))
	}
	row := func(col, v string) string {
		cols := map[string]string{"a": "null", "b": "null", "c": "null", "d": "null", "e": "null", "f": "null", "g": "null"}
		cols[col] = v
		return `{"a":` + cols["a"] + `,"b":` + cols["b"] + `,"c":` + cols["c"] + `,"d":` + cols["d"] + `,"e":` + cols["e"] + `,"f":` + cols["f"] + `,"g":` + cols["g"] + `}`
	}
	want := []string{row("a", `"5"`), row("a", `"1.5"`), row("a", `"true"`), row("b", `7`), row("c", `true`), row("d", `2.5`),
		row("e", `123456789012345678901234567890.5`), row("f", `{"x":[1,"y"]}`), row("a", `"{\"x\":1}"`), row("g", `"2026-05-06T05:08:09.5Z"`)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}
