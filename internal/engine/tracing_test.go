package engine_test

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/confignet"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/dataplane"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/kernel"
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

// provider is node's tracer provider exporting to c over protocol at
// ratio. flush shuts it down, which exports everything queued.
func (c *collector) provider(t *testing.T, protocol string, ratio float64, node string) *tracing.Provider {
	t.Helper()
	ep := c.httpURL
	if protocol == tracing.ProtocolGRPC {
		ep = c.grpc
	}
	p, err := tracing.New(context.Background(), tracing.Options{
		Endpoint: ep, Protocol: protocol, SamplingRatio: ratio, ServiceName: "flowplane-test", NodeID: node,
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
			p := c.provider(t, protocol, 1, "a")
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
			p := c.provider(t, tracing.ProtocolHTTP, tc.ratio, "a")
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

// kafkaTopic starts an in-process Kafka cluster holding topic and returns
// its broker's address.
func kafkaTopic(t *testing.T, topic string) string {
	t.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	return kc.ListenAddrs()[0]
}

// consumeOne reads the first record of topic on the cluster at addr.
func consumeOne(t *testing.T, addr, topic string) *kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if recs := fs.Records(); len(recs) > 0 {
			return recs[0]
		}
	}
	t.Fatalf("no record on %s", topic)
	return nil
}

// TestTraceparentFromHTTPToKafka: the traceparent of a request to the
// http input becomes the parent of the batch's span, and the record the
// kafka output writes carries the same trace in its headers, its parent
// being the batch's output span.
func TestTraceparentFromHTTPToKafka(t *testing.T) {
	c := startCollector(t)
	p := c.provider(t, tracing.ProtocolHTTP, 0, "a") // the incoming sampled parent decides
	broker := kafkaTopic(t, "out")
	addr := "127.0.0.1:" + strconv.Itoa(loopbackPort(t))
	e := engine.New(engine.Options{StateDir: t.TempDir(), StopTimeout: 5 * time.Second, Tracer: p.Tracer()})
	t.Cleanup(func() { e.Shutdown(context.Background()) })
	doc := `streams:
  - id: ingest
    input: {type: http, address: "` + addr + `", path: /in}
    pipeline: {processors: [{type: json}]}
    output: {type: kafka, brokers: ["` + broker + `"], topic: {type: value, value: out}}
`
	if err := e.Apply(context.Background(), materialize(t, doc)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stream running", e.Ready)
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanID  = "00f067aa0ba902b7"
	)
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/in", strings.NewReader(`{"order": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("traceparent", "00-"+traceID+"-"+spanID+"-01")
	req.Header.Set("tracestate", "vendor=x")
	var resp *http.Response
	waitFor(t, "the http input to take the request", func() bool {
		r, err := http.DefaultClient.Do(req.Clone(context.Background()))
		if err == nil {
			resp = r
			resp.Body.Close()
		}
		return err == nil
	})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST answered %d", resp.StatusCode)
	}
	rec := consumeOne(t, broker, "out")
	hdr := map[string]string{}
	for _, h := range rec.Headers {
		hdr[h.Key] = string(h.Value)
	}
	e.Shutdown(context.Background())
	flush(t, p)

	var batch, output span
	for _, s := range c.spans() {
		switch s.name {
		case "stream ingest":
			batch = s
		case "output":
			output = s
		}
	}
	if batch.traceID != traceID || batch.parent != spanID {
		t.Errorf("batch span in trace %q under %q, want trace %s under the request's span %s", batch.traceID, batch.parent, traceID, spanID)
	}
	if output.parent != batch.spanID || output.traceID != traceID {
		t.Errorf("output span %+v is not beneath the batch span %s", output, batch.spanID)
	}
	if want := "00-" + traceID + "-" + output.spanID + "-01"; hdr["traceparent"] != want {
		t.Errorf("record header traceparent %q, want %q (the output span)", hdr["traceparent"], want)
	}
	if hdr["tracestate"] != "vendor=x" {
		t.Errorf("record header tracestate %q, want the request's vendor=x", hdr["tracestate"])
	}
}

// TestTraceAcrossASplitJob: one trace follows a record from an HTTP
// request into a job's source on node a, across the data plane to its
// sink on node b, and into the headers of the Kafka record b writes; each
// node exports its own spans, with its own service.instance.id.
func TestTraceAcrossASplitJob(t *testing.T) {
	c := startCollector(t)
	broker := kafkaTopic(t, "out")
	addr := "127.0.0.1:" + strconv.Itoa(loopbackPort(t))
	spec := config.Job{
		ID: "split", Version: 1, Parallelism: 1, MaxParallelism: 8,
		Operators: []config.Operator{
			{ID: "src", Kind: "source"},
			// At another parallelism than the source, the sink is not
			// chained to it: the edge can cross nodes.
			{ID: "out", Kind: "sink", Parallelism: 2},
		},
		Edges: []config.Edge{{From: "src", To: "out"}},
		Sources: []config.Source{{OperatorID: "src", InputType: "http", Config: map[string]any{
			"address": addr, "path": "/in",
		}}},
		Sinks: []config.Sink{{OperatorID: "out", OutputType: "kafka", Config: map[string]any{
			"brokers": []any{broker}, "topic": map[string]any{"type": "value", "value": "out"},
		}}},
	}
	plan, ps := job.Build("jobs[0]", spec)
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	taskNodes := map[string]string{}
	for _, tk := range plan.Tasks {
		taskNodes[tk.ID] = "b"
		if strings.HasPrefix(tk.ID, "src") {
			taskNodes[tk.ID] = "a"
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srvs := map[string]*dataplane.Server{}
	peers := map[string]dataplane.Peer{}
	for _, id := range []string{"a", "b"} {
		srv, err := dataplane.Listen(dataplane.Options{Addr: "127.0.0.1:0", NodeID: id})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		srvs[id] = srv
		peers[id] = dataplane.Peer{Addr: srv.Addr(), Fingerprint: srv.Fingerprint()}
	}
	providers := map[string]*tracing.Provider{}
	var dones []<-chan error
	for _, id := range []string{"a", "b"} {
		p := c.provider(t, tracing.ProtocolGRPC, 0, id)
		providers[id] = p
		mesh, err := srvs[id].Join(plan.JobID, testDataSecret, peers)
		if err != nil {
			t.Fatal(err)
		}
		j, err := kernel.Build("jobs[0]", plan, kernel.Options{
			Registry: component.Default, Spec: &spec, StateRoot: t.TempDir(), Tracer: p.Tracer(),
			Split: &kernel.Split{Self: id, TaskNodes: taskNodes, Mesh: mesh},
		})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		dones = append(dones, done)
		go func() {
			done <- j.Run(ctx)
			j.Close()
			mesh.Close()
		}()
	}
	const (
		traceID = "0af7651916cd43dd8448eb211c80319c"
		spanID  = "b7ad6b7169203331"
	)
	waitFor(t, "the job's http source to take a request", func() bool {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/in", strings.NewReader(`{"order": 7}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("traceparent", "00-"+traceID+"-"+spanID+"-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	rec := consumeOne(t, broker, "out")
	cancel()
	for _, d := range dones {
		<-d
	}
	for _, id := range []string{"a", "b"} {
		flush(t, providers[id])
	}

	var src, sink span
	for _, s := range c.spans() {
		switch s.name {
		case "job split src#0":
			src = s
		case "job split out#0", "job split out#1":
			sink = s
		}
	}
	if src.traceID != traceID || src.parent != spanID || src.instance != "a" {
		t.Errorf("source span %+v: want trace %s under the request's span %s, from node a", src, traceID, spanID)
	}
	if sink.traceID != traceID || sink.parent != src.spanID || sink.instance != "b" {
		t.Errorf("sink span %+v: want trace %s under the source span %s, from node b", sink, traceID, src.spanID)
	}
	var tp string
	for _, h := range rec.Headers {
		if h.Key == "traceparent" {
			tp = string(h.Value)
		}
	}
	if want := "00-" + traceID + "-" + sink.spanID + "-01"; tp != want {
		t.Errorf("record header traceparent %q, want %q (node b's sink span)", tp, want)
	}
}
