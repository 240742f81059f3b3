package kernel

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	_ "github.com/flowplane/flowplane/internal/connect/all"
	"github.com/flowplane/flowplane/internal/message"
)

// TestCommitNowKeepsEveryCommit: a job without checkpoints commits its
// transactional sink every second and at the end. Each commit stays
// visible: the second does not replace the first, and a later run's
// commits do not replace the earlier run's.
func TestCommitNowKeepsEveryCommit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	newSink := func() *sinkOp {
		out, err := component.Default.NewOutput("file", map[string]any{"path": filepath.Join(dir, "out.jsonl")}, component.Resources{})
		if err != nil {
			t.Fatal(err)
		}
		if err := out.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { out.Close(ctx) })
		tx := out.(component.Transactional)
		if err := tx.Begin(ctx, "out", 0, nil); err != nil {
			t.Fatal(err)
		}
		return &sinkOp{id: "out", out: out, tx: tx}
	}
	write := func(s *sinkOp, line string) {
		t.Helper()
		if err := s.out.Write(ctx, message.Batch{Messages: []message.Message{message.New([]byte(line))}}); err != nil {
			t.Fatal(err)
		}
		if err := s.commitNow(ctx); err != nil {
			t.Fatal(err)
		}
	}
	first := newSink()
	write(first, `{"n":1}`)
	write(first, `{"n":2}`)
	second := newSink() // a restart: the same operator and subtask
	write(second, `{"n":3}`)

	files, _ := filepath.Glob(filepath.Join(dir, "out-*.jsonl"))
	var lines []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Fields(string(b))...)
	}
	slices.Sort(lines)
	if want := []string{`{"n":1}`, `{"n":2}`, `{"n":3}`}; !slices.Equal(lines, want) {
		t.Errorf("committed part files %v hold %v, want %v", files, lines, want)
	}
}
