package state

import (
	"context"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/flowplane/flowplane/internal/job"
)

func TestPrefix(t *testing.T) {
	if got, want := Prefix("orders", KindCheckpoint, 42), "orders/checkpoints/00000000000000000042/"; got != want {
		t.Fatalf("Prefix = %q, want %q", got, want)
	}
	if got, want := Prefix("orders", KindSavepoint, 7), "orders/savepoints/00000000000000000007/"; got != want {
		t.Fatalf("Prefix = %q, want %q", got, want)
	}
}

func TestArtifactsFile(t *testing.T) {
	root := filepath.Join(t.TempDir(), "not", "yet")
	testArtifacts(t, "file://"+filepath.ToSlash(root))
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".attrs") {
			t.Errorf("metadata sidecar %s written", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// s3URI starts an in-process S3 server on loopback holding bucket
// "artifacts" and returns the s3:// URI of a prefix in it.
func s3URI(t testing.TB) string {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket("artifacts"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return "s3://artifacts/flowplane/state?region=us-east-1&use_path_style=true&endpoint=" + srv.URL
}

func TestArtifactsS3(t *testing.T) {
	testArtifacts(t, s3URI(t))
}

func TestOpenArtifactsBadScheme(t *testing.T) {
	if _, err := OpenArtifacts(context.Background(), "ftp://x/y"); err == nil || !strings.Contains(err.Error(), "ftp") {
		t.Fatalf("OpenArtifacts(ftp://) = %v", err)
	}
}

func dirSize(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		n += info.Size()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func testArtifacts(t *testing.T, uri string) {
	ctx := context.Background()
	dir := t.TempDir()
	const jobID = "orders"

	// A real checkpoint to ship.
	s := openStore(t, filepath.Join(dir, "store"))
	tb := s.Table("agg", "sums")
	var want []entry
	for kg := range 128 {
		mustPut(t, tb, kg, "k", strings.Repeat("v", kg))
		want = append(want, entry{kg, "k", strings.Repeat("v", kg)})
	}
	cp := filepath.Join(dir, "cp")
	if err := s.Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	s.Close()

	a, err := OpenArtifacts(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	list := func(kind string) []int64 {
		t.Helper()
		ms, err := a.List(ctx, jobID, kind)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, m := range ms {
			ids = append(ids, m.ID)
		}
		return ids
	}
	upload := func(kind string, id int64) int64 {
		t.Helper()
		n, err := a.Upload(ctx, Prefix(jobID, kind, id)+"agg#0", cp)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	manifest := func(kind string, id int64, bytes int64) *Manifest {
		return &Manifest{
			Kind: kind, ID: id, JobID: jobID, JobVersion: 3, FormatVersion: 1, MaxParallelism: 128,
			Operators: []string{"src", "agg"},
			CreatedAt: time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC),
			Bytes:     bytes,
			Tasks: []TaskArtifact{{
				Task: "agg#0", Operators: []string{"agg"}, Subtask: 0, KeyGroups: job.Range{Start: 0, End: 127},
				Path: Prefix(jobID, kind, id) + "agg#0/", Bytes: bytes,
			}},
			Sources: []SourcePosition{{Operator: "src", Subtask: 0, Position: []byte(`{"offset":12}`)}},
			Sinks:   []SinkTxn{{Operator: "out", Subtask: 0, Checkpoint: id, Txn: []byte(`"tx-1"`)}},
		}
	}
	commit := func(m *Manifest) {
		t.Helper()
		if err := a.Commit(ctx, m); err != nil {
			t.Fatal(err)
		}
	}

	n := upload(KindCheckpoint, 5)
	if n != dirSize(t, cp) || n == 0 {
		t.Fatalf("Upload = %d bytes, the dir holds %d", n, dirSize(t, cp))
	}
	if ids := list(KindCheckpoint); len(ids) != 0 {
		t.Fatalf("an artifact without manifest is listed: %v", ids)
	}
	m5 := manifest(KindCheckpoint, 5, n)
	commit(m5)
	upload(KindCheckpoint, 10)
	commit(manifest(KindCheckpoint, 10, n))
	upload(KindCheckpoint, 3)  // incomplete, older than the newest complete: cleaned
	upload(KindCheckpoint, 12) // incomplete, newer: may be in progress, kept
	upload(KindSavepoint, 2)   // incomplete savepoint below the newest checkpoint: cleaned
	upload(KindSavepoint, 4)
	commit(manifest(KindSavepoint, 4, n))

	ms, err := a.List(ctx, jobID, KindCheckpoint)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]*Manifest{m5, manifest(KindCheckpoint, 10, n)}, ms); diff != "" {
		t.Fatalf("List (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{4}, list(KindSavepoint)); diff != "" {
		t.Fatalf("savepoints (-want +got):\n%s", diff)
	}

	// Download and restore.
	dl := filepath.Join(dir, "download")
	if err := a.Download(ctx, ms[0].Tasks[0].Path, dl); err != nil {
		t.Fatal(err)
	}
	if err := a.Download(ctx, ms[0].Tasks[0].Path, dl); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("Download into an existing dir = %v", err)
	}
	if err := a.Download(ctx, Prefix(jobID, KindCheckpoint, 99), filepath.Join(dir, "none")); err == nil {
		t.Fatal("Download of a missing artifact succeeded")
	}
	r := openStore(t, filepath.Join(dir, "restored"))
	defer r.Close()
	if err := Restore(r, []string{dl}, job.Range{Start: 0, End: 127}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, scanAll(t, r.Table("agg", "sums"), job.Range{Start: 0, End: 127})); diff != "" {
		t.Fatalf("restored from the download (-want +got):\n%s", diff)
	}

	// Clean incomplete, then delete.
	if err := a.CleanIncomplete(ctx, jobID); err != nil {
		t.Fatal(err)
	}
	present := func(kind string, id int64) bool {
		t.Helper()
		keys, err := a.keys(ctx, Prefix(jobID, kind, id))
		if err != nil {
			t.Fatal(err)
		}
		return len(keys) > 0
	}
	for _, c := range []struct {
		kind string
		id   int64
		want bool
	}{
		{KindCheckpoint, 3, false}, {KindCheckpoint, 5, true}, {KindCheckpoint, 10, true},
		{KindCheckpoint, 12, true}, {KindSavepoint, 2, false}, {KindSavepoint, 4, true},
	} {
		if got := present(c.kind, c.id); got != c.want {
			t.Errorf("after CleanIncomplete, %s %d present = %v, want %v", c.kind, c.id, got, c.want)
		}
	}
	if err := a.Delete(ctx, jobID, KindCheckpoint, 5); err != nil {
		t.Fatal(err)
	}
	if present(KindCheckpoint, 5) {
		t.Error("files of a deleted checkpoint remain")
	}
	if diff := cmp.Diff([]int64{10}, list(KindCheckpoint)); diff != "" {
		t.Fatalf("checkpoints after Delete (-want +got):\n%s", diff)
	}
	if err := a.Delete(ctx, jobID, KindCheckpoint, 5); err != nil {
		t.Fatalf("deleting twice: %v", err)
	}
}

func TestCommitRejectsBadKind(t *testing.T) {
	a, err := OpenArtifacts(context.Background(), "file://"+filepath.ToSlash(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Commit(context.Background(), &Manifest{Kind: "snapshot", JobID: "j"}); err == nil {
		t.Fatal("Commit of kind snapshot succeeded")
	}
}

func TestUploadMissingDir(t *testing.T) {
	a, err := OpenArtifacts(context.Background(), "file://"+filepath.ToSlash(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Upload(context.Background(), "j/x/", filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("Upload of a missing dir succeeded")
	}
	if _, err := os.Stat(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("unexpected dir")
	}
}

// TestHighestIDCountsIncompleteArtifacts: files without a manifest count,
// so a new run never writes into the prefix of a checkpoint whose manifest
// a dead process may still be writing.
func TestHighestIDCountsIncompleteArtifacts(t *testing.T) {
	ctx := context.Background()
	a, err := OpenArtifacts(ctx, "file://"+filepath.ToSlash(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got, err := a.HighestID(ctx, "j"); err != nil || got != 0 {
		t.Fatalf("HighestID of an empty store = %d, %v; want 0", got, err)
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, up := range []struct {
		kind string
		id   int64
	}{{KindCheckpoint, 3}, {KindSavepoint, 5}, {KindCheckpoint, 9}} {
		if _, err := a.Upload(ctx, Prefix("j", up.kind, up.id)+"t/", src); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Commit(ctx, &Manifest{Kind: KindCheckpoint, ID: 3, JobID: "j"}); err != nil {
		t.Fatal(err)
	}
	if got, err := a.HighestID(ctx, "j"); err != nil || got != 9 {
		t.Fatalf("HighestID = %d, %v; want 9 (checkpoint 9 has files but no manifest)", got, err)
	}
	if got, err := a.HighestID(ctx, "other"); err != nil || got != 0 {
		t.Fatalf("HighestID of another job = %d, %v; want 0", got, err)
	}
}
