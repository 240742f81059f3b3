package wal

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestFilesPrivate: the WAL's directory is 0700 and its segments and lock
// 0600: they hold the stream's records (issue 29).
func TestFilesPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal", "s1")
	w, _, err := Open(Options{Dir: dir, SegmentBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 { // several segments
		if _, err := w.Append(context.Background(), make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 3 {
		t.Fatalf("entries %v", entries)
	}
	for _, p := range []string{filepath.Dir(dir), dir} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v (%v), want 0700", p, st.Mode().Perm(), err)
		}
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != fs.FileMode(0o600) {
			t.Errorf("%s: %v, want 0600", e.Name(), got)
		}
	}
}
