package processor_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

// benchSizes are the batch sizes of the throughput benchmark.
var benchSizes = []int{1000, 1}

// payloads returns n payloads {"id": i, "v": random in [0, 1000000)}.
func payloads(n int) [][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, `{"id": %d, "v": %d}`, i, r.IntN(1000000))
	}
	return out
}

func newProc(b *testing.B, name string, conf map[string]any) component.Processor {
	b.Helper()
	p, err := component.Default.NewProcessor(name, conf, component.Resources{})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// runBench feeds batches of size messages through procs; fill builds the
// messages of one batch into msgs (reused, as the runtime reuses its slots).
func runBench(b *testing.B, size int, fill func(msgs []message.Message, from int), procs ...component.Processor) {
	ctx := context.Background()
	msgs := make([]message.Message, size)
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		fill(msgs, n)
		n += size
		batches := []message.Batch{{Messages: msgs}}
		for _, p := range procs {
			var next []message.Batch
			for _, bt := range batches {
				out, err := p.Process(ctx, bt)
				if err != nil {
					b.Fatal(err)
				}
				next = append(next, out...)
			}
			batches = next
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/msg")
}

// structuredFill gives each message an already parsed value, so the
// benchmark measures the processor alone.
func structuredFill(ps [][]byte) func([]message.Message, int) {
	vals := make([]map[string]any, len(ps))
	for i := range ps {
		m := message.New(ps[i])
		v, err := m.Structured()
		if err != nil {
			panic(err)
		}
		vals[i] = v.(map[string]any)
	}
	return func(msgs []message.Message, from int) {
		for i := range msgs {
			msgs[i] = message.NewStructured(vals[(from+i)%len(vals)])
		}
	}
}

func payloadFill(ps [][]byte) func([]message.Message, int) {
	return func(msgs []message.Message, from int) {
		for i := range msgs {
			msgs[i] = message.New(ps[(from+i)%len(ps)])
		}
	}
}

func BenchmarkMapping(b *testing.B) {
	fill := structuredFill(payloads(4096))
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			p := newProc(b, "mapping", map[string]any{"expression": `merge(this, {"w": this.v * 2})`})
			runBench(b, size, fill, p)
		})
	}
}

func BenchmarkFilter(b *testing.B) {
	fill := structuredFill(payloads(4096))
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			p := newProc(b, "filter", map[string]any{"condition": `this.v < 500000`})
			runBench(b, size, fill, p)
		})
	}
}

func BenchmarkJSONParse(b *testing.B) {
	fill := payloadFill(payloads(4096))
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			p := newProc(b, "json", map[string]any{"operation": "parse"})
			runBench(b, size, fill, p)
		})
	}
}

// BenchmarkMappingFilterPipeline is the whole processor chain of the
// throughput benchmark: payloads are parsed by mapping, which adds w, and
// filter keeps about half.
func BenchmarkMappingFilterPipeline(b *testing.B) {
	fill := payloadFill(payloads(4096))
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			m := newProc(b, "mapping", map[string]any{"expression": `merge(this, {"w": this.v * 2})`})
			f := newProc(b, "filter", map[string]any{"condition": `this.w < 1000000`})
			runBench(b, size, fill, m, f)
		})
	}
}
