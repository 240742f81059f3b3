package mqtt

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/message"
)

func outputConf(b *broker, clientID string, extra map[string]any) map[string]any {
	c := map[string]any{
		"host": "127.0.0.1", "port": float64(b.port), "client_id": clientID,
		"topic": "t/out", "qos": float64(1), "connect_timeout_ms": float64(2000),
	}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

func newOutput(t testing.TB, conf map[string]any) *Output {
	t.Helper()
	o, err := NewOutput(conf, quiet())
	if err != nil {
		t.Fatal(err)
	}
	return o.(*Output)
}

func batchOf(payloads ...string) message.Batch {
	var b message.Batch
	for _, p := range payloads {
		b.Messages = append(b.Messages, message.New([]byte(p)))
	}
	return b
}

// recorder collects what the broker routes to an inline subscription.
type recorder struct {
	mu   sync.Mutex
	msgs []packets.Packet
}

func (r *recorder) record(_ *mochi.Client, _ packets.Subscription, pk packets.Packet) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, pk)
}

func (r *recorder) snapshot() []packets.Packet {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]packets.Packet(nil), r.msgs...)
}

func subscribe(t testing.TB, b *broker, filter string, id int) *recorder {
	t.Helper()
	r := &recorder{}
	if err := b.server().Subscribe(filter, id, r.record); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestOutputExample(t *testing.T) {
	conf := componenttest.Example(t, component.Default, component.KindOutput, "mqtt")
	if _, err := NewOutput(conf, quiet()); err != nil {
		t.Fatal(err)
	}
}

// TestOutputQoS publishes at each QoS with a topic from an expression
// and the retain flag; Write returning nil means the broker has them.
func TestOutputQoS(t *testing.T) {
	b := startBroker(t)
	for i, qos := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("qos%d", qos), func(t *testing.T) {
			prefix := fmt.Sprintf("o%d", qos)
			rec := subscribe(t, b, prefix+"/#", i+1)
			out := newOutput(t, outputConf(b, "out-"+prefix, map[string]any{
				"qos": float64(qos), "retain": true,
				"topic": map[string]any{"type": "expr", "expr": `"` + prefix + `/" + this.dev`},
			}))
			ctx := testCtx(t)
			if err := out.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			defer out.Close(ctx)
			var want []string
			for n := range 20 {
				want = append(want, fmt.Sprintf(`{"dev":"d%d","n":%d}`, n%2, n))
			}
			if err := out.Write(ctx, batchOf(want...)); err != nil {
				t.Fatal(err)
			}
			componenttest.WaitFor(t, "20 messages at the subscriber", 10*time.Second, func() bool { return len(rec.snapshot()) >= 20 })
			var got []string
			for k, pk := range rec.snapshot() {
				got = append(got, string(pk.Payload))
				if want := fmt.Sprintf("%s/d%d", prefix, k%2); pk.TopicName != want {
					t.Errorf("message %d went to %q, want %q", k, pk.TopicName, want)
				}
				if pk.FixedHeader.Qos != byte(qos) || !pk.FixedHeader.Retain {
					t.Errorf("message %d: qos %d retain %v, want qos %d retained", k, pk.FixedHeader.Qos, pk.FixedHeader.Retain, qos)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("published (-want +got):\n%s", diff)
			}
			// Retained: the broker keeps the last message of each topic.
			if n := len(b.server().Topics.Retained.GetAll()); n < 2 {
				t.Errorf("%d retained topics, want at least 2", n)
			}
			_ = b.server().Unsubscribe(prefix+"/#", i+1)
		})
	}
}

// TestOutputBadTopicFromExpression: a topic that evaluates to a wildcard
// fails the Write, naming it.
func TestOutputBadTopicFromExpression(t *testing.T) {
	b := startBroker(t)
	out := newOutput(t, outputConf(b, "out-bad", map[string]any{"topic": map[string]any{"type": "expr", "expr": "this.t"}}))
	ctx := testCtx(t)
	if err := out.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer out.Close(ctx)
	err := out.Write(ctx, batchOf(`{"t":"a/#"}`))
	if err == nil || !containsAll(err.Error(), "topic", "a/#") {
		t.Fatalf("Write = %v, want an error naming the topic", err)
	}
}
