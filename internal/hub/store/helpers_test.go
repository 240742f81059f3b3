package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/pgtest"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestMain stops the PostgreSQL server the tests of both backends share.
func TestMain(m *testing.M) { pgtest.Main(m) }

// backends runs test once per backend, as subtests sqlite and postgres:
// openTest in it opens a store of the subtest's backend. The store's
// contract is the same on both.
func backends(t *testing.T, test func(t *testing.T)) {
	t.Helper()
	t.Run("sqlite", test)
	t.Run("postgres", test)
}

// onPostgres reports whether t runs inside the postgres subtest of
// backends.
func onPostgres(t testing.TB) bool {
	return slices.Contains(strings.Split(t.Name(), "/")[1:], "postgres")
}

// openTest opens a new, empty store of t's backend and returns it with
// its storage (SQLite path or PostgreSQL URL) for reopening. On
// PostgreSQL each test has a database of its own, copied from a migrated
// template.
func openTest(t testing.TB) (*Store, string) {
	t.Helper()
	storage := filepath.Join(t.TempDir(), "hub.db")
	if onPostgres(t) {
		storage = newPostgresDB(t)
	}
	s, err := Open(context.Background(), storage)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, storage
}

// pgTemplate is the migrated database newPostgresDB copies.
var pgTemplate struct {
	once sync.Once
	err  error
}

// newPostgresDB returns the URL of a new database of the shared server
// holding the migrated, empty schema.
func newPostgresDB(t testing.TB) string {
	t.Helper()
	srv := pgtest.Shared(t)
	pgTemplate.once.Do(func() {
		srv.Exec(t, "CREATE DATABASE hub_template")
		s, err := Open(context.Background(), srv.DatabaseURI("hub_template"))
		if err == nil {
			err = s.Close()
		}
		pgTemplate.err = err
	})
	if pgTemplate.err != nil {
		t.Fatalf("migrating the template database: %v", pgTemplate.err)
	}
	return srv.NewDatabase(t, "hub_template")
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
	if err := s.rdb.QueryRow(s.d.text(query), s.d.args(args)...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func keyOf(k string) IdempotencyKey { return IdempotencyKey{Principal: "op", Key: k} }

func mustMigrations(t *testing.T) []migration {
	t.Helper()
	ms, err := migrations(migrationDir(false))
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
