package operator_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/operator"
)

// discard is a Collector that drops what it is given.
type discard struct{ n int }

func (d *discard) Emit(operator.Record)     { d.n++ }
func (d *discard) EmitLate(operator.Record) {}

// BenchmarkWindowTumblingCount is the kernel's hot path: a keyed count in
// 1-second tumbling windows over 100,000 keys, events in time order (1,000
// per ms, so 10 per key and window), in batches of 1024, each followed by
// the watermark a bounded_out_of_orderness source with no disorder sends.
func BenchmarkWindowTumblingCount(b *testing.B) {
	const (
		keys  = 100_000
		batch = 1024
	)
	values := make([]map[string]any, keys)
	for i := range values {
		values[i] = map[string]any{"user": fmt.Sprintf("u%d", i)}
	}
	op := &job.Operator{ID: "w", Kind: "window", Stateful: true, Window: &job.WindowConfig{
		Key:          "this.user",
		Window:       job.WindowSpec{Type: "tumbling", SizeMs: 1000},
		Aggregations: []job.Aggregation{{Name: "count", Function: "count"}},
	}}
	h := start(b, op, nil, nil)
	ctx := context.Background()
	out := &discard{}
	in := make([]operator.Record, batch)
	n := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for i := range in {
			in[i] = operator.Record{Value: values[n%keys], Time: int64(n / 1000)}
			n++
		}
		if err := h.op.Process(ctx, in, out); err != nil {
			b.Fatal(err)
		}
		if err := h.op.OnWatermark(ctx, in[batch-1].Time-1, out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}

func benchStateless(b *testing.B, op *job.Operator) {
	const batch = 1024
	h := start(b, op, nil, nil)
	ctx := context.Background()
	out := &discard{}
	in := make([]operator.Record, batch)
	n := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for i := range in {
			in[i] = operator.Record{Value: map[string]any{"id": float64(n), "v": float64(n % 1000)}, Time: int64(n)}
			n++
		}
		if err := h.op.Process(ctx, in, out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkMap is q1's shape: one field changed, the others kept (each
// record's object is built by the benchmark, as a source would decode it).
func BenchmarkMap(b *testing.B) {
	benchStateless(b, &job.Operator{ID: "m", Kind: "map",
		Map: &job.MapConfig{Expression: `merge(this, {"w": this.v * 2})`}})
}

// BenchmarkFilter is q2's shape: a comparison on one field.
func BenchmarkFilter(b *testing.B) {
	benchStateless(b, &job.Operator{ID: "f", Kind: "filter",
		Filter: &job.FilterConfig{Condition: `this.v >= 500`}})
}
