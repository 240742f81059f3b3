package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/engine"
)

// lockedBuffer is a log destination safe for the streams' goroutines.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWindowStateDefaultWarns checks that a window buffer without state
// starts, with one warning for its stream, and that a declared state
// starts without one.
func TestWindowStateDefaultWarns(t *testing.T) {
	var logs lockedBuffer
	e := engine.New(engine.Options{StateDir: t.TempDir(), StopTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.Shutdown(ctx)
	})
	doc := `streams:
  - id: undeclared
    input: {type: generate, context: '{}', interval: 1h}
    buffer: {type: tumbling_window, interval: 1h}
    pipeline: {processors: []}
    output: {type: drop}
  - id: declared
    input: {type: generate, context: '{}', interval: 1h}
    buffer: {type: session_window, gap: 1h}
    pipeline: {processors: []}
    output: {type: drop}
    state: {durability: ephemeral}
`
	if err := e.Apply(context.Background(), materialize(t, doc)); err != nil {
		t.Fatal(err)
	}
	type entry struct{ Level, Msg, Stream, Buffer string }
	var got []entry
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var en entry
		if err := json.Unmarshal([]byte(line), &en); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if strings.Contains(en.Msg, "window buffer state") {
			got = append(got, en)
		}
	}
	want := []entry{{"WARN", "window buffer state not declared; its contents are not recovered", "undeclared", "tumbling_window"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}
