package kernel

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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
		return &sinkOp{id: "out", out: out, tx: tx, now: time.Now}
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

// numberTx records the numbers its transactions are prepared with.
type numberTx struct {
	component.Transactional
	prepared []int64
}

func (n *numberTx) Prepare(_ context.Context, id int64) ([]byte, error) {
	n.prepared = append(n.prepared, id)
	return nil, nil
}

func (n *numberTx) Commit(context.Context, []byte) error { return nil }

// TestCommitNowNumbersByTheJobClock: without checkpoints a transaction is
// numbered by the job's clock, kept increasing when that clock stands still
// or goes back.
func TestCommitNowNumbersByTheJobClock(t *testing.T) {
	ctx := context.Background()
	var now int64
	tx := &numberTx{}
	s := &sinkOp{id: "out", tx: tx, now: func() time.Time { return time.Unix(0, now) }}
	for _, n := range []int64{5000, 5000, 3000, 9000} {
		now = n
		if err := s.commitNow(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if want := []int64{5000, 5001, 5002, 9000}; !slices.Equal(tx.prepared, want) {
		t.Errorf("numbers %v, want %v", tx.prepared, want)
	}
}
