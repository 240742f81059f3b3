package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql migrations/postgres/*.sql
var migrationFS embed.FS

// migrationDir holds the migrations of a backend: the SQLite ones, and
// their PostgreSQL versions, by the same names, in postgres/.
func migrationDir(postgres bool) string {
	if postgres {
		return "migrations/postgres"
	}
	return "migrations"
}

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations of dir ordered by version; a
// file is named NNNN_description.sql and versions are 1, 2, 3 ... without
// gaps.
func migrations(dir string) ([]migration, error) {
	names, err := fs.Glob(migrationFS, dir+"/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, n := range names {
		base := strings.TrimPrefix(n, dir+"/")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number and '_'", base)
		}
		b, err := migrationFS.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: base, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: version %d, want %d", m.name, m.version, i+1)
		}
	}
	return out, nil
}

// migrate applies, forward only, every migration newer than the database's
// schema_version, each in its own transaction. On PostgreSQL it holds the
// write lock throughout, so that Hubs starting together migrate once.
func migrate(ctx context.Context, q querier, d *dialect) error {
	ms, err := migrations(migrationDir(d.postgres))
	if err != nil {
		return err
	}
	if d.postgres {
		lock := strconv.FormatInt(writeLockKey, 10)
		if _, err := q.ExecContext(ctx, "SELECT pg_advisory_lock("+lock+")"); err != nil {
			return storageErr(err)
		}
		defer func() { _, _ = q.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock("+lock+")") }()
	}
	if _, err := q.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY)"); err != nil {
		return storageErr(err)
	}
	var cur int
	if err := q.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_version").Scan(&cur); err != nil {
		return storageErr(err)
	}
	if cur > len(ms) {
		return fmt.Errorf("%w: database at version %d, build knows %d", ErrSchemaTooNew, cur, len(ms))
	}
	for _, m := range ms[cur:] {
		if err := apply(ctx, q, d, m); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return nil
}

func apply(ctx context.Context, q querier, d *dialect, m migration) error {
	for _, b := range d.begin() {
		if _, err := q.ExecContext(ctx, b); err != nil {
			_, _ = q.ExecContext(ctx, "ROLLBACK")
			return storageErr(err)
		}
	}
	if _, err := q.ExecContext(ctx, m.sql); err != nil {
		_, _ = q.ExecContext(ctx, "ROLLBACK")
		return err
	}
	if _, err := q.ExecContext(ctx, d.text("INSERT INTO schema_version (version) VALUES (?)"), m.version); err != nil {
		_, _ = q.ExecContext(ctx, "ROLLBACK")
		return storageErr(err)
	}
	if _, err := q.ExecContext(ctx, "COMMIT"); err != nil {
		_, _ = q.ExecContext(ctx, "ROLLBACK")
		return storageErr(err)
	}
	return nil
}
