package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/stream"
)

// TestCheckBatchMustComeFirst checks that the deep build (--validate)
// names a batch processor that is not the first processor.
func TestCheckBatchMustComeFirst(t *testing.T) {
	cfg := materialize(t, `streams:
  - input: {type: generate, context: '{}', count: 1}
    pipeline:
      processors:
        - type: json
        - type: batch
          count: 10
    output: {type: drop}
`)
	ps := engine.Check(cfg, component.Default)
	if len(ps) != 1 || ps[0].Path != "streams[0].pipeline.processors[1]" || !strings.Contains(ps[0].Message, "must be the first processor") {
		t.Fatalf("problems = %v", ps)
	}
	ok := materialize(t, `streams:
  - input: {type: generate, context: '{}', count: 1}
    pipeline:
      processors:
        - type: batch
          count: 10
        - type: json
    output: {type: drop}
`)
	if ps := engine.Check(ok, component.Default); len(ps) != 0 {
		t.Errorf("batch first has problems: %v", ps)
	}
}

// TestBatchProcessorEndToEnd runs a stream whose batch processor merges the
// memory input's one-message batches, then processes and writes them.
func TestBatchProcessorEndToEnd(t *testing.T) {
	e := newEngine(t)
	out := filepath.Join(t.TempDir(), "out.txt")
	doc := `streams:
  - id: b
    input: {type: memory, messages: ['{"a":1}', '{"a":2}', '{"a":3}', '{"a":4}', '{"a":5}']}
    buffer: {type: tumbling_window, interval: 10ms, max_messages: 2}
    state: {durability: ephemeral}
    pipeline: {thread_num: 2, processors: [{type: batch, count: 2, timeout_ms: 10}, {type: json}, {type: filter, condition: 'this.a != 2'}]}
    output: {type: file, path: ` + out + `}
`
	if err := e.Apply(context.Background(), materialize(t, doc)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "completion", e.Finished)
	if f := e.Failed(); len(f) != 0 {
		t.Fatalf("failed streams: %v", f)
	}
	s, _ := statusOf(e, "b")
	if s.State != stream.StateCompleted || s.Received != 5 {
		t.Errorf("status = %+v", s.Status)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != "{\"a\":1}\n{\"a\":3}\n{\"a\":4}\n{\"a\":5}\n" {
		t.Errorf("output = %q", got)
	}
}
