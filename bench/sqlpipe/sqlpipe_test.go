package sqlpipe

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	_ "github.com/flowplane/flowplane/internal/connect/all"
	"github.com/flowplane/flowplane/internal/message"
)

// payloads returns n payloads {"id": i, "device": ..., "v": random}.
func payloads(n int) [][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, `{"id":%d,"device":"dev-%d","v":%d}`, i, i%16, r.IntN(1000000))
	}
	return out
}

// The same work in the two pipelines: keep v >= 500000, emit id, device
// and w = v * 2.
var pipelines = []struct {
	name  string
	procs [][2]any // processor name, configuration
}{
	{"sql", [][2]any{
		{"json_to_arrow", map[string]any{}},
		{"sql", map[string]any{"query": "SELECT id, device, v * 2 AS w FROM flow WHERE v >= 500000"}},
		{"arrow_to_json", map[string]any{}},
	}},
	{"mapping+filter", [][2]any{
		{"filter", map[string]any{"condition": "this.v >= 500000"}},
		{"mapping", map[string]any{"expression": `{"id": this.id, "device": this.device, "w": this.v * 2}`}},
	}},
}

func build(tb testing.TB, procs [][2]any) []component.Processor {
	tb.Helper()
	var out []component.Processor
	for _, pc := range procs {
		p, err := component.Default.NewProcessor(pc[0].(string), pc[1].(map[string]any), component.Resources{})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = p.Close(context.Background()) })
		out = append(out, p)
	}
	return out
}

// run passes one batch of ps through procs, flattening a table before a
// processor that does not read tables, as the stream runtime does.
func run(ctx context.Context, procs []component.Processor, ps [][]byte) ([]message.Batch, error) {
	msgs := make([]message.Message, len(ps))
	for i := range ps {
		msgs[i] = message.New(ps[i])
	}
	batches := []message.Batch{{Messages: msgs}}
	for _, p := range procs {
		var next []message.Batch
		for _, b := range batches {
			if !component.IsColumnar(p) {
				if err := columnar.Flatten(&b); err != nil {
					return nil, err
				}
			}
			out, err := p.Process(ctx, b)
			if err != nil {
				return nil, err
			}
			next = append(next, out...)
		}
		batches = next
	}
	return batches, nil
}

// TestSameRows checks that both pipelines give the same objects, so the
// benchmark compares equal work.
func TestSameRows(t *testing.T) {
	ps := payloads(1000)
	var results [][]map[string]any
	for _, pl := range pipelines {
		out, err := run(context.Background(), build(t, pl.procs), ps)
		if err != nil {
			t.Fatalf("%s: %v", pl.name, err)
		}
		var rows []map[string]any
		for _, b := range out {
			for i := range b.Messages {
				p, _ := b.Messages[i].Payload()
				var m map[string]any
				if err := json.Unmarshal(p, &m); err != nil {
					t.Fatalf("%s: %s: %v", pl.name, p, err)
				}
				rows = append(rows, m)
			}
		}
		results = append(results, rows)
	}
	if len(results[0]) == 0 || len(results[0]) == 1000 {
		t.Fatalf("the filter keeps %d of 1000", len(results[0]))
	}
	if d := cmp.Diff(results[1], results[0]); d != "" {
		t.Errorf("mapping+filter (-) vs sql (+)\n%s", d)
	}
}

// BenchmarkSQLPipeline: one op is one batch of 1000 JSON messages through
// the pipeline.
func BenchmarkSQLPipeline(b *testing.B) {
	ps := payloads(1000)
	for _, pl := range pipelines {
		b.Run(pl.name, func(b *testing.B) {
			procs := build(b, pl.procs)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := run(ctx, procs, ps); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(ps))/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
