package state

import (
	"context"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/job"
)

// checkPrivate fails for every file under root that is not 0600 and every
// directory that is not 0700 (root itself included).
func checkPrivate(t *testing.T, root string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		} else {
			n++
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s: %v, want %v", p, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no file under %s", root)
	}
}

// TestStateFilesPrivate: a job's state store, its checkpoint, the
// artifacts uploaded to a file:// store (objects, manifest, fence) and the
// copy downloaded from it are 0600 files in 0700 directories: they hold
// the job's state (issue 29).
func TestStateFilesPrivate(t *testing.T) {
	dir := t.TempDir()
	storeDir := filepath.Join(dir, "task", "store")
	s, err := Open(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Table("agg", "counts").Put(3, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(dir, "task", "checkpoints", "1")
	if err := s.Checkpoint(ckpt); err != nil {
		t.Fatal(err)
	}
	checkPrivate(t, filepath.Join(dir, "task"))

	ctx := context.Background()
	root := filepath.Join(dir, "bucket")
	a, err := OpenArtifacts(ctx, "file://"+filepath.ToSlash(root))
	if err != nil {
		t.Fatal(err)
	}
	prefix := Prefix("j", KindCheckpoint, 1)
	if _, err := a.Upload(ctx, prefix+"agg#0/", ckpt); err != nil {
		t.Fatal(err)
	}
	m := &Manifest{Kind: KindCheckpoint, ID: 1, JobID: "j", JobVersion: 1, FormatVersion: 1, MaxParallelism: 128,
		CreatedAt: time.Now(), Tasks: []TaskArtifact{{Task: "agg#0", Operators: []string{"agg"}, KeyGroups: job.Range{End: 127}, Path: prefix + "agg#0/"}}}
	if err := a.Commit(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteFence(ctx, "j", 2); err != nil {
		t.Fatal(err)
	}
	checkPrivate(t, root)

	down := filepath.Join(dir, "restore", "0")
	if err := a.Download(ctx, prefix+"agg#0/", down); err != nil {
		t.Fatal(err)
	}
	checkPrivate(t, filepath.Join(dir, "restore"))
}
