package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/pgtest"
)

// TestMigrationParity: both backends have the same numbered migrations
// and, migrated, the same tables with the same column names, so that a
// migration added on one side only fails here. A PostgreSQL table may
// have a column rowid where SQLite has its implicit one. Every PostgreSQL
// text column is COLLATE "C".
func TestMigrationParity(t *testing.T) {
	names := func(postgres bool) []string {
		ms, err := migrations(migrationDir(postgres))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range ms {
			out = append(out, m.name)
		}
		return out
	}
	if diff := cmp.Diff(names(false), names(true)); diff != "" {
		t.Errorf("migrations (-sqlite +postgres):\n%s", diff)
	}

	lite, _ := openTest(t)
	litePlain := map[string]bool{} // tables with a rowid
	liteCols := map[string][]string{}
	rows, err := lite.rdb.Query("SELECT name, wr FROM pragma_table_list WHERE schema = 'main' AND type = 'table' AND name NOT LIKE 'sqlite_%'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var withoutRowid bool
		if err := rows.Scan(&name, &withoutRowid); err != nil {
			t.Fatal(err)
		}
		litePlain[name] = !withoutRowid
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for table := range litePlain {
		liteCols[table] = columns(t, lite.rdb, "SELECT name FROM pragma_table_info(?)", table)
	}

	pgURL := newPostgresDB(t)
	pg, err := Open(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	pgCols := map[string][]string{}
	for _, table := range columns(t, pg.rdb, "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND $1 = ''", "") {
		cols := columns(t, pg.rdb, "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1", table)
		if i := slices.Index(cols, "rowid"); i >= 0 && litePlain[table] {
			cols = slices.Delete(cols, i, i+1)
		}
		pgCols[table] = cols
	}
	// Text compares by bytes as in SQLite (BINARY), whatever the
	// database's locale: ORDER BY and pages come out alike.
	if bad := columns(t, pg.rdb, `SELECT table_name || '.' || column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND data_type = 'text' AND COALESCE(collation_name, '') <> 'C'`); len(bad) > 0 {
		t.Errorf("text columns without COLLATE \"C\": %v", bad)
	}
	if len(liteCols) < 10 {
		t.Fatalf("SQLite tables %v", liteCols)
	}
	if diff := cmp.Diff(liteCols, pgCols); diff != "" {
		t.Errorf("tables and columns (-sqlite +postgres):\n%s", diff)
	}
}

// columns runs a query of one text column and returns its values sorted.
func columns(t *testing.T, db *sql.DB, query string, args ...any) []string {
	t.Helper()
	out, err := strings1(context.Background(), db, query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return out
}

// TestPgText: placeholders are numbered outside literals and quoted
// names; numbered ones keep their number.
func TestPgText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"SELECT a FROM t WHERE b = ? AND c = ?", "SELECT a FROM t WHERE b = $1 AND c = $2"},
		{"SELECT '?', \"x?\" FROM t WHERE b = ? AND c = 'it''s ?'", "SELECT '?', \"x?\" FROM t WHERE b = $1 AND c = 'it''s ?'"},
		{"DELETE FROM t WHERE a = ?1 AND b IN (SELECT b FROM t WHERE a = ?1 LIMIT ?2)", "DELETE FROM t WHERE a = $1 AND b IN (SELECT b FROM t WHERE a = $1 LIMIT $2)"},
		{"SELECT x FROM t WHERE id IN (SELECT value FROM json_each(?))", "SELECT x FROM t WHERE id IN (SELECT value FROM json_array_elements_text($1::json))"},
	} {
		if got := pgText(c.in); got != c.want {
			t.Errorf("pgText(%q)\n = %q\nwant %q", c.in, got, c.want)
		}
	}
}

// TestConstraintViolation: a unique violation is the same kind of error
// on both backends (a failed write, not a storage failure), undoes only
// its own write, and the writer goes on.
func TestConstraintViolation(t *testing.T) { backends(t, testConstraintViolation) }

func testConstraintViolation(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	insert := func(ctx context.Context, q querier) error {
		_, err := q.ExecContext(ctx, "INSERT INTO probe (id, at) VALUES (1, 0)")
		return err
	}
	if err := s.write(ctx, insert); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			if i%2 == 0 {
				errs[i] = s.write(ctx, insert)
			} else {
				_, errs[i] = s.AppendEvent(ctx, event("probe", t0, "", "", "", "", "", "", "", fmt.Sprint(i)))
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		switch {
		case i%2 == 1 && err != nil:
			t.Errorf("write %d beside the violations: %v", i, err)
		case i%2 == 0 && (err == nil || errors.Is(err, ErrStorage) || !isDomain(err)):
			t.Errorf("duplicate insert %d = %v; want a failed write, not ErrStorage", i, err)
		}
	}
	if n := count(t, s, "SELECT COUNT(*) FROM events WHERE kind = ?", "probe"); n != 4 {
		t.Errorf("%d events, want 4", n)
	}
}

// TestPostgresOpenFailsFast: a server that refuses, one that accepts and
// never answers, a wrong password and a malformed URL each fail Open with
// ErrStorage, in bounded time, without the password in the error.
func TestPostgresOpenFailsFast(t *testing.T) {
	srv := pgtest.Shared(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{})
	defer func() {
		_ = silent.Close()
		<-accepted
	}()
	go func() {
		defer close(accepted)
		var held []net.Conn // never answered; closed once the test ends
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	refusing, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	wrongPW := strings.Replace(srv.URI(), pgtest.Password, "not-"+pgtest.Password, 1)
	for _, c := range []struct{ name, url string }{
		{"refused", fmt.Sprintf("postgres://flowplane:%s@127.0.0.1:%d/hub?sslmode=disable", pgtest.Password, refusing)},
		{"silent", fmt.Sprintf("postgresql://flowplane:%s@%s/hub?sslmode=disable&connect_timeout=1", pgtest.Password, silent.Addr())},
		{"wrong password", wrongPW},
		{"malformed", "postgres://flowplane:" + pgtest.Password + "@127.0.0.1:notaport/hub"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Not a timing assertion: a hang ends here instead of at the
			// test binary's timeout.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			s, err := Open(ctx, c.url)
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, ErrStorage) || ctx.Err() != nil {
				t.Errorf("Open = %v; want ErrStorage before the deadline", err)
			}
			if strings.Contains(err.Error(), pgtest.Password) {
				t.Errorf("Open error %q holds the password", err)
			}
		})
	}
}

// TestPostgresSessionLost: when the server ends the writer's and the
// readers' sessions (pg_terminate_backend, a restart), the write in flight
// fails with ErrStorage and the store reconnects for the next one.
func TestPostgresSessionLost(t *testing.T) {
	ctx := context.Background()
	pgURL := newPostgresDB(t)
	s, err := Open(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.WriteDesired(ctx, dw("i1", "n1", "s1", t0)); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	pgtest.Shared(t).Exec(t, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '"+db+"'")
	if _, err := s.WriteDesired(ctx, dw("i2", "n1", "s1", t0)); !errors.Is(err, ErrStorage) {
		t.Fatalf("write on an ended session = %v, want ErrStorage", err)
	}
	res, err := s.WriteDesired(ctx, dw("i3", "n1", "s1", t0))
	if err != nil || res.Generation != 2 {
		t.Fatalf("write after the session ended = %+v, %v; want generation 2", res, err)
	}
	var r Resource
	for range 2 { // the pool drops each ended connection it meets once
		if r, err = s.GetResource(ctx, "n1", KindStream, "s1"); err == nil {
			break
		}
	}
	if err != nil || r.Generation != 2 {
		t.Fatalf("read after the session ended = %+v, %v", r, err)
	}
}

// TestPostgresSeveralStores: the write transactions of two stores on one
// database (two Hubs) serialize: concurrent writes to one resource get
// every generation once, and event ids grow in commit order.
func TestPostgresSeveralStores(t *testing.T) {
	ctx := context.Background()
	pgURL := newPostgresDB(t)
	var stores [2]*Store
	for i := range stores {
		s, err := Open(ctx, pgURL)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	const per = 40
	var mu sync.Mutex
	gens := map[int64]string{}
	var wg sync.WaitGroup
	for i, s := range stores {
		for w := range 4 {
			wg.Go(func() {
				for k := range per / 4 {
					id := fmt.Sprintf("s%d-w%d-%d", i, w, k)
					res, err := s.WriteDesired(ctx, dw(id, "n1", "r1", t0))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if prev, dup := gens[res.Generation]; dup {
						t.Errorf("generation %d given to %s and %s", res.Generation, prev, id)
					}
					gens[res.Generation] = id
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(gens) != 2*per {
		t.Fatalf("%d generations, want %d", len(gens), 2*per)
	}
	r, err := stores[1].GetResource(ctx, "n1", KindStream, "r1")
	if err != nil || r.Generation != 2*per {
		t.Fatalf("resource %+v, %v; want generation %d", r, err, 2*per)
	}
	// Each write's intent_accepted event follows the previous write's.
	evs, err := stores[0].EventsAfter(ctx, 0, EventFilter{Kind: "intent_accepted"}, MaxEvents)
	if err != nil || len(evs) != 2*per {
		t.Fatalf("%d events, %v", len(evs), err)
	}
	for i, e := range evs {
		in, err := stores[0].GetIntent(ctx, e.OperationID)
		if err != nil {
			t.Fatal(err)
		}
		if in.Generation != int64(i+1) {
			t.Fatalf("event %d (id %d) is of generation %d: ids out of commit order", i, e.ID, in.Generation)
		}
	}
}

// TestPostgresLoginRefused: when the server refuses the store's role a new
// session (NOLOGIN, a password changed), writes and reads fail with
// ErrStorage, which the Hub answers 503, not as a request's own failure.
func TestPostgresLoginRefused(t *testing.T) {
	ctx := context.Background()
	pgURL := newPostgresDB(t)
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	srv := pgtest.Shared(t)
	role := "hub_" + db
	srv.Exec(t, "CREATE ROLE "+role+" LOGIN PASSWORD 'pw-"+role+"'",
		"GRANT ALL ON DATABASE "+db+" TO "+role)
	u.User = url.UserPassword(role, "pw-"+role)
	admin, err := Open(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.write(ctx, func(ctx context.Context, q querier) error {
		for _, grant := range []string{"SCHEMA public", "ALL TABLES IN SCHEMA public", "ALL SEQUENCES IN SCHEMA public"} {
			if _, err := q.ExecContext(ctx, "GRANT ALL ON "+grant+" TO "+role); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_ = admin.Close()
	s, err := Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.WriteDesired(ctx, dw("i1", "n1", "s1", t0)); err != nil {
		t.Fatal(err)
	}
	srv.Exec(t, "ALTER ROLE "+role+" NOLOGIN",
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '"+role+"'")
	for i := range 3 { // the ended session, then new sessions refused
		if _, err := s.WriteDesired(ctx, dw(fmt.Sprint("r", i), "n1", "s1", t0)); !errors.Is(err, ErrStorage) {
			t.Fatalf("write %d with the login refused = %v, want ErrStorage", i, err)
		}
		if _, err := s.GetResource(ctx, "n1", KindStream, "s1"); !errors.Is(err, ErrStorage) {
			t.Fatalf("read %d with the login refused = %v, want ErrStorage", i, err)
		}
	}
	srv.Exec(t, "ALTER ROLE "+role+" LOGIN")
	if _, err := s.WriteDesired(ctx, dw("i2", "n1", "s1", t0)); err != nil {
		t.Fatalf("write once the login is allowed again: %v", err)
	}
}
