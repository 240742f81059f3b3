package sqldb

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/kernel"
)

// TestJobResumesAfterCursor runs the sql input as a job source (the
// kernel checkpoints its Position), then starts the job again on the same
// checkpoint store: the restored input reads only the rows added since.
func TestJobResumesAfterCursor(t *testing.T) {
	path, db := sqliteDB(t, `CREATE TABLE src (id INTEGER PRIMARY KEY, v TEXT)`,
		`INSERT INTO src VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e')`)
	dir := t.TempDir()
	doc := func() string {
		return `{"health_check": {"enabled": false}, "logging": {"level": "error"}, "streams": [], "jobs": [{
			"id": "copy", "version": 1, "parallelism": 1,
			"operators": [{"id": "src", "kind": "source"}, {"id": "out", "kind": "sink"}],
			"edges": [{"from": "src", "to": "out"}],
			"sources": [{"operator_id": "src", "input_type": "sql", "config": {
				"select_sql": "SELECT id, v FROM src WHERE id > ? ORDER BY id", "batch_size": 2,
				"input_type": {"type": "sqlite", "path": "` + path + `"}, "cursor": {"column": "id", "initial": 0}}}],
			"sinks": [{"operator_id": "out", "output_type": "file", "config": {"path": "` + filepath.Join(dir, "out", "rows.jsonl") + `"}}],
			"checkpoint": {"interval_ms": 50, "object_store_uri": "file://` + filepath.Join(dir, "ckpt") + `"}}]}`
	}
	ids := func() map[int64]int {
		files, _ := filepath.Glob(filepath.Join(dir, "out", "rows-*.jsonl"))
		var all []map[string]any
		for _, f := range files {
			all = append(all, readLines(t, f)...)
		}
		return idCounts(all)
	}
	run := func() {
		e := componenttest.Engine(t, doc())
		deadline := time.Now().Add(30 * time.Second)
		for {
			js := e.Jobs()
			if len(js) == 1 && js[0].State == kernel.Completed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job not completed: %+v", js)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	run()
	if c := ids(); len(c) != 5 {
		t.Fatalf("first run wrote ids %v, want 1..5", c)
	}
	if _, err := db.Exec(`INSERT INTO src VALUES (6, 'f'), (7, 'g')`); err != nil {
		t.Fatal(err)
	}
	run()
	c := ids()
	for id := int64(1); id <= 7; id++ {
		if c[id] != 1 {
			t.Errorf("id %d written %d times, want once", id, c[id])
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ckpt")); err != nil {
		t.Fatalf("no checkpoints: %v", err)
	}
}
