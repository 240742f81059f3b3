package output

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
)

// umask is the process umask, which every created mode loses.
func umask() fs.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return fs.FileMode(m)
}

func modeOf(t *testing.T, path string) fs.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// TestFileOutputModes: what the file output creates is private (0600 files
// in 0700 directories) unless mode and dir_mode open it, in a stream and
// in a job (pending and part files).
func TestFileOutputModes(t *testing.T) {
	for _, tc := range []struct {
		name          string
		conf          map[string]any
		file, dirMode fs.FileMode
	}{
		{"default", map[string]any{}, 0o600, 0o700},
		{"opened", map[string]any{"mode": "0644", "dir_mode": "0o755"}, 0o644, 0o755},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantFile, wantDir := tc.file&^umask(), tc.dirMode&^umask()
			dir := t.TempDir()
			ctx := testCtx(t)

			stream := filepath.Join(dir, "s", "deep", "out.jsonl")
			conf := map[string]any{"path": stream}
			for k, v := range tc.conf {
				conf[k] = v
			}
			out := build(t, "file", conf)
			if err := out.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			mustWrite(t, out, batch("a"))
			if err := out.Close(ctx); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{filepath.Join(dir, "s"), filepath.Join(dir, "s", "deep")} {
				if got := modeOf(t, d); got != wantDir {
					t.Errorf("directory %s: %v, want %v", d, got, wantDir)
				}
			}
			if got := modeOf(t, stream); got != wantFile {
				t.Errorf("stream file: %v, want %v", got, wantFile)
			}

			part := filepath.Join(dir, "j", "counts.jsonl")
			conf["path"] = part
			jo := build(t, "file", conf).(component.Transactional)
			if err := jo.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			if err := jo.Begin(ctx, "sink", 0, nil); err != nil {
				t.Fatal(err)
			}
			mustWrite(t, jo, batch("a"))
			txn := mustPrepare(t, jo, 1)
			pending := filepath.Join(dir, "j", ".counts.jsonl.pending")
			if got := modeOf(t, filepath.Join(pending, "sink-0-00000000000000000001.pending")); got != wantFile {
				t.Errorf("pending file: %v, want %v", got, wantFile)
			}
			if err := jo.Commit(ctx, txn); err != nil {
				t.Fatal(err)
			}
			if err := jo.Close(ctx); err != nil {
				t.Fatal(err)
			}
			for path, want := range map[string]fs.FileMode{
				filepath.Join(dir, "j"): wantDir, pending: wantDir,
				filepath.Join(dir, "j", "counts-sink-0-00000000000000000001.jsonl"): wantFile,
			} {
				if got := modeOf(t, path); got != want {
					t.Errorf("%s: %v, want %v", path, got, want)
				}
			}
		})
	}
}

// TestFileOutputModeInvalid: a mode that is not octal permissions is
// refused by the constructor, naming the field.
func TestFileOutputModeInvalid(t *testing.T) {
	for _, m := range []string{"rw-r--r--", "0800", "01777", ""} {
		_, err := NewFile(map[string]any{"path": "/tmp/x", "mode": m}, component.Resources{})
		if err == nil {
			t.Errorf("mode %q accepted", m)
		}
	}
}
