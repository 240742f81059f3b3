package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// TestTransfer copies a SQLite database with a row in every table to
// PostgreSQL: the counts and digests agree, the copy reads back as the
// source did, new ids continue past every id SQLite assigned, and a second
// copy into the now non-empty target, a copy of a source a Hub holds and
// a copy of a missing file are refused.
func TestTransfer(t *testing.T) {
	ctx := context.Background()
	target := newPostgresDB(t)
	path := filepath.Join(t.TempDir(), "hub.db")
	src, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"i1", "i2", "i3"} {
		if _, err := src.WriteDesired(ctx, dw(id, "n1", "s1", t0.Add(time.Duration(i)*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	key := IdempotencyKey{Principal: "op", Resource: "PUT /x", Key: "k1"}
	if _, err := src.BeginIdempotent(ctx, key, "fp", t0); err != nil {
		t.Fatal(err)
	}
	if err := src.FinishIdempotent(ctx, key, "fp", &IdempotencyRecord{Status: 202, Body: []byte{0, 1, 2, 255}}); err != nil {
		t.Fatal(err)
	}
	// The newest event goes: SQLite never gives its id again, nor may the
	// copy.
	_, newest, err := src.EventIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.write(ctx, func(ctx context.Context, q querier) error {
		if _, err := q.ExecContext(ctx, "DELETE FROM events WHERE id = ?", newest); err != nil {
			return err
		}
		return fillTables(ctx, q)
	}); err != nil {
		t.Fatal(err)
	}
	// The stopped Hub had led twice: the copy keeps the epoch, which only
	// grows (Agents refuse commands of an older one).
	for range 2 {
		if _, err := src.TakeLease(ctx, LeaseClaim{HolderID: "sqlite-hub", Now: t0, TTL: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	wantEvents, err := src.ListEvents(ctx, EventFilter{}, Paging{1, 100})
	if err != nil {
		t.Fatal(err)
	}

	// A Hub holds the file.
	if _, err := Transfer(ctx, path, target); !errors.Is(err, ErrInUse) {
		t.Fatalf("Transfer of a held source = %v, want ErrInUse", err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "none.db")
	if _, err := Transfer(ctx, missing, target); !errors.Is(err, ErrStorage) {
		t.Fatalf("Transfer of a missing file = %v, want ErrStorage", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Transfer made the missing source: %v", err)
	}

	copied, err := Transfer(ctx, path, target)
	if err != nil {
		t.Fatal(err)
	}
	if len(copied) < 15 {
		t.Fatalf("copied %d tables: %+v", len(copied), copied)
	}
	for _, c := range copied {
		if c.Rows == 0 || c.Digest == strings.Repeat("0", 64) {
			t.Errorf("table %s copied %d rows, digest %s: the test must fill every table", c.Table, c.Rows, c.Digest)
		}
	}
	if _, err := Transfer(ctx, path, target); !errors.Is(err, ErrTargetNotEmpty) {
		t.Fatalf("second Transfer = %v, want ErrTargetNotEmpty", err)
	}

	dst, err := Open(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if l, err := dst.GetLease(ctx); err != nil || l.Epoch != 2 {
		t.Errorf("lease in the copy = %+v, %v; want epoch 2", l, err)
	}
	if l, err := dst.AcquireLease(ctx, LeaseClaim{HolderID: "pg-hub", Now: t0.Add(time.Hour), TTL: time.Second}); err != nil || l.Epoch != 3 {
		t.Errorf("first lease on the copy = %+v, %v; want epoch 3", l, err)
	}
	gotEvents, err := dst.ListEvents(ctx, EventFilter{}, Paging{1, 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(gotEvents.Items) != len(wantEvents.Items) || gotEvents.Total != wantEvents.Total || gotEvents.Items[0].ID != wantEvents.Items[0].ID {
		t.Errorf("events in the copy %+v, in the source %+v", gotEvents, wantEvents)
	}
	if rec, err := dst.BeginIdempotent(ctx, key, "fp", t0.Add(time.Minute)); err != nil || rec == nil || rec.Status != 202 || string(rec.Body) != "\x00\x01\x02\xff" {
		t.Errorf("idempotency record in the copy = %+v, %v", rec, err)
	}
	id, err := dst.AppendEvent(ctx, wire.Event{Kind: "after", OccurredAt: wire.At(t0)})
	if err != nil || id <= newest {
		t.Errorf("first event id in the copy = %d, %v; want one above %d", id, err, newest)
	}
	res, err := dst.WriteDesired(ctx, dw("i4", "n1", "s1", t0.Add(time.Hour)))
	if err != nil || res.Generation != 4 || res.Intent.Seq <= 3 {
		t.Errorf("write in the copy = %+v, %v", res, err)
	}
}

// fillTables gives every empty table one row of made-up values its
// constraints accept.
func fillTables(ctx context.Context, q querier) error {
	rows, err := q.QueryContext(ctx, "SELECT name FROM pragma_table_list WHERE schema = 'main' AND type = 'table' AND name NOT LIKE 'sqlite_%'")
	if err != nil {
		return err
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return err
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, table := range tables {
		var n int
		if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil || n > 0 {
			if err != nil {
				return err
			}
			continue
		}
		cols, err := q.QueryContext(ctx, "SELECT name, type, pk FROM pragma_table_info(?)", table)
		if err != nil {
			return err
		}
		var names, marks string
		var args []any
		for cols.Next() {
			var name, typ string
			var pk int
			if err := cols.Scan(&name, &typ, &pk); err != nil {
				return err
			}
			var v any
			switch {
			case table == "probe" && name == "id":
				v = 1
			case name == "resource_kind":
				v = "stream"
			case name == "kind":
				v = "checkpoint"
			case name == "state":
				v = "pending"
			case typ == "INTEGER" && pk > 0:
				v = 1000
			case typ == "INTEGER":
				v = 7
			case typ == "BLOB":
				v = []byte{0, 7, 255}
			default:
				v = "x-" + name
			}
			if names != "" {
				names, marks = names+", ", marks+", "
			}
			names, marks, args = names+name, marks+"?", append(args, v)
		}
		if err := cols.Err(); err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, "INSERT INTO "+table+" ("+names+") VALUES ("+marks+")", args...); err != nil {
			return err
		}
	}
	return nil
}
