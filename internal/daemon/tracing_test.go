package daemon

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestNodeFlushesTracesOnStop: a node with a tracing section exports its
// spans by OTLP/HTTP to the endpoint, and what is queued when it stops is
// flushed before Run returns (the exporter's own schedule is 5 s, longer
// than this node runs).
func TestNodeFlushesTracesOnStop(t *testing.T) {
	var exports atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" && r.Header.Get("Content-Type") == "application/x-protobuf" && len(b) > 0 {
			exports.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer rcv.Close()
	dir := t.TempDir()
	conf := filepath.Join(dir, "node.yaml")
	doc := "logging: {level: error}\nhealth_check: {enabled: false, observability: {enabled: false}}\n" +
		"tracing: {enabled: true, endpoint: " + rcv.URL + ", sampling_ratio: 1}\nstreams:\n" +
		"  - id: a\n    input: {type: generate, context: '{\"n\": {{count}}}', interval: 0s, count: 3, batch_size: 1}\n" +
		"    pipeline: {processors: []}\n    output: {type: drop}\n"
	if err := os.WriteFile(conf, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	if err := Run(ctx, Options{ConfigPath: conf, StateDir: filepath.Join(dir, "state"), Started: time.Now(), Stdout: &out, Stderr: &errs}); err != nil {
		t.Fatalf("Run = %v\nstderr: %s\nlog: %s", err, errs.String(), out.String())
	}
	if exports.Load() == 0 {
		t.Error("no spans exported by the time the node stopped")
	}
}
