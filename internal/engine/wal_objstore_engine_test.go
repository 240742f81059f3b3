package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/stream"
)

// TestEngineObjectStoreWAL runs ArkFlow's smoke-test shape (every backend
// option) through the engine with a file:// bucket: every message is
// delivered, and afterwards the bucket holds only the cursor (every
// segment was delivered and deleted).
func TestEngineObjectStoreWAL(t *testing.T) {
	bucket := t.TempDir()
	cfg := materialize(t, fmt.Sprintf(`
streams:
  - id: smoke
    input: {type: generate, context: '{"reading": 1}', interval: 1ns, batch_size: 5, count: 500}
    durability:
      enabled: true
      sync: group_commit
      backend:
        type: object_store
        node_id: smoke-node
        stream_id: smoke-stream
        prefix: fp/smoke
        url: "file://%s"
        segment_tuning: {strategy: low_latency}
        cursor: {max_entries: 10, interval: 50ms}
        parallel_put: {workers: 2}
        compression: {type: zstd, level: 1}
    pipeline: {thread_num: 1, processors: []}
    output: {type: drop}
`, bucket))
	e := engine.New(engine.Options{StateDir: t.TempDir(), StopTimeout: 10 * time.Second})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		e.Shutdown(ctx)
	}()
	if err := e.Apply(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	var st engine.StreamStatus
	waitFor(t, "the stream to deliver 500 messages and complete", func() bool {
		st = e.Streams()[0]
		return st.State == stream.StateCompleted || st.State == stream.StateFailed
	})
	if st.Sent != 500 || st.Received != 500 || st.LastError != "" {
		t.Fatalf("status %+v, want 500 received and sent", st.Status)
	}
	var files []string
	waitFor(t, "the delivered segments to be deleted", func() bool {
		files = files[:0]
		err := filepath.WalkDir(bucket, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(bucket, p)
				files = append(files, rel)
			}
			return nil
		})
		return err == nil && slices.Equal(files, []string{"fp/smoke/smoke-node/smoke-stream/cursor"})
	})
}
