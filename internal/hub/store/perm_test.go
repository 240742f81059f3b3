package store

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFilesOwnerOnly: the database and its -wal and -shm files are 0600,
// whatever the umask lets through, and an older world-readable database is
// narrowed when opened.
func TestFilesOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	check := func(t *testing.T, path string) {
		t.Helper()
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != 0o600 {
				t.Errorf("%s: mode %o, want 600", filepath.Base(p), got)
			}
		}
	}
	t.Run("new", func(t *testing.T) {
		_, path := openTest(t) // open: the -wal and -shm files exist
		check(t, path)
	})
	t.Run("existing world-readable", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "hub.db")
		s, err := Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err = Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		check(t, path)
	})
}
