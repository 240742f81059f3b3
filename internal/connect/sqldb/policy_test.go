package sqldb

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/policy"
)

// TestSQLitePolicyAtUse: a Hub-delivered sql output (built with the remote
// policy's FS) writes a SQLite file beneath the allowed root, its
// directory pinned while it is open; once that directory is a link out of
// the root, Connect is refused naming the path and the rule, and nothing
// is created outside. Local work follows the link.
func TestSQLitePolicyAtUse(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	dir := filepath.Join(root, "db")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "hub.db")
	mkTable := func(name string) {
		db, err := sql.Open("sqlite", "file:"+name)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec("CREATE TABLE ev (id INTEGER)"); err != nil {
			t.Fatal(err)
		}
	}
	mkTable(path)
	pol := policy.Default(root)
	remote := component.Resources{FS: pol.FS()}
	conf := func() map[string]any {
		return map[string]any{"output_type": liteType(path), "table_name": "ev", "columns": []any{"id"}}
	}
	write := func(res component.Resources) error {
		out, err := component.Default.NewOutput("sql", conf(), res)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close(t.Context())
		if err := out.Connect(t.Context()); err != nil {
			return err
		}
		return out.Write(t.Context(), message.Batch{Messages: []message.Message{message.New([]byte(`{"id": 1}`))}})
	}
	if err := write(remote); err != nil {
		t.Fatalf("beneath the root: %v", err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "SELECT count(*) FROM ev"); n != 1 {
		t.Fatalf("rows beneath the root = %d, want 1", n)
	}
	db.Close()

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, dir); err != nil {
		t.Fatal(err)
	}
	err = write(remote)
	if !errors.Is(err, policy.ErrDenied) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), policy.RuleFileRoots) {
		t.Fatalf("through a swapped directory: %v, want refused naming the path and the rule", err)
	}
	if !component.IsPermanent(err) {
		t.Error("a refusal is retried")
	}
	if es, _ := os.ReadDir(outside); len(es) != 0 {
		t.Fatalf("Hub-delivered work made %v outside its root", es)
	}
	mkTable(filepath.Join(outside, "hub.db"))
	if err := write(component.Resources{}); err != nil {
		t.Fatalf("local work through the link: %v", err)
	}
	db, err = sql.Open("sqlite", "file:"+filepath.Join(outside, "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := count(t, db, "SELECT count(*) FROM ev"); n != 1 {
		t.Errorf("local work wrote %d rows through the link, want 1", n)
	}
}
