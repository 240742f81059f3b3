package mqtt

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func quiet() component.Resources {
	return component.Resources{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// inputConf is an input configuration for b; extra overrides fields.
func inputConf(b *broker, clientID string, extra map[string]any) map[string]any {
	c := map[string]any{
		"host": "127.0.0.1", "port": float64(b.port), "client_id": clientID,
		"topics": []any{"t/#"}, "qos": float64(1), "connect_timeout_ms": float64(2000),
	}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

func newInput(t testing.TB, conf map[string]any) *Input {
	t.Helper()
	in, err := NewInput(conf, quiet())
	if err != nil {
		t.Fatal(err)
	}
	return in.(*Input)
}

func connectInput(t testing.TB, conf map[string]any) *Input {
	t.Helper()
	in := newInput(t, conf)
	if err := in.Connect(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(context.Background()) })
	return in
}

// readN reads until n messages arrived (bounded by the test context),
// acknowledging each batch with ackErr.
func readN(t testing.TB, in *Input, n int, ackErr error) []message.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(testCtx(t), 15*time.Second)
	defer cancel()
	var got []message.Message
	for len(got) < n {
		b, ack, err := in.Read(ctx)
		if err != nil {
			t.Fatalf("after %d of %d messages: %v", len(got), n, err)
		}
		got = append(got, b.Messages...)
		if err := ack(ctx, ackErr); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// readOne reads one message and acknowledges it.
func readOne(t testing.TB, in *Input) message.Message {
	t.Helper()
	return readN(t, in, 1, nil)[0]
}

// publish sends msgs to topic with a plain paho client of its own,
// waiting for each acknowledgement.
func publish(t testing.TB, b *broker, topic string, qos byte, props *paho.PublishProperties, msgs ...string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", b.addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: conn})
	ctx := testCtx(t)
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: fmt.Sprintf("pub-%d", time.Now().UnixNano()), CleanStart: true, KeepAlive: 30,
		Username: b.user, UsernameFlag: b.user != "", Password: []byte(b.pass), PasswordFlag: b.pass != ""}); err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(&paho.Disconnect{})
	for _, m := range msgs {
		if _, err := c.Publish(ctx, &paho.Publish{Topic: topic, QoS: qos, Payload: []byte(m), Properties: props}); err != nil {
			t.Fatal(err)
		}
	}
	if qos == 0 {
		// Nothing confirms a QoS 0 publish: end with one at QoS 1 on a
		// topic nobody reads, whose PUBACK says the broker has taken every
		// packet before it on this connection, so Disconnect loses none.
		if _, err := c.Publish(ctx, &paho.Publish{Topic: "sync/" + topic, QoS: 1, Payload: []byte("sync")}); err != nil {
			t.Fatal(err)
		}
	}
}

func payloads(ms []message.Message) []string {
	out := make([]string, len(ms))
	for i := range ms {
		p, _ := ms[i].Payload()
		out[i] = string(p)
	}
	return out
}

func seq(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}
