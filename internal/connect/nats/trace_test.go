package nats_test

import (
	"context"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/connect/nats"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/tracing"
)

// TestOutputWritesTraceContext: the messages of a traced batch carry the
// batch's W3C trace context as headers, over a stale traceparent that
// metadata_headers copies from the input; an untraced batch carries what
// metadata_headers gives it and nothing more.
func TestOutputWritesTraceContext(t *testing.T) {
	const (
		current = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		stale   = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	)
	ns := startServer(t)
	nc, _ := ns.client()
	got := make(chan *natsgo.Msg, 4)
	sub, err := nc.ChanSubscribe("traced", got)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	out, err := nats.NewOutput(map[string]any{"url": ns.url(), "mode": map[string]any{"type": "regular", "subject": "traced"},
		"metadata_headers": true}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := out.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer out.Close(context.Background())
	m := message.New([]byte(`{}`))
	m.SetMeta(tracing.TraceParent, stale)
	sc := tracing.Remote(map[string]string{tracing.TraceParent: current, tracing.TraceState: "v=1"})
	for _, tc := range []struct {
		name       string
		ctx        context.Context
		parent, st string
	}{
		{"traced", trace.ContextWithSpanContext(ctx, sc), current, "v=1"},
		{"untraced", ctx, stale, ""},
	} {
		if err := out.Write(tc.ctx, message.Batch{Messages: []message.Message{m}}); err != nil {
			t.Fatal(err)
		}
		select {
		case msg := <-got:
			if p, s := msg.Header.Get(tracing.TraceParent), msg.Header.Get(tracing.TraceState); p != tc.parent || s != tc.st {
				t.Errorf("%s: traceparent %q tracestate %q, want %q %q", tc.name, p, s, tc.parent, tc.st)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no message", tc.name)
		}
	}
}
