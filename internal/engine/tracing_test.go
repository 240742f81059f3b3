package engine_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/confignet"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/tracing"
)

// collector is the OpenTelemetry Collector's own OTLP receiver on two
// loopback ports (OTLP/HTTP and OTLP/gRPC), keeping every span it gets.
type collector struct {
	sink          consumertest.TracesSink
	httpURL, grpc string // endpoints for tracing.Options
}

func startCollector(t *testing.T) *collector {
	t.Helper()
	c := &collector{}
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	hp, gp := loopbackPort(t), loopbackPort(t)
	h := cfg.Protocols.HTTP.GetOrInsertDefault()
	h.ServerConfig.NetAddr.Endpoint = "127.0.0.1:" + strconv.Itoa(hp)
	g := configgrpc.NewDefaultServerConfig()
	g.NetAddr = confignet.AddrConfig{Endpoint: "127.0.0.1:" + strconv.Itoa(gp), Transport: confignet.TransportTypeTCP}
	cfg.Protocols.GRPC = configoptional.Some(g)
	r, err := f.CreateTraces(context.Background(), receivertest.NewNopSettings(f.Type()), cfg, &c.sink)
	if err != nil {
		t.Fatalf("otlp receiver: %v", err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatalf("otlp receiver start: %v", err)
	}
	t.Cleanup(func() { _ = r.Shutdown(context.Background()) })
	c.httpURL = "http://127.0.0.1:" + strconv.Itoa(hp)
	c.grpc = "http://127.0.0.1:" + strconv.Itoa(gp)
	return c
}

// loopbackPort is a loopback port free a moment ago.
func loopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// provider is a tracer provider exporting to c over protocol at ratio.
// Flush shuts it down, which exports everything queued.
func (c *collector) provider(t *testing.T, protocol string, ratio float64) *tracing.Provider {
	t.Helper()
	ep := c.httpURL
	if protocol == tracing.ProtocolGRPC {
		ep = c.grpc
	}
	p, err := tracing.New(context.Background(), tracing.Options{
		Endpoint: ep, Protocol: protocol, SamplingRatio: ratio, ServiceName: "flowplane-test", NodeID: "a",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p
}

func flush(t *testing.T, p *tracing.Provider) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

// span is what the tests look at in an exported span.
type span struct {
	name, traceID, spanID, parent string
	service, instance             string
	attrs                         map[string]any
}

func (c *collector) spans() []span {
	var out []span
	for _, td := range c.sink.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			res := rs.Resource().Attributes()
			svc, _ := res.Get("service.name")
			inst, _ := res.Get("service.instance.id")
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					out = append(out, span{
						name: s.Name(), traceID: s.TraceID().String(), spanID: s.SpanID().String(),
						parent: parentOf(s), service: svc.AsString(), instance: inst.AsString(),
						attrs: s.Attributes().AsRaw(),
					})
				}
			}
		}
	}
	return out
}

func parentOf(s ptrace.Span) string {
	if s.ParentSpanID().IsEmpty() {
		return ""
	}
	return s.ParentSpanID().String()
}

// finiteStream is a stream of n generated messages, one per batch,
// through one processor.
func finiteStream(id string, n int) string {
	return `
  - id: ` + id + `
    input: {type: generate, context: '{"n": {{count}}}', interval: 0s, count: ` + strconv.Itoa(n) + `}
    pipeline: {processors: [{type: json}]}
    output: {type: drop}
`
}

// runTraced runs doc's streams on an engine traced by p until they end.
func runTraced(t *testing.T, p *tracing.Provider, doc string) {
	t.Helper()
	e := engine.New(engine.Options{StateDir: t.TempDir(), StopTimeout: 5 * time.Second, Tracer: p.Tracer()})
	t.Cleanup(func() { e.Shutdown(context.Background()) })
	if err := e.Apply(context.Background(), materialize(t, doc)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the streams to finish", e.Finished)
}

// TestStreamSpansReachTheCollector: with tracing on, every batch of a
// stream is a span with an input, a processor and an output span beneath
// it, exported over OTLP/HTTP and OTLP/gRPC to the collector's receiver,
// with the node's resource.
func TestStreamSpansReachTheCollector(t *testing.T) {
	for _, protocol := range []string{tracing.ProtocolHTTP, tracing.ProtocolGRPC} {
		t.Run(protocol, func(t *testing.T) {
			c := startCollector(t)
			p := c.provider(t, protocol, 1)
			const n = 3
			runTraced(t, p, "streams:"+finiteStream("s", n))
			flush(t, p)
			spans := c.spans()
			roots := map[string]span{}
			for _, s := range spans {
				if s.name == "stream s" {
					roots[s.spanID] = s
					if s.parent != "" || s.attrs["flowplane.stream"] != "s" || s.attrs["messaging.batch.message_count"] != int64(1) {
						t.Errorf("batch span %+v", s)
					}
					if s.service != "flowplane-test" || s.instance != "a" {
						t.Errorf("resource service.name %q service.instance.id %q", s.service, s.instance)
					}
				}
			}
			if len(roots) != n {
				t.Fatalf("%d batch spans, want %d (all spans: %+v)", len(roots), n, spans)
			}
			children := map[string]map[string]bool{}
			for _, s := range spans {
				r, ok := roots[s.parent]
				if !ok {
					continue
				}
				if s.traceID != r.traceID {
					t.Errorf("span %s of batch %s is in trace %s, not %s", s.name, r.spanID, s.traceID, r.traceID)
				}
				if children[s.parent] == nil {
					children[s.parent] = map[string]bool{}
				}
				children[s.parent][s.name] = true
			}
			for id := range roots {
				for _, want := range []string{"input", "processors[0]", "output"} {
					if !children[id][want] {
						t.Errorf("batch span %s has no %s span beneath it (has %v)", id, want, children[id])
					}
				}
			}
		})
	}
}

// TestSamplingRatio: ratio 0 exports no span at all, ratio 1 every batch.
func TestSamplingRatio(t *testing.T) {
	for _, tc := range []struct {
		ratio   float64
		batches int
	}{{0, 0}, {1, 20}} {
		t.Run(strconv.FormatFloat(tc.ratio, 'f', -1, 64), func(t *testing.T) {
			c := startCollector(t)
			p := c.provider(t, tracing.ProtocolHTTP, tc.ratio)
			runTraced(t, p, "streams:"+finiteStream("s", 20))
			flush(t, p)
			got := 0
			all := c.spans()
			for _, s := range all {
				if s.name == "stream s" {
					got++
				}
			}
			if got != tc.batches {
				t.Errorf("%d batch spans, want %d", got, tc.batches)
			}
			if tc.batches == 0 && len(all) != 0 {
				t.Errorf("ratio 0 exported %d spans", len(all))
			}
		})
	}
}
