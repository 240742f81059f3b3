package tracing

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Protocols of the OTLP exporter.
const (
	ProtocolHTTP = "http"
	ProtocolGRPC = "grpc"
)

// ScopeName is the instrumentation scope of every span flowplane makes.
const ScopeName = "github.com/flowplane/flowplane"

// Options configures a Provider. They are the `tracing` configuration
// section, without its enabled switch: a disabled section makes no
// Provider at all.
type Options struct {
	// Endpoint is the collector's URL: http://host:port or https://host:port,
	// with a path for the http protocol when it is not /v1/traces.
	Endpoint string
	// Protocol is ProtocolHTTP (OTLP/HTTP protobuf) or ProtocolGRPC.
	Protocol string
	// SamplingRatio is the fraction of batches without a parent that are
	// traced, from 0 to 1 (decided per batch). A batch whose parent (an
	// incoming traceparent) was sampled is traced whatever the ratio: the
	// caller decided, and a trace across nodes must not lose its middle.
	SamplingRatio float64
	// ServiceName is the resource's service.name.
	ServiceName string
	// NodeID, when set, is the resource's service.instance.id.
	NodeID string
	// Timeout bounds one export; zero means the exporter's default (10 s).
	Timeout time.Duration
}

// ErrOptions wraps every problem New finds in its Options.
var ErrOptions = errors.New("tracing: invalid options")

// Provider owns one OpenTelemetry tracer provider and its exporter.
type Provider struct {
	tp    *sdktrace.TracerProvider
	ratio float64
}

// New builds a provider exporting to o.Endpoint. It does not connect:
// the exporter sends in the background, and an unreachable collector
// costs dropped spans, never a stalled stream.
func New(ctx context.Context, o Options) (*Provider, error) {
	// The configuration checked the endpoint (config.Tracing); this is the
	// last line of defence for other callers.
	u, err := url.Parse(o.Endpoint)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%w: endpoint is not an http:// or https:// URL", ErrOptions)
	}
	if o.SamplingRatio < 0 || o.SamplingRatio > 1 {
		return nil, fmt.Errorf("%w: sampling ratio %v is outside 0 to 1", ErrOptions, o.SamplingRatio)
	}
	insecure := u.Scheme == "http"
	var exp sdktrace.SpanExporter
	switch o.Protocol {
	case ProtocolHTTP, "":
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(u.Host)}
		if insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if p := strings.TrimSuffix(u.Path, "/"); p != "" {
			opts = append(opts, otlptracehttp.WithURLPath(u.Path))
		}
		if o.Timeout > 0 {
			opts = append(opts, otlptracehttp.WithTimeout(o.Timeout))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	case ProtocolGRPC:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(u.Host)}
		if insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if o.Timeout > 0 {
			opts = append(opts, otlptracegrpc.WithTimeout(o.Timeout))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	default:
		return nil, fmt.Errorf("%w: protocol %q is not http or grpc", ErrOptions, o.Protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", o.ServiceName)}
	if o.NodeID != "" {
		attrs = append(attrs, attribute.String("service.instance.id", o.NodeID))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		// Roots reaching the SDK were chosen by rootSampler already.
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
	)
	return &Provider{tp: tp, ratio: o.SamplingRatio}, nil
}

// Tracer returns the tracer of the runtime; nil for a nil Provider, which
// is how "tracing off" reaches the hot path.
func (p *Provider) Tracer() trace.Tracer {
	if p == nil {
		return nil
	}
	return &rootSampler{Tracer: p.tp.Tracer(ScopeName), ratio: p.ratio}
}

// rootSampler decides whether a new trace starts before the SDK is asked:
// a root that is not sampled costs neither a span nor a context (Start
// returns ctx and the no-op span), which is what keeps 1% sampling cheap
// on the per-batch path. A span with a parent (an incoming traceparent, a
// stage of a traced batch) goes to the SDK, whose parent-based sampler
// follows the parent.
type rootSampler struct {
	trace.Tracer
	ratio float64
}

func (r *rootSampler) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if r.ratio < 1 && !trace.SpanContextFromContext(ctx).IsValid() && rand.Float64() >= r.ratio {
		return ctx, trace.SpanFromContext(ctx)
	}
	return r.Tracer.Start(ctx, name, opts...)
}

// Shutdown exports what is queued and stops the provider; ctx bounds the
// flush. A nil Provider has nothing to do.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}
