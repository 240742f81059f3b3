package output

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

// listTree returns every regular file under dir (relative path -> content).
func listTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		got[rel] = readFile(t, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func txnOutput(t *testing.T, path string, op string, subtask int, restored ...[]byte) component.Transactional {
	t.Helper()
	out := build(t, "file", map[string]any{"path": path, "max_bytes": float64(4)}).(component.Transactional)
	ctx := testCtx(t)
	if err := out.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := out.Begin(ctx, op, subtask, restored); err != nil {
		t.Fatalf("Begin: %v", err)
	}
	return out
}

func mustWrite(t *testing.T, out component.Output, b message.Batch) {
	t.Helper()
	if err := out.Write(testCtx(t), b); err != nil {
		t.Fatal(err)
	}
}

func mustPrepare(t *testing.T, out component.Transactional, ckpt int64) []byte {
	t.Helper()
	txn, err := out.Prepare(testCtx(t), ckpt)
	if err != nil {
		t.Fatalf("Prepare(%d): %v", ckpt, err)
	}
	if !json.Valid(txn) {
		t.Fatalf("Prepare(%d) returned %q, not JSON", ckpt, txn)
	}
	return txn
}

func TestFileTxnPrepareCommit(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out", "counts.jsonl")
	ctx := testCtx(t)
	out := txnOutput(t, p, "sink", 0)
	mustWrite(t, out, batch("a", "b"))
	mustWrite(t, out, batch("c")) // max_bytes does not rotate in a job
	t3 := mustPrepare(t, out, 3)
	want := map[string]string{"out/.counts.jsonl.pending/sink-0-00000000000000000003.pending": "a\nb\nc\n"}
	if diff := cmp.Diff(want, listTree(t, dir)); diff != "" {
		t.Fatalf("after Prepare (-want +got):\n%s", diff)
	}
	mustWrite(t, out, batch("d"))
	t4 := mustPrepare(t, out, 4)
	t5 := mustPrepare(t, out, 5) // empty: no file
	for _, txn := range [][]byte{t3, t4, t5, t3} {
		if err := out.Commit(ctx, txn); err != nil {
			t.Fatalf("Commit(%s): %v", txn, err)
		}
	}
	if err := out.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{
		"out/counts-sink-0-00000000000000000003.jsonl": "a\nb\nc\n",
		"out/counts-sink-0-00000000000000000004.jsonl": "d\n",
	}
	if diff := cmp.Diff(want, listTree(t, dir)); diff != "" {
		t.Errorf("after Commit (-want +got):\n%s", diff)
	}

	// Both files gone: the data is lost, which Commit reports.
	if err := os.Remove(filepath.Join(dir, "out/counts-sink-0-00000000000000000004.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := out.Commit(ctx, t4); err == nil {
		t.Error("Commit of a transaction whose files are both gone succeeded")
	}
}

func TestFileTxnCrashRecovery(t *testing.T) {
	tests := []struct {
		name     string
		restore  bool
		wantPart bool
	}{
		{"checkpoint completed", true, true},
		{"checkpoint not completed", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "out.jsonl")
			ctx := testCtx(t)
			// Instance 1: checkpoint 7 prepared, more written, then a crash
			// (no Commit, no Close). Another subtask's and another
			// operator's pending files must survive.
			crashed := txnOutput(t, p, "sink-a", 1)
			mustWrite(t, crashed, batch("x", "y"))
			txn := mustPrepare(t, crashed, 7)
			mustWrite(t, crashed, batch("after"))
			other := txnOutput(t, p, "sink-a", 11)
			mustWrite(t, other, batch("o"))
			otherTxn := mustPrepare(t, other, 7)
			prefix := txnOutput(t, p, "sink", 1) // "sink-1-..." must not match "sink-a-1-..."
			mustWrite(t, prefix, batch("s"))
			mustPrepare(t, prefix, 2)

			var restored [][]byte
			if tt.restore {
				restored = [][]byte{txn}
			}
			again := txnOutput(t, p, "sink-a", 1, restored...)
			want := map[string]string{
				".out.jsonl.pending/sink-a-11-00000000000000000007.pending": "o\n",
				".out.jsonl.pending/sink-1-00000000000000000002.pending":    "s\n",
			}
			if tt.wantPart {
				want["out-sink-a-1-00000000000000000007.jsonl"] = "x\ny\n"
			} else {
				// Checkpoint 7's manifest may still land (its writer died
				// while writing it): its prepared file is kept until a
				// later checkpoint commits.
				want[".out.jsonl.pending/sink-a-1-00000000000000000007.pending"] = "x\ny\n"
			}
			if diff := cmp.Diff(want, listTree(t, dir)); diff != "" {
				t.Errorf("after Begin (-want +got):\n%s", diff)
			}
			// Committing the restored transaction again is a no-op.
			if tt.restore {
				if err := again.Commit(ctx, txn); err != nil {
					t.Errorf("second Commit: %v", err)
				}
			}
			if err := other.Commit(ctx, otherTxn); err != nil {
				t.Fatal(err)
			}
			mustWrite(t, again, batch("z"))
			if err := again.Commit(ctx, mustPrepare(t, again, 8)); err != nil {
				t.Fatal(err)
			}
			var parts []string
			for name := range listTree(t, dir) {
				if filepath.Dir(name) == "." {
					parts = append(parts, name)
				}
			}
			slices.Sort(parts)
			if _, kept := listTree(t, dir)[".out.jsonl.pending/sink-a-1-00000000000000000007.pending"]; kept {
				t.Error("checkpoint 8's commit left checkpoint 7's superseded prepared file")
			}
			wantParts := []string{"out-sink-a-1-00000000000000000008.jsonl", "out-sink-a-11-00000000000000000007.jsonl"}
			if tt.wantPart {
				wantParts = []string{"out-sink-a-1-00000000000000000007.jsonl", "out-sink-a-1-00000000000000000008.jsonl",
					"out-sink-a-11-00000000000000000007.jsonl"}
			}
			if diff := cmp.Diff(wantParts, parts); diff != "" {
				t.Errorf("part files (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFileTxnScaleDownCleans: three subtasks crash with in-progress data
// after checkpoint 4; the job restores at parallelism 1, and subtask 0,
// which restores every old subtask's transactions, leaves only their part
// files: no in-progress file of a subtask that is gone. An empty
// transaction of an older version (naming no subtask) is still committed.
func TestFileTxnScaleDownCleans(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.jsonl")
	var restored [][]byte
	for sub, data := range []string{"a", "", "c"} {
		crashed := txnOutput(t, p, "sink", sub)
		if data != "" {
			mustWrite(t, crashed, batch(data))
		}
		restored = append(restored, mustPrepare(t, crashed, 4))
		mustWrite(t, crashed, batch("after"))
		// The in-progress file is flushed as a crash of the process would
		// leave it: written, never prepared.
		if err := crashed.Close(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	restored = append(restored, []byte(`{"checkpoint":4}`))
	txnOutput(t, p, "sink", 0, restored...)
	want := map[string]string{
		"out-sink-0-00000000000000000004.jsonl": "a\n",
		"out-sink-2-00000000000000000004.jsonl": "c\n",
	}
	if diff := cmp.Diff(want, listTree(t, dir)); diff != "" {
		t.Errorf("after a restore at parallelism 1 (-want +got):\n%s", diff)
	}
}

func TestFileTxnConnectFileRemoved(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.jsonl")
	out := txnOutput(t, p, "sink", 0)
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("the empty file Connect created is still there: %v", err)
	}
	if err := out.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	// An existing file at path is kept as is.
	if err := os.WriteFile(p, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out = txnOutput(t, p, "sink", 0)
	mustWrite(t, out, batch("new"))
	if err := out.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, p); got != "old\n" {
		t.Errorf("path holds %q in a job", got)
	}
}

func TestFileTxnFailedWritePoisons(t *testing.T) {
	out := txnOutput(t, filepath.Join(t.TempDir(), "o"), "sink", 0)
	ctx := testCtx(t)
	bad := message.Batch{Messages: []message.Message{message.New([]byte("ok")), message.NewStructured(func() {})}}
	if err := out.Write(ctx, bad); err == nil {
		t.Fatal("a payload that cannot be serialized was written")
	}
	if err := out.Write(ctx, batch("later")); err == nil {
		t.Error("Write after a failed Write succeeded")
	}
	if _, err := out.Prepare(ctx, 1); err == nil {
		t.Error("Prepare after a failed Write succeeded")
	}
}

func TestFileTxnErrors(t *testing.T) {
	ctx := testCtx(t)
	out := build(t, "file", map[string]any{"path": filepath.Join(t.TempDir(), "o")}).(component.Transactional)
	if _, err := out.Prepare(ctx, 1); err == nil {
		t.Error("Prepare before Begin succeeded")
	}
	for _, op := range []string{"", "..", "a/b"} {
		if err := out.Begin(ctx, op, 0, nil); err == nil {
			t.Errorf("Begin with operator %q succeeded", op)
		}
	}
	if err := out.Begin(ctx, "sink", -1, nil); err == nil {
		t.Error("Begin with subtask -1 succeeded")
	}
	if err := out.Begin(ctx, "sink", 0, [][]byte{[]byte(`{"checkpoint":1,"prepared":"/nonexistent/a","final":"/nonexistent/b"}`)}); err == nil {
		t.Error("Begin restoring a lost transaction succeeded")
	}
	for _, txn := range []string{`x`, `{"prepared":"a"}`} {
		if err := out.Commit(ctx, []byte(txn)); err == nil {
			t.Errorf("Commit(%s) succeeded", txn)
		}
	}
}

func TestPendingName(t *testing.T) {
	tests := []struct {
		op      string
		subtask int
		n       int64
		ext     string
	}{
		{"sink", 0, 3, pendingExt},
		{"a-1", 2, 0, inProgressExt},
		{"x-0-00000000000000000001", 12, 9223372036854775807, pendingExt},
	}
	for _, tt := range tests {
		name := pendingName(tt.op, tt.subtask, tt.n, tt.ext)
		op, sub, n, ok := parsePendingName(name)
		if !ok || op != tt.op || sub != tt.subtask || n != tt.n {
			t.Errorf("parsePendingName(%q) = %q, %d, %d, %v", name, op, sub, n, ok)
		}
	}
	for _, bad := range []string{"x.pending", "-1-00000000000000000001.pending", "a-1-1.pending", "a-1-00000000000000000001.jsonl", "a-b-00000000000000000001.pending"} {
		if _, _, _, ok := parsePendingName(bad); ok {
			t.Errorf("parsePendingName(%q) accepted it", bad)
		}
	}
}
