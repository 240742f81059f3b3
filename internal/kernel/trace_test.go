package kernel

import (
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/flowplane/flowplane/internal/dataplane"
	"github.com/flowplane/flowplane/internal/operator"
)

// TestBatchFrameTraceTrailer: a batch's span context travels in the
// optional trailer of its frame and comes back as a remote span context;
// a frame without it (an untraced batch, or a release before tracing)
// decodes with none; a damaged trailer is a corrupt frame.
func TestBatchFrameTraceTrailer(t *testing.T) {
	ts, err := trace.ParseTraceState("vendor=x,other=y")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x0a, 0xf7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},
		SpanID:     trace.SpanID{0xb7, 1, 2, 3, 4, 5, 6, 7},
		TraceFlags: trace.FlagsSampled,
		TraceState: ts,
	})
	recs := []operator.Record{{Time: 5, Value: map[string]any{"a": 1.0}}}
	for _, tc := range []struct {
		name string
		in   *trace.SpanContext
	}{{"traced", &sc}, {"untraced", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := encodeElement(element{kind: elemData, recs: recs, tc: tc.in}, nil)
			if err != nil {
				t.Fatal(err)
			}
			e, err := decodeElement(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(e.recs) != 1 || e.recs[0].Time != 5 {
				t.Errorf("records %+v", e.recs)
			}
			switch {
			case tc.in == nil && e.tc != nil:
				t.Errorf("untraced frame decoded with span context %v", *e.tc)
			case tc.in != nil && (e.tc == nil || !e.tc.Equal(sc.WithRemote(true))):
				t.Errorf("span context %v, want %v (remote)", e.tc, sc)
			}
		})
	}
	f, err := encodeElement(element{kind: elemData, recs: recs, tc: &sc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := encodeElement(element{kind: elemData, recs: recs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := len(plain.Payload) // where the trailer starts
	for name, payload := range map[string][]byte{
		"cut":         f.Payload[:len(f.Payload)-3],
		"unknown tag": append(append(append([]byte{}, f.Payload[:n]...), 0x02), f.Payload[n+1:]...),
		"extra byte":  append(append([]byte{}, f.Payload...), 0),
		"zero ids":    append(append(append([]byte{}, f.Payload[:n+1]...), make([]byte, 25)...), f.Payload[n+26:]...),
	} {
		if _, err := decodeElement(dataplane.Frame{Kind: dataplane.KindBatch, Payload: payload}); err == nil {
			t.Errorf("%s: a damaged trailer decoded", name)
		}
	}
}
