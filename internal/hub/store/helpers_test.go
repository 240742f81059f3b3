package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func openTest(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hub.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func dw(intent, node, res string, now time.Time) DesiredWrite {
	return DesiredWrite{IntentID: intent, Operation: "stream_desired_state", NodeID: node, Kind: KindStream,
		ResourceID: res, State: "running", ConfigVersion: "v1", CorrelationID: "corr-" + intent, Actor: "op",
		Now: now, ExpiresAt: now.Add(time.Hour)}
}

func p(n int64) *int64 { return &n }

func count(t *testing.T, s *Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.rdb.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func keyOf(k string) IdempotencyKey { return IdempotencyKey{Principal: "op", Key: k} }

func mustMigrations(t *testing.T) []migration {
	t.Helper()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// openFromVersion builds a database at schema version v, as a build of
// that version left it, with rows (INSERT statements) in it, then opens
// it with this build, which must migrate it to the newest version. The
// store is closed when the test ends.
func openFromVersion(t *testing.T, v int, rows ...string) *Store {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hub.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	ms := mustMigrations(t)
	stmts := []string{"CREATE TABLE schema_version (version INTEGER PRIMARY KEY)"}
	for i, m := range ms[:v] {
		stmts = append(stmts, m.sql, fmt.Sprintf("INSERT INTO schema_version VALUES (%d)", i+1))
	}
	for _, q := range append(stmts, rows...) {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open of a version %d database: %v", v, err)
	}
	t.Cleanup(func() { s.Close() })
	if n := count(t, s, "SELECT MAX(version) FROM schema_version"); n != len(ms) {
		t.Fatalf("schema version %d, want %d", n, len(ms))
	}
	return s
}
