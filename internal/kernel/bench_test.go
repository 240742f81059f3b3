package kernel

import (
	"context"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/job"
)

// BenchmarkKeyedWindow runs a keyed tumbling-window count at parallelism 2
// over b.N generated records (at least 10,000), checkpointing every 100 ms.
func BenchmarkKeyedWindow(b *testing.B) {
	n := max(b.N, 10_000)
	out := newSinkStore()
	spec := config.Job{
		ID: "bench", Version: 1, Parallelism: 2, MaxParallelism: 128,
		Operators: []config.Operator{
			{ID: "src", Kind: "source"},
			{ID: "win", Kind: "window", Config: map[string]any{
				"key": "this.k", "window": map[string]any{"type": "tumbling", "size_ms": 1000},
				"aggregations": []any{map[string]any{"name": "n", "function": "count"}},
			}},
			{ID: "out", Kind: "sink"},
		},
		Edges: []config.Edge{{From: "src", To: "win", Partitioned: true}, {From: "win", To: "out"}},
		Sources: []config.Source{{OperatorID: "src", InputType: "seq", Config: map[string]any{"n": n, "keys": 1000, "batch": 1024, "hooks": &seqHooks{}},
			Time: &config.Time{Mode: "event_time", TimestampField: "ts", Watermark: config.Watermark{Strategy: "bounded_out_of_orderness"}, LateEventPolicy: "drop"}}},
		Sinks:      []config.Sink{{OperatorID: "out", OutputType: "txcollect", Config: map[string]any{"store": out}}},
		State:      &config.JobState{Backend: "embedded_kv", Durability: "durable", Root: b.TempDir(), FormatVersion: 1, MaxPendingTransactions: 64},
		Checkpoint: &config.Checkpoint{IntervalMs: 100, Retention: 2, ObjectStoreURI: "file://" + b.TempDir()},
		Recovery:   "latest_checkpoint",
	}
	p, probs := job.Build("jobs[0]", spec)
	if len(probs) > 0 {
		b.Fatal(probs)
	}
	j, err := Build("jobs[0]", p, Options{Registry: testRegistry(), Spec: &spec})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.ResetTimer()
	start := time.Now()
	if err := j.Run(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "events/s")
}
