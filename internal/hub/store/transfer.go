package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// ErrTargetNotEmpty: Transfer's target database already holds rows.
var ErrTargetNotEmpty = errors.New("target database is not empty")

// TableCopy is what Transfer copied of one table: its rows and their
// digest, equal on both sides.
type TableCopy struct {
	Table  string
	Rows   int64
	Digest string // hex SHA-256 over the rows, independent of their order
}

// Transfer copies the Hub state of the SQLite database at from into the
// empty PostgreSQL database at to (its schema made by Open), in one
// transaction: every table's rows with their ids, the id sequences set
// past the ids SQLite ever assigned, then for each table the row count
// and a digest of the rows compared with the source's before the commit.
// The Hub must be stopped: a source another process holds fails with
// ErrInUse (the lock file), and a target with rows with
// ErrTargetNotEmpty. The source is brought to this build's schema first,
// as a Hub starting on it would.
func Transfer(ctx context.Context, from, to string) ([]TableCopy, error) {
	if from == "" || IsPostgres(from) || !IsPostgres(to) {
		return nil, fmt.Errorf("%w: copy from a SQLite file to a postgres:// URL", ErrInvalid)
	}
	// Open would create a missing file: an empty copy is a typo.
	if _, err := os.Stat(from); err != nil {
		return nil, storageErr(err)
	}
	src, err := Open(ctx, from)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	dst, err := Open(ctx, to)
	if err != nil {
		return nil, err
	}
	defer dst.Close()

	tables, err := transferTables(ctx, src, dst)
	if err != nil {
		return nil, err
	}
	var out []TableCopy
	err = dst.write(ctx, func(ctx context.Context, q querier) error {
		out = out[:0]
		for _, t := range tables {
			var n int64
			query := "SELECT COUNT(*) FROM " + t.name
			if unused, ok := seededRows[t.name]; ok {
				query += " WHERE NOT (" + unused + ")"
			}
			if err := q.QueryRowContext(ctx, query).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return fmt.Errorf("%w: table %s has %d rows", ErrTargetNotEmpty, t.name, n)
			}
		}
		for _, t := range tables {
			if _, ok := seededRows[t.name]; ok {
				if _, err := q.ExecContext(ctx, "DELETE FROM "+t.name); err != nil {
					return err
				}
			}
			if err := copyTable(ctx, src, q, t); err != nil {
				return fmt.Errorf("table %s: %w", t.name, err)
			}
			want, err := tableDigest(ctx, src.rdb, t)
			if err != nil {
				return fmt.Errorf("table %s: %w", t.name, err)
			}
			got, err := tableDigest(ctx, q, t)
			if err != nil {
				return fmt.Errorf("table %s: %w", t.name, err)
			}
			if got != want {
				return fmt.Errorf("%w: table %s: copied %d rows, digest %s; the source has %d rows, digest %s",
					ErrStorage, t.name, got.Rows, got.Digest, want.Rows, want.Digest)
			}
			out = append(out, want)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// seededRows names the tables whose migrations insert a row, with the
// condition that row meets while no Hub has used the database: Transfer
// counts only the other rows as content and replaces the seeded ones with
// the source's. The lease's epoch must come along: Agents refuse commands
// of an epoch older than one they have seen.
var seededRows = map[string]string{
	"hub_lease": "epoch = 0 AND holder_id = ''",
}

// transferTable is one table as both databases have it.
type transferTable struct {
	name string
	cols []string // sorted; without rowid
	// rowid: the PostgreSQL table has SQLite's implicit rowid as a column.
	rowid bool
	// identity is the PostgreSQL identity column ("" for none) and seq
	// the highest id SQLite ever assigned it (sqlite_sequence).
	identity string
	seq      int64
}

// transferTables lists the source's tables but schema_version, in name
// order (the schema has no foreign keys), checking the target has the
// same tables and columns at the same schema version.
func transferTables(ctx context.Context, src, dst *Store) ([]transferTable, error) {
	var sv, dv int
	if err := src.rdb.QueryRowContext(ctx, "SELECT MAX(version) FROM schema_version").Scan(&sv); err != nil {
		return nil, storageErr(err)
	}
	if err := dst.rdb.QueryRowContext(ctx, "SELECT MAX(version) FROM schema_version").Scan(&dv); err != nil {
		return nil, storageErr(err)
	}
	if sv != dv {
		return nil, fmt.Errorf("%w: source at schema version %d, target at %d", ErrInvalid, sv, dv)
	}
	names, err := strings1(ctx, src.rdb, "SELECT name FROM pragma_table_list WHERE schema = 'main' AND type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'schema_version'")
	if err != nil {
		return nil, err
	}
	// One query for every table: information_schema is slow to ask.
	pgCols, pgIdentity := map[string][]string{}, map[string]string{}
	rows, err := dst.rdb.QueryContext(ctx, "SELECT table_name, column_name, is_identity FROM information_schema.columns WHERE table_schema = current_schema()")
	if err != nil {
		return nil, storageErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		var table, col, identity string
		if err := rows.Scan(&table, &col, &identity); err != nil {
			return nil, storageErr(err)
		}
		pgCols[table] = append(pgCols[table], col)
		if identity == "YES" && col != "rowid" {
			pgIdentity[table] = col
		}
	}
	if err := rows.Err(); err != nil {
		return nil, storageErr(err)
	}
	for _, cols := range pgCols {
		slices.Sort(cols)
	}
	var out []transferTable
	for _, name := range names {
		t := transferTable{name: name}
		if t.cols, err = strings1(ctx, src.rdb, "SELECT name FROM pragma_table_info(?)", name); err != nil {
			return nil, err
		}
		cols := pgCols[name]
		if i := slices.Index(cols, "rowid"); i >= 0 && !slices.Contains(t.cols, "rowid") {
			t.rowid, cols = true, slices.Delete(cols, i, i+1)
		}
		if !slices.Equal(t.cols, cols) {
			return nil, fmt.Errorf("%w: table %s: columns %v in SQLite, %v in PostgreSQL", ErrInvalid, name, t.cols, cols)
		}
		if id, ok := pgIdentity[name]; ok {
			t.identity = id
			err := src.rdb.QueryRowContext(ctx, "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = ?), 0)", name).Scan(&t.seq)
			if err != nil && !strings.Contains(err.Error(), "no such table") { // no AUTOINCREMENT table was ever written
				return nil, storageErr(err)
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// selectList is the columns of t as the source (SQLite) or the target
// selects them, rowid last.
func (t transferTable) selectList() string {
	cols := slices.Clone(t.cols)
	if t.rowid {
		cols = append(cols, "rowid")
	}
	return strings.Join(cols, ", ")
}

// copyTable inserts every source row of t through q and sets the
// target's identity sequence past every id the source assigned.
func copyTable(ctx context.Context, src *Store, q querier, t transferTable) error {
	rows, err := src.rdb.QueryContext(ctx, "SELECT "+t.selectList()+" FROM "+t.name)
	if err != nil {
		return storageErr(err)
	}
	defer rows.Close()
	n := len(t.cols)
	if t.rowid {
		n++
	}
	insert := "INSERT INTO " + t.name + " (" + t.selectList() + ") VALUES (" + strings.Repeat("?, ", n-1) + "?)"
	vals := make([]any, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return storageErr(err)
		}
		if _, err := q.ExecContext(ctx, insert, vals...); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return storageErr(err)
	}
	type sequence struct {
		col string
		seq int64
	}
	var seqs []sequence
	if t.identity != "" {
		seqs = append(seqs, sequence{t.identity, t.seq})
	}
	if t.rowid {
		seqs = append(seqs, sequence{"rowid", 0})
	}
	for _, sq := range seqs {
		col, seq := sq.col, sq.seq
		// The next id is past both the highest row and the highest id
		// SQLite ever gave (AUTOINCREMENT never reuses one).
		if _, err := q.ExecContext(ctx, "SELECT setval(pg_get_serial_sequence(?, ?), GREATEST(COALESCE((SELECT MAX("+col+") FROM "+t.name+"), 0), ?, 1), GREATEST(COALESCE((SELECT MAX("+col+") FROM "+t.name+"), 0), ?) > 0)",
			t.name, col, seq, seq); err != nil {
			return err
		}
	}
	return nil
}

// tableDigest counts t's rows on q and digests them: the XOR of the
// SHA-256 of each row's values (rows are unique by their primary key, so
// the XOR depends on the set of rows only, not on their order or
// collation).
func tableDigest(ctx context.Context, q interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}, t transferTable) (TableCopy, error) {
	out := TableCopy{Table: t.name}
	rows, err := q.QueryContext(ctx, "SELECT "+t.selectList()+" FROM "+t.name)
	if err != nil {
		return out, storageErr(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return out, storageErr(err)
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var sum [sha256.Size]byte
	var b []byte
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return out, storageErr(err)
		}
		b = b[:0]
		for _, v := range vals {
			switch v := v.(type) {
			case nil:
				b = append(b, 'n')
			case int64:
				b = strconv.AppendInt(append(b, 'i'), v, 10)
			case string:
				b = strconv.AppendQuote(append(b, 's'), v)
			case []byte:
				b = hex.AppendEncode(append(b, 'b'), v)
			default:
				b = fmt.Appendf(append(b, 'o'), "%T:%v", v, v)
			}
			b = append(b, 0)
		}
		h := sha256.Sum256(b)
		for i := range sum {
			sum[i] ^= h[i]
		}
		out.Rows++
	}
	if err := rows.Err(); err != nil {
		return out, storageErr(err)
	}
	out.Digest = hex.EncodeToString(sum[:])
	return out, nil
}

// strings1 runs a query of one text column.
func strings1(ctx context.Context, db *sql.DB, query string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, storageErr(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, storageErr(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, storageErr(err)
	}
	slices.Sort(out)
	return out, nil
}
