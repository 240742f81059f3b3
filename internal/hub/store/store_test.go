package store

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestOpenMigratesAndReopens(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	if _, err := s.WriteDesired(ctx, dw("i1", "n1", "s1", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		s2, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		if n, ms := count(t, s2, "SELECT COUNT(*) FROM schema_version"), mustMigrations(t); n != len(ms) {
			t.Errorf("schema_version rows = %d, want %d (one per migration)", n, len(ms))
		}
		r, err := s2.GetResource(ctx, "n1", KindStream, "s1")
		if err != nil || r.Generation != 1 {
			t.Errorf("GetResource = %+v, %v", r, err)
		}
		var mode string
		if err := s2.rdb.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Errorf("journal_mode = %q, %v", mode, err)
		}
		_ = s2.Close()
	}
	if _, err := s.GetIntent(ctx, "i1"); !errors.Is(err, ErrClosed) {
		t.Errorf("read after Close: %v, want ErrClosed", err)
	}
	if _, err := s.WriteDesired(ctx, dw("i2", "n1", "s1", t0)); !errors.Is(err, ErrClosed) {
		t.Errorf("write after Close: %v, want ErrClosed", err)
	}
}

func TestOpenRejects(t *testing.T) {
	ctx := context.Background()
	t.Run("newer schema", func(t *testing.T) {
		backends(t, func(t *testing.T) {
			s, path := openTest(t)
			if err := s.write(ctx, func(ctx context.Context, q querier) error {
				_, err := q.ExecContext(ctx, "INSERT INTO schema_version VALUES (99)")
				return err
			}); err != nil {
				t.Fatal(err)
			}
			_ = s.Close()
			if _, err := Open(ctx, path); !errors.Is(err, ErrSchemaTooNew) {
				t.Fatalf("Open = %v, want ErrSchemaTooNew", err)
			}
		})
	})
	t.Run("not a database", func(t *testing.T) {
		path := t.TempDir() + "/junk.db"
		if err := os.WriteFile(path, []byte(strings.Repeat("garbage!", 1024)), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(ctx, path); !errors.Is(err, ErrStorage) {
			t.Fatalf("Open = %v, want ErrStorage", err)
		}
	})
}

func TestVolatile(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s2, err := Open(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s.WriteDesired(ctx, dw("i1", "n1", "s1", t0)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetIntent(ctx, "i1"); err != nil {
		t.Errorf("reader does not see the writer's data: %v", err)
	}
	if _, err := s2.GetIntent(ctx, "i1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("two volatile stores share data: %v", err)
	}
}

// TestStorageFull makes SQLite report SQLITE_FULL (max_page_count caps the
// file, as a full disk does) and checks the error, that nothing was
// half-written, and that the store works once the condition clears.
func TestStorageFull(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if _, err := s.WriteDesired(ctx, dw("i1", "n1", "s1", t0)); err != nil {
		t.Fatal(err)
	}
	setMax := func(v string) {
		t.Helper()
		if err := s.write(ctx, func(ctx context.Context, q querier) error {
			_, err := q.ExecContext(ctx, "PRAGMA max_page_count = "+v)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	var pages int
	if err := s.rdb.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	setMax(strconv.Itoa(pages))
	big := dw("i2", "n1", "s1", t0)
	big.ActionID = strings.Repeat("x", 200_000)
	_, err := s.WriteDesired(ctx, big)
	if !errors.Is(err, ErrStorage) {
		t.Fatalf("WriteDesired on a full database = %v, want ErrStorage", err)
	}
	for _, q := range []string{"SELECT COUNT(*) FROM intents", "SELECT COUNT(*) FROM outbox", "SELECT COUNT(*) FROM audit", "SELECT COUNT(*) FROM events"} {
		if n := count(t, s, q); n != 1 {
			t.Errorf("%s = %d after failed write, want 1", q, n)
		}
	}
	setMax("1073741823")
	res, err := s.WriteDesired(ctx, big)
	if err != nil || res.Generation != 2 {
		t.Fatalf("after the condition cleared: %+v, %v", res, err)
	}
}
