package sqldb

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/stream"

	_ "github.com/flowplane/flowplane/internal/connect/input"  // generate, memory
	_ "github.com/flowplane/flowplane/internal/connect/output" // file, drop
)

// nodeDoc is a node configuration running streams, each given as
// {id, input, output}; JSON is YAML.
func nodeDoc(t *testing.T, streams ...map[string]any) string {
	t.Helper()
	for _, s := range streams {
		if s["pipeline"] == nil {
			s["pipeline"] = map[string]any{"thread_num": 1, "processors": []any{}}
		}
	}
	b, err := json.Marshal(map[string]any{
		"logging":      map[string]any{"level": "error"},
		"health_check": map[string]any{"enabled": false},
		"streams":      streams,
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitStream polls the status of stream id until cond holds; on timeout
// it fails with the last status.
func waitStream(t *testing.T, e *engine.Engine, id, what string, within time.Duration, cond func(engine.StreamStatus) bool) engine.StreamStatus {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st := componenttest.Stream(t, e, id)
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; status %+v", within, what, st.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func completed(st engine.StreamStatus) bool { return st.State == stream.StateCompleted }

// waitFor polls cond until it holds, failing after within.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	componenttest.WaitFor(t, what, within, cond)
}

// readLines reads a JSON-lines file (none when it does not exist yet).
func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			continue // a line being written
		}
		out = append(out, m)
	}
	return out
}

// idCounts counts the messages per "id".
func idCounts(lines []map[string]any) map[int64]int {
	c := map[int64]int{}
	for _, l := range lines {
		if f, ok := l["id"].(float64); ok {
			c[int64(f)]++
		}
	}
	return c
}

func newInput(t *testing.T, conf map[string]any) *Input {
	t.Helper()
	in, err := component.Default.NewInput("sql", conf, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(context.Background()) })
	return in.(*Input)
}

func newOutput(t *testing.T, conf map[string]any) *Output {
	t.Helper()
	out, err := component.Default.NewOutput("sql", conf, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = out.Close(context.Background()) })
	return out.(*Output)
}

func batchOf(payloads ...string) message.Batch {
	var b message.Batch
	for _, p := range payloads {
		b.Messages = append(b.Messages, message.New([]byte(p)))
	}
	return b
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
