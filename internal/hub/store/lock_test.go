package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/flowplane/flowplane/internal/lockfile"
)

// TestOpenRefusesFileInUse opens one database file twice: the second Open
// fails with ErrInUse naming the holder (this process), and leaves nothing
// open; after Close the file opens again. Two processes are tested in
// cmd/flowplane (a Hub started on the storage of a running Hub).
func TestOpenRefusesFileInUse(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hub.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, path)
	var he *lockfile.HeldError
	if !errors.Is(err, ErrInUse) || !errors.As(err, &he) || he.PID != os.Getpid() {
		t.Fatalf("second Open: %v, want ErrInUse naming pid %d", err, os.Getpid())
	}
	if errors.Is(err, ErrStorage) {
		t.Errorf("a file in use is not a storage failure: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The volatile database has no file to own: two may be open at once.
	a, err := Open(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, "")
	if err != nil {
		t.Fatalf("second volatile Open: %v", err)
	}
	b.Close()
}
