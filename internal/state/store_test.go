package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/job"
)

type entry struct {
	KG         int
	Key, Value string
}

func openStore(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func scanAll(t testing.TB, tb *Table, r job.Range) []entry {
	t.Helper()
	var got []entry
	err := tb.Scan(r, func(kg int, key, value []byte) error {
		got = append(got, entry{kg, string(key), string(value)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func mustPut(t testing.TB, tb *Table, kg int, key, value string) {
	t.Helper()
	if err := tb.Put(kg, []byte(key), []byte(value)); err != nil {
		t.Fatal(err)
	}
}

func get(t testing.TB, tb *Table, kg int, key string) (string, bool) {
	t.Helper()
	v, ok, err := tb.Get(kg, []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return string(v), ok
}

func TestStorePutGetDeleteScan(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	a := s.Table("agg", "sums")
	b := s.Table("agg", "counts")
	if s.Table("agg", "sums") != a {
		t.Fatal("Table returned a new table for the same name")
	}
	mustPut(t, a, 3, "x", "1")
	mustPut(t, a, 1, "y", "2")
	mustPut(t, a, 1, "a", "3")
	mustPut(t, a, 7, "z", "")
	mustPut(t, b, 3, "x", "other table")

	// Pending writes are visible.
	if v, ok := get(t, a, 3, "x"); !ok || v != "1" {
		t.Fatalf("Get pending = %q, %v", v, ok)
	}
	if _, ok := get(t, a, 4, "x"); ok {
		t.Fatal("key found in another key group")
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(1, []byte("y")); err != nil {
		t.Fatal(err)
	}
	mustPut(t, a, 3, "x", "1b")

	want := []entry{{1, "a", "3"}, {3, "x", "1b"}, {7, "z", ""}}
	if diff := cmp.Diff(want, scanAll(t, a, job.Range{Start: 0, End: 127})); diff != "" {
		t.Fatalf("scan before flush (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]entry{{3, "x", "1b"}}, scanAll(t, a, job.Range{Start: 2, End: 6})); diff != "" {
		t.Fatalf("scan of 2..6 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]entry{{3, "x", "other table"}}, scanAll(t, b, job.Range{Start: 0, End: 127})); diff != "" {
		t.Fatalf("scan of the other table (-want +got):\n%s", diff)
	}
	if v, ok := get(t, a, 7, "z"); !ok || v != "" {
		t.Fatalf("empty value: %q, %v", v, ok)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	// Unflushed writes are lost on close; flushed ones survive.
	mustPut(t, a, 5, "lost", "v")
	c := s.Table("new", "never flushed")
	mustPut(t, c, 5, "lost", "v")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir)
	defer s.Close()
	// Registering a table first in the reopened store must not reuse a's id.
	d := s.Table("other", "first after reopen")
	mustPut(t, d, 1, "d", "d")
	a = s.Table("agg", "sums")
	if diff := cmp.Diff(want, scanAll(t, a, job.Range{Start: 0, End: 127})); diff != "" {
		t.Fatalf("scan after reopen (-want +got):\n%s", diff)
	}
	if got := scanAll(t, s.Table("new", "never flushed"), job.Range{Start: 0, End: 127}); len(got) != 0 {
		t.Fatalf("unflushed table survived close: %v", got)
	}
	if _, ok := get(t, a, 1, "y"); ok {
		t.Fatal("deleted key is back")
	}
	if s.DiskBytes() <= 0 {
		t.Fatalf("DiskBytes = %d", s.DiskBytes())
	}
}

func TestScanStopsOnError(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb := s.Table("op", "t")
	for i := range 5 {
		mustPut(t, tb, i, "k", "v")
	}
	stop := errors.New("stop")
	n := 0
	err := tb.Scan(job.Range{Start: 0, End: 4}, func(int, []byte, []byte) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 2 {
		t.Fatalf("Scan = %v after %d calls, want stop after 2", err, n)
	}
}

func TestCheckpointHoldsFlushedNotLater(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, filepath.Join(dir, "store"))
	defer s.Close()
	tb := s.Table("op", "t")
	mustPut(t, tb, 1, "flushed", "a")
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	mustPut(t, tb, 2, "pending", "b") // Checkpoint flushes it
	cp := filepath.Join(dir, "cp1")
	if err := s.Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	mustPut(t, tb, 3, "after", "c")
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(cp); err == nil {
		t.Fatal("Checkpoint into an existing dir succeeded")
	}

	r := openStore(t, filepath.Join(dir, "restored"))
	defer r.Close()
	if err := Restore(r, []string{cp}, job.Range{Start: 0, End: 127}); err != nil {
		t.Fatal(err)
	}
	want := []entry{{1, "flushed", "a"}, {2, "pending", "b"}}
	if diff := cmp.Diff(want, scanAll(t, r.Table("op", "t"), job.Range{Start: 0, End: 127})); diff != "" {
		t.Fatalf("checkpoint content (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(cp, "LOCK")); !os.IsNotExist(err) {
		t.Fatalf("Restore left a LOCK file in the checkpoint: %v", err)
	}
}

// TestRestoreRescale writes keys over all 128 key groups into two stores
// (parallelism 2), checkpoints both and restores them into three
// (parallelism 3): every key must land exactly once, with its value. The
// target stores register tables in another order than the sources, so ids
// differ and must be mapped by name.
func TestRestoreRescale(t *testing.T) {
	const maxPar = 128
	dir := t.TempDir()
	want := map[string]entry{} // by table/key
	var cps []string
	for i := range 2 {
		s := openStore(t, filepath.Join(dir, fmt.Sprintf("old%d", i)))
		r := job.RangeOf(i, 2, maxPar)
		tables := []*Table{s.Table("agg", "sums"), s.Table("win", "panes")}
		for kg := r.Start; kg <= r.End; kg++ {
			for n := range 3 {
				for ti, tb := range tables {
					key := fmt.Sprintf("k%d-%d", kg, n)
					val := fmt.Sprintf("v%d-%d-%d", ti, kg, n)
					mustPut(t, tb, kg, key, val)
					want[fmt.Sprintf("%d/%s", ti, key)] = entry{kg, key, val}
				}
			}
		}
		cp := filepath.Join(dir, fmt.Sprintf("cp%d", i))
		if err := s.Checkpoint(cp); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		cps = append(cps, cp)
	}

	got := map[string]entry{}
	for i := range 3 {
		s := openStore(t, filepath.Join(dir, fmt.Sprintf("new%d", i)))
		s.Table("unrelated", "first") // shifts the ids
		r := job.RangeOf(i, 3, maxPar)
		if err := Restore(s, cps, r); err != nil {
			t.Fatal(err)
		}
		for ti, tb := range []*Table{s.Table("agg", "sums"), s.Table("win", "panes")} {
			for _, e := range scanAll(t, tb, job.Range{Start: 0, End: maxPar - 1}) {
				if !r.Contains(e.KG) {
					t.Errorf("store %d (%v) holds key group %d", i, r, e.KG)
				}
				k := fmt.Sprintf("%d/%s", ti, e.Key)
				if _, dup := got[k]; dup {
					t.Errorf("%s restored twice", k)
				}
				got[k] = e
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("restored entries (-want +got):\n%s", diff)
	}
}

func TestRestoreLargeInBatches(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, filepath.Join(dir, "a"))
	tb := s.Table("op", "t")
	val := strings.Repeat("v", 1000)
	const n = 10000 // ~10 MB: more than one restore batch
	for i := range n {
		mustPut(t, tb, i%128, fmt.Sprintf("key%06d", i), val)
	}
	cp := filepath.Join(dir, "cp")
	if err := s.Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	s.Close()
	r := openStore(t, filepath.Join(dir, "b"))
	defer r.Close()
	if err := Restore(r, []string{cp}, job.Range{Start: 0, End: 127}); err != nil {
		t.Fatal(err)
	}
	if got := len(scanAll(t, r.Table("op", "t"), job.Range{Start: 0, End: 127})); got != n {
		t.Fatalf("restored %d entries, want %d", got, n)
	}
}

func TestRestoreNotACheckpoint(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "s"))
	defer s.Close()
	if err := Restore(s, []string{t.TempDir()}, job.Range{Start: 0, End: 1}); err == nil {
		t.Fatal("Restore from an empty dir succeeded")
	}
}

func TestBudget(t *testing.T) {
	b := NewBudget(100)
	if err := b.Grow(60); err != nil {
		t.Fatal(err)
	}
	err := b.Grow(50)
	if !errors.Is(err, ErrBudget) {
		t.Fatalf("Grow over budget = %v, want ErrBudget", err)
	}
	want := "state.max_bytes budget of 100 bytes exceeded: live state would be 110 bytes (60 used, 50 more requested)"
	if err.Error() != want {
		t.Fatalf("error = %q, want %q", err, want)
	}
	if b.Used() != 60 {
		t.Fatalf("failed Grow accounted: used %d", b.Used())
	}
	if err := b.Grow(40); err != nil {
		t.Fatalf("Grow to exactly max: %v", err)
	}
	b.Shrink(30)
	if b.Used() != 70 {
		t.Fatalf("used %d after Shrink, want 70", b.Used())
	}

	u := NewBudget(0)
	if err := u.Grow(1 << 60); err != nil {
		t.Fatalf("unlimited budget: %v", err)
	}
}

// TestRestoreConcurrentFromOneCheckpoint restores two stores from one
// checkpoint at once, as two new subtasks of a rescaled job do: opening it
// read-only must not lock it.
func TestRestoreConcurrentFromOneCheckpoint(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, filepath.Join(dir, "s"))
	tb := s.Table("op", "t")
	for kg := range 128 {
		mustPut(t, tb, kg, "k", "v")
	}
	cp := filepath.Join(dir, "cp")
	if err := s.Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	s.Close()
	targets := []*Store{openStore(t, filepath.Join(dir, "a")), openStore(t, filepath.Join(dir, "b"))}
	errs := make(chan error, len(targets))
	for i, r := range targets {
		go func() { errs <- Restore(r, []string{cp}, job.RangeOf(i, 2, 128)) }()
	}
	for range targets {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range targets {
		if got := len(scanAll(t, r.Table("op", "t"), job.Range{Start: 0, End: 127})); got != 64 {
			t.Errorf("store %d holds %d entries, want 64", i, got)
		}
		r.Close()
	}
}
