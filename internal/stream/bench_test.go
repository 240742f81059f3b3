package stream

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/tap"
	"github.com/flowplane/flowplane/internal/tracing"
)

// benchInput hands out n batches cut from one read-only template and
// counts acknowledgements; its AckFunc allocates nothing.
type benchInput struct {
	tmpl  []message.Message
	left  int
	acked atomic.Int64
	ack   message.AckFunc
}

func newBenchInput(batches, size int) *benchInput {
	in := &benchInput{tmpl: make([]message.Message, size), left: batches}
	for i := range in.tmpl {
		in.tmpl[i] = message.New([]byte(`{"id":` + strconv.Itoa(i) + `,"v":"payload"}`))
	}
	in.ack = func(context.Context, error) error { in.acked.Add(1); return nil }
	return in
}

func (in *benchInput) Connect(context.Context) error { return nil }
func (in *benchInput) Close(context.Context) error   { return nil }
func (in *benchInput) Read(context.Context) (message.Batch, message.AckFunc, error) {
	if in.left == 0 {
		return message.Batch{}, nil, message.ErrEndOfInput
	}
	in.left--
	return message.Batch{Messages: in.tmpl}, in.ack, nil
}

// dropOutput accepts and counts.
type dropOutput struct{ msgs atomic.Int64 }

func (o *dropOutput) Connect(context.Context) error { return nil }
func (o *dropOutput) Close(context.Context) error   { return nil }
func (o *dropOutput) Write(_ context.Context, b message.Batch) error {
	o.msgs.Add(int64(b.Len()))
	return nil
}

// touchProc reads every payload (a stand-in for a mapping) and returns the
// batch as it is, like a filter that keeps everything.
type touchProc struct{}

func (touchProc) Close(context.Context) error { return nil }
func (touchProc) Process(_ context.Context, b message.Batch) ([]message.Batch, error) {
	n := 0
	for i := range b.Messages {
		p, _ := b.Messages[i].Payload()
		n += len(p)
	}
	if n < 0 {
		return nil, nil
	}
	return []message.Batch{b}, nil
}

// benchTracer is a tracer sampling ratio of the batches, exporting by
// OTLP/HTTP to a loopback receiver that accepts and discards.
func benchTracer(b *testing.B, ratio float64) trace.Tracer {
	b.Helper()
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	b.Cleanup(rcv.Close)
	p, err := tracing.New(context.Background(), tracing.Options{
		Endpoint: rcv.URL, Protocol: tracing.ProtocolHTTP, SamplingRatio: ratio, ServiceName: "bench",
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p.Tracer()
}

// BenchmarkStream measures the runtime's own cost: one op is one batch
// through input -> 2 processors -> output, so ns/op is the per-batch
// overhead (for batch 1, nearly all of it is the runtime).
//
// tap=none runs without a tap.Set (as before taps existed), tap=idle with a
// set and no tap attached (the cost of the hooks: an atomic load per stage
// and batch), tap=attached with one tap after the last processor at the
// default rate whose samples are read. The trace=0.01 variants (no taps)
// trace 1% of the batches (and make the spans' context for the others),
// exporting to a loopback receiver; without the suffix tracing is off.
func BenchmarkStream(b *testing.B) {
	for _, traced := range []bool{false, true} {
		for _, size := range []int{1000, 1} {
			for _, threads := range []int{1, 2} {
				for _, mode := range []string{"none", "idle", "attached"} {
					name := fmt.Sprintf("batch=%d/threads=%d/tap=%s", size, threads, mode)
					if traced {
						if mode != "none" {
							continue
						}
						name = fmt.Sprintf("batch=%d/threads=%d/trace=0.01", size, threads)
					}
					b.Run(name, func(b *testing.B) { benchStream(b, size, threads, mode, traced) })
				}
			}
		}
	}
}

func benchStream(b *testing.B, size, threads int, mode string, traced bool) {
	var tr trace.Tracer
	if traced {
		tr = benchTracer(b, 0.01)
	}
	in := newBenchInput(b.N, size)
	out := &dropOutput{}
	var taps *tap.Set
	if mode != "none" {
		taps = &tap.Set{}
	}
	if mode == "attached" {
		tp := tap.New(tap.ProcessorPoint(1), tap.DefaultRate, 0, nil)
		defer taps.Attach(tp)()
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for {
				select {
				case <-tp.C():
				case <-stop:
					return
				}
			}
		}()
	}
	s, err := New(Config{ID: "bench", Input: in, Output: out, ThreadNum: threads, Taps: taps,
		Processors: []component.Processor{touchProc{}, touchProc{}}, Metrics: NewMetrics(nil), Tracer: tr})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	if err := s.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	el := time.Since(start)
	b.StopTimer()
	if got := out.msgs.Load(); got != int64(b.N*size) || in.acked.Load() != int64(b.N) {
		b.Fatalf("delivered %d messages, acked %d batches", got, in.acked.Load())
	}
	b.ReportMetric(float64(b.N*size)/el.Seconds(), "msgs/s")
}
