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

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations ordered by version; a file is
// named NNNN_description.sql and versions are 1, 2, 3 ... without gaps.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, n := range names {
		base := strings.TrimPrefix(n, "migrations/")
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
// schema_version, each in its own transaction.
func migrate(ctx context.Context, q querier) error {
	ms, err := migrations()
	if err != nil {
		return err
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
		if err := apply(ctx, q, m); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return nil
}

func apply(ctx context.Context, q querier, m migration) error {
	if _, err := q.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return storageErr(err)
	}
	if _, err := q.ExecContext(ctx, m.sql); err != nil {
		_, _ = q.ExecContext(ctx, "ROLLBACK")
		return err
	}
	if _, err := q.ExecContext(ctx, "INSERT INTO schema_version (version) VALUES (?)", m.version); err != nil {
		_, _ = q.ExecContext(ctx, "ROLLBACK")
		return storageErr(err)
	}
	if _, err := q.ExecContext(ctx, "COMMIT"); err != nil {
		_, _ = q.ExecContext(ctx, "ROLLBACK")
		return storageErr(err)
	}
	return nil
}
