package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/message"
)

// sqliteDB creates a database file with the given statements run.
func sqliteDB(t *testing.T, stmts ...string) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return path, db
}

func liteType(path string) map[string]any { return map[string]any{"type": "sqlite", "path": path} }

func count(t *testing.T, db *sql.DB, q string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// TestSQLiteStream runs generate -> sql output (upsert, run twice) and
// sql input -> file with SQLite: every row once, types mapped to JSON.
func TestSQLiteStream(t *testing.T) {
	path, db := sqliteDB(t, `CREATE TABLE ev (id INTEGER PRIMARY KEY, name TEXT, score REAL, data BLOB, extra TEXT)`)
	const n = 120
	load := func(id string) {
		e := componenttest.Engine(t, nodeDoc(t, map[string]any{
			"id": id,
			"input": map[string]any{"type": "generate", "count": n, "batch_size": 8, "interval": "0s",
				"context": `{"id": {{count}}, "name": "n{{count}}", "score": 0.25, "extra": {"nested": [1, 2]}, "ignored": 1}`},
			"output": map[string]any{"type": "sql", "output_type": liteType(path), "table_name": "ev",
				"columns": []any{"id", "name", "score", "extra", "data"}, "mode": "upsert", "key_columns": []any{"id"}},
		}))
		waitStream(t, e, id, id+" completed", 30*time.Second, completed)
	}
	load("load1")
	load("load2") // the same rows again: upsert leaves one of each
	if got := count(t, db, "SELECT count(*) FROM ev"); got != n {
		t.Fatalf("rows = %d, want %d", got, n)
	}
	if _, err := db.Exec(`UPDATE ev SET data = x'00ff' WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out.jsonl")
	e := componenttest.Engine(t, nodeDoc(t, map[string]any{
		"id": "dump",
		"input": map[string]any{"type": "sql", "select_sql": "SELECT id, name, score, data, extra, 1 = 1 AS yes FROM ev ORDER BY id",
			"input_type": liteType(path)},
		"output": map[string]any{"type": "file", "path": out},
	}))
	waitStream(t, e, "dump", "dump completed", 30*time.Second, completed)
	lines := readLines(t, out)
	if len(lines) != n {
		t.Fatalf("lines = %d, want %d", len(lines), n)
	}
	want := map[string]any{"id": 1.0, "name": "n1", "score": 0.25, "data": "AP8=", "extra": `{"nested":[1,2]}`, "yes": 1.0}
	if diff := cmp.Diff(want, lines[0]); diff != "" {
		t.Errorf("first row (-want +got):\n%s", diff)
	}
}

// TestSQLiteCursorAckAndSeek: the cursor advances only when a batch is
// acknowledged, a failed batch is handed out again, and Position/Seek
// resume after the last batch read.
func TestSQLiteCursorAckAndSeek(t *testing.T) {
	path, db := sqliteDB(t, `CREATE TABLE src (id INTEGER PRIMARY KEY, v TEXT)`,
		`INSERT INTO src (id, v) VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e')`)
	conf := func() map[string]any {
		return map[string]any{"select_sql": "SELECT id, v FROM src WHERE id > ? ORDER BY id", "input_type": liteType(path),
			"interval": "1ms", "batch_size": 2, "cursor": map[string]any{"column": "id", "initial": 0}}
	}
	ctx := ctxT(t)
	in := newInput(t, conf())
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	read := func(in *Input) (message.Batch, message.AckFunc) {
		t.Helper()
		b, ack, err := in.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return b, ack
	}
	ids := func(b message.Batch) []string {
		var out []string
		for _, m := range b.Messages {
			p, _ := m.Payload()
			out = append(out, string(p))
		}
		return out
	}
	b1, ack1 := read(in)
	if diff := cmp.Diff([]string{`{"id":1,"v":"a"}`, `{"id":2,"v":"b"}`}, ids(b1)); diff != "" {
		t.Fatalf("first batch (-want +got):\n%s", diff)
	}
	if b1.Messages[1].Meta.Fields["sql_cursor"] != "2" || b1.Messages[1].Meta.Source != "sql" {
		t.Errorf("metadata %+v", b1.Messages[1].Meta)
	}
	pos, err := in.Position()
	if err != nil || string(pos) != `{"cursor":2}` {
		t.Fatalf("Position = %s, %v", pos, err)
	}
	b2, ack2 := read(in)
	if err := ack2(ctx, nil); err != nil { // out of order: the cursor waits for batch 1
		t.Fatal(err)
	}
	if in.cursor != any(int64(0)) {
		t.Fatalf("cursor %v advanced past an unacknowledged batch", in.cursor)
	}
	_ = ack1(ctx, errors.New("output failed"))
	again, ackAgain := read(in)
	if diff := cmp.Diff(ids(b1), ids(again)); diff != "" {
		t.Fatalf("redelivered batch (-want +got):\n%s", diff)
	}
	_ = ackAgain(ctx, nil)
	if in.cursor != any(int64(4)) {
		t.Fatalf("cursor = %v after acknowledging batches 1 and 2, want 4", in.cursor)
	}
	_ = b2
	b3, ack3 := read(in)
	if diff := cmp.Diff([]string{`{"id":5,"v":"e"}`}, ids(b3)); diff != "" {
		t.Fatalf("third batch (-want +got):\n%s", diff)
	}
	_ = ack3(ctx, nil)
	// A new row is read by the next poll, and nothing else.
	if _, err := db.Exec(`INSERT INTO src VALUES (6, 'f')`); err != nil {
		t.Fatal(err)
	}
	b4, ack4 := read(in)
	if diff := cmp.Diff([]string{`{"id":6,"v":"f"}`}, ids(b4)); diff != "" {
		t.Fatalf("poll after insert (-want +got):\n%s", diff)
	}
	_ = ack4(ctx, nil)

	// A restored input resumes after the saved position.
	in2 := newInput(t, conf())
	if err := in2.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := in2.Seek(ctx, []byte(`{"cursor":3}`)); err != nil {
		t.Fatal(err)
	}
	b5, _ := read(in2)
	if diff := cmp.Diff([]string{`{"id":4,"v":"d"}`, `{"id":5,"v":"e"}`}, ids(b5)); diff != "" {
		t.Fatalf("after Seek (-want +got):\n%s", diff)
	}
}

// TestSQLiteOnceEndsAfterAcks: a query run once ends the input only after
// every batch is acknowledged; without cursor a position skips rows.
func TestSQLiteOnceEndsAfterAcks(t *testing.T) {
	path, _ := sqliteDB(t, `CREATE TABLE src (id INTEGER)`, `INSERT INTO src VALUES (1), (2), (3)`)
	ctx := ctxT(t)
	in := newInput(t, map[string]any{"select_sql": "SELECT id FROM src ORDER BY id", "input_type": liteType(path), "batch_size": 2})
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	var acks []message.AckFunc
	for range 2 {
		_, ack, err := in.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, ack)
	}
	if pos, _ := in.Position(); string(pos) != `{"rows":3}` {
		t.Fatalf("Position = %s", pos)
	}
	// With a batch unacknowledged, Read waits (here until ctx ends).
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, _, err := in.Read(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Read with a batch out = %v, want it to wait", err)
	}
	_ = acks[1](ctx, nil)
	_ = acks[0](ctx, errors.New("failed"))
	b, ack, err := in.Read(ctx)
	if err != nil || b.Len() != 2 {
		t.Fatalf("redelivery: %d messages, %v", b.Len(), err)
	}
	_ = ack(ctx, nil)
	if _, _, err := in.Read(ctx); !errors.Is(err, message.ErrEndOfInput) {
		t.Fatalf("Read after every ack = %v, want end of input", err)
	}

	in2 := newInput(t, map[string]any{"select_sql": "SELECT id FROM src ORDER BY id", "input_type": liteType(path)})
	if err := in2.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := in2.Seek(ctx, []byte(`{"rows":2}`)); err != nil {
		t.Fatal(err)
	}
	b, _, err = in2.Read(ctx)
	if err != nil || b.Len() != 1 {
		t.Fatalf("after Seek: %d messages, %v", b.Len(), err)
	}
	if p, _ := b.Messages[0].Payload(); string(p) != `{"id":3}` || b.Messages[0].Meta.Offset != 2 {
		t.Fatalf("after Seek: %s offset %d", p, b.Messages[0].Meta.Offset)
	}
}

// TestSQLiteInsertErrors: a failed statement rolls the whole batch back.
func TestSQLiteInsertErrors(t *testing.T) {
	path, db := sqliteDB(t, `CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`)
	out := newOutput(t, map[string]any{"output_type": liteType(path), "table_name": "t"})
	ctx := ctxT(t)
	if err := out.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		payload []string
	}{
		{"not an object", []string{`{"id": 1, "v": "a"}`, `[1, 2]`}},
		{"not JSON", []string{`{"id": 1, "v": "a"}`, `nope`}},
		{"constraint", []string{`{"id": 1, "v": "a"}`, `{"id": 2}`}},
		{"no fields", []string{`{}`}},
	} {
		if err := out.Write(ctx, batchOf(tc.payload...)); err == nil {
			t.Errorf("%s: Write succeeded", tc.name)
		}
	}
	if got := count(t, db, "SELECT count(*) FROM t"); got != 0 {
		t.Fatalf("rows = %d after failed batches, want 0", got)
	}
	// Many rows split over several statements, one transaction.
	big := make([]string, 0, 20000)
	for i := range 20000 {
		big = append(big, `{"id": `+strconv.Itoa(i)+`, "v": "x"}`)
	}
	if err := out.Write(ctx, batchOf(big...)); err != nil {
		t.Fatal(err)
	}
	if got := count(t, db, "SELECT count(*) FROM t"); got != 20000 {
		t.Fatalf("rows = %d, want 20000", got)
	}
}
