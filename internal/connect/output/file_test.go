package output

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/message"
)

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFileExample(t *testing.T) {
	conf := componenttest.Example(t, component.Default, component.KindOutput, "file")
	p := filepath.Join(t.TempDir(), "sub", "out.jsonl") // the example's own path is outside the test's sandbox
	conf["path"] = p
	out := build(t, "file", conf)
	ctx := testCtx(t)
	if err := out.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := out.Write(ctx, batch(`{"a":1}`, `{"a":2}`)); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := readFile(t, p), "{\"a\":1}\n{\"a\":2}\n"; got != want {
		t.Errorf("file holds %q, want %q", got, want)
	}
}

func TestFileWrite(t *testing.T) {
	tests := []struct {
		name     string
		conf     map[string]any
		existing string
		batches  []message.Batch
		want     string
	}{
		{"newline", map[string]any{}, "", []message.Batch{batch("a", "b"), batch("c")}, "a\nb\nc\n"},
		{"appends to existing", map[string]any{}, "old\n", []message.Batch{batch("new")}, "old\nnew\n"},
		{"no newline", map[string]any{"append_newline": false}, "", []message.Batch{batch("a", "b")}, "ab"},
		{"sync", map[string]any{"sync": true}, "", []message.Batch{batch("a")}, "a\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "out")
			if tt.existing != "" {
				if err := os.WriteFile(p, []byte(tt.existing), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			conf := map[string]any{"path": p}
			for k, v := range tt.conf {
				conf[k] = v
			}
			out := build(t, "file", conf)
			ctx := testCtx(t)
			if err := out.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			defer out.Close(ctx)
			for _, b := range tt.batches {
				if err := out.Write(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
			// Flushed by Write, before Close.
			if got := readFile(t, p); got != tt.want {
				t.Errorf("file holds %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFileRotation(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.log")
	out := build(t, "file", map[string]any{"path": p, "max_bytes": float64(6), "max_backups": float64(2)})
	ctx := testCtx(t)
	if err := out.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	// Each "xy" line is 3 bytes: two fit in 6 bytes.
	for _, b := range []message.Batch{
		batch("a1", "a2", "b1"), // a1 a2 | b1
		batch("b2", "c1"),       // b2 | c1
		batch("toolongline"),    // | toolongline (alone, larger than max_bytes)
		batch("d1"),             // | d1
	} {
		if err := out.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		got[e.Name()] = readFile(t, filepath.Join(dir, e.Name()))
	}
	want := map[string]string{
		"out.log":   "d1\n",
		"out.log.1": "toolongline\n",
		"out.log.2": "c1\n",
		// "a1 a2" and "b1 b2" were rotated beyond max_backups and deleted.
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

func TestFileReopensAfterFailure(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out")
	out := build(t, "file", map[string]any{"path": p})
	ctx := testCtx(t)
	if err := out.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer out.Close(ctx)
	bad := message.Batch{Messages: []message.Message{message.NewStructured(func() {})}}
	if err := out.Write(ctx, bad); err == nil {
		t.Fatal("a payload that cannot be serialized was written")
	}
	if err := out.Write(ctx, batch("ok")); err != nil {
		t.Fatalf("Write after a failure: %v", err)
	}
	if got := readFile(t, p); got != "ok\n" {
		t.Errorf("file holds %q", got)
	}
}

func TestFileConnectError(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := build(t, "file", map[string]any{"path": filepath.Join(blocker, "out")})
	if err := out.Connect(testCtx(t)); err == nil || !strings.Contains(err.Error(), "file output") {
		t.Errorf("Connect under a regular file = %v", err)
	}
	if err := out.Close(testCtx(t)); err != nil {
		t.Errorf("Close after a failed Connect: %v", err)
	}
}

func TestFileConfigErrors(t *testing.T) {
	for name, conf := range map[string]map[string]any{
		"missing path":  {},
		"negative max":  {"path": "x", "max_bytes": float64(-1)},
		"zero backups":  {"path": "x", "max_backups": float64(0)},
		"unknown field": {"path": "x", "rotate": true},
		"wrong type":    {"path": "x", "sync": "yes"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := component.Default.NewOutput("file", conf, component.Resources{}); err == nil {
				t.Error("built without error")
			}
		})
	}
}
