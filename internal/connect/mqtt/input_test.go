package mqtt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
)

func TestInputExample(t *testing.T) {
	conf := componenttest.Example(t, component.Default, component.KindInput, "mqtt")
	if _, err := NewInput(conf, quiet()); err != nil {
		t.Fatal(err)
	}
}

// TestInputQoS receives at each QoS, in order, with the broker facts in
// the metadata.
func TestInputQoS(t *testing.T) {
	b := startBroker(t)
	for _, qos := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("qos%d", qos), func(t *testing.T) {
			topic := fmt.Sprintf("t/q%d", qos)
			in := connectInput(t, inputConf(b, fmt.Sprintf("in-q%d", qos), map[string]any{
				"qos": float64(qos), "topics": []any{topic}, "batch_size": float64(7),
			}))
			want := seq("m", 50)
			props := &paho.PublishProperties{User: paho.UserProperties{{Key: "device", Value: "d1"}}}
			publish(t, b, topic, byte(qos), props, want...)
			got := readN(t, in, len(want), nil)
			if diff := cmp.Diff(want, payloads(got)); diff != "" {
				t.Errorf("payloads (-want +got):\n%s", diff)
			}
			m := got[0].Meta
			wantFields := map[string]string{
				"mqtt_topic": topic, "mqtt_qos": fmt.Sprint(qos), "mqtt_retained": "false",
				"mqtt_duplicate": "false", "device": "d1",
			}
			if m.Source != topic {
				t.Errorf("Source = %q, want %q", m.Source, topic)
			}
			if diff := cmp.Diff(wantFields, m.Fields); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
}

// TestInputPersistentSession: with clean_session false, messages read
// but not acknowledged before Close, and messages published while the
// client was away, all arrive when the client comes back; acknowledged
// ones do not arrive again.
func TestInputPersistentSession(t *testing.T) {
	b := startBroker(t)
	for _, qos := range []int{1, 2} {
		t.Run(fmt.Sprintf("qos%d", qos), func(t *testing.T) {
			topic := fmt.Sprintf("t/p%d", qos)
			conf := inputConf(b, fmt.Sprintf("in-p%d", qos), map[string]any{
				"qos": float64(qos), "topics": []any{topic}, "clean_session": false, "batch_size": float64(5),
			})
			// 1. Read 10 and never acknowledge them (the stream crashed).
			first := newInput(t, conf)
			if err := first.Connect(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			publish(t, b, topic, byte(qos), nil, seq("a", 10)...)
			ctx := testCtx(t)
			var unacked int
			for unacked < 10 {
				batch, _, err := first.Read(ctx)
				if err != nil {
					t.Fatal(err)
				}
				unacked += batch.Len()
			}
			if err := first.Close(ctx); err != nil {
				t.Fatal(err)
			}
			// 2. Published while the client is away.
			publish(t, b, topic, byte(qos), nil, seq("b", 5)...)
			b.waitHeld(t, fmt.Sprintf("in-p%d", qos), 15)

			// 3. Back: all 15 arrive; acknowledge them.
			second := newInput(t, conf)
			if err := second.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			// mochi resends a resumed session's messages in no particular
			// order (MQTT asks for the original order), so compare sets.
			got := payloads(readN(t, second, 15, nil))
			want := append(seq("a", 10), seq("b", 5)...)
			slices.Sort(got)
			slices.Sort(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("after reconnect (-want +got):\n%s", diff)
			}
			b.waitReleased(t, fmt.Sprintf("in-p%d", qos))
			if err := second.Close(ctx); err != nil {
				t.Fatal(err)
			}
			b.waitClosed(t, fmt.Sprintf("in-p%d", qos))

			// 4. Acknowledged ones are not delivered again: the next
			// message is the marker published after.
			third := connectInput(t, conf)
			publish(t, b, topic, byte(qos), nil, "marker")
			if got := payloads(readN(t, third, 1, nil)); got[0] != "marker" {
				t.Errorf("after acknowledging, got %q first, want the marker", got[0])
			}
		})
	}
}

// TestInputFailedAckRedelivers: a batch acknowledged with an error is
// read again, and its messages are acknowledged to the broker only once
// it succeeds.
func TestInputFailedAckRedelivers(t *testing.T) {
	b := startBroker(t)
	conf := inputConf(b, "in-nack", map[string]any{"topics": []any{"t/n"}, "clean_session": false, "batch_size": float64(3)})
	in := newInput(t, conf)
	ctx := testCtx(t)
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	publish(t, b, "t/n", 1, nil, "x")
	b1, ack1, err := in.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ack1(ctx, errors.New("sink down")); err != nil {
		t.Fatal(err)
	}
	b2, ack2, err := in.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(payloads(b1.Messages), payloads(b2.Messages)); diff != "" {
		t.Errorf("redelivered batch differs (-first +second):\n%s", diff)
	}
	if err := ack2(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := in.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b.waitClosed(t, "in-nack")
	again := connectInput(t, conf)
	publish(t, b, "t/n", 1, nil, "marker")
	if got := payloads(readN(t, again, 1, nil)); got[0] != "marker" {
		t.Errorf("got %q, want the marker: the redelivered batch was not acknowledged", got[0])
	}
}

// TestInputReadHonoursContext: Read returns when ctx ends.
func TestInputReadHonoursContext(t *testing.T) {
	b := startBroker(t)
	in := connectInput(t, inputConf(b, "in-ctx", nil))
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	if _, _, err := in.Read(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read = %v, want context.Canceled", err)
	}
}

// TestConnectBrokerDown: Connect fails with an error naming the broker,
// and succeeds when called again once the broker is up.
func TestConnectBrokerDown(t *testing.T) {
	b := newBroker(t) // not started
	in := newInput(t, inputConf(b, "in-down", map[string]any{"connect_timeout_ms": float64(500)}))
	out := newOutput(t, outputConf(b, "out-down", nil))
	ctx := testCtx(t)
	for name, connect := range map[string]func(context.Context) error{"input": in.Connect, "output": out.Connect} {
		err := connect(ctx)
		if err == nil {
			t.Fatalf("%s: Connect succeeded with the broker down", name)
		}
		if !strings.Contains(err.Error(), b.addr()) || !strings.Contains(err.Error(), "refused") {
			t.Errorf("%s: error %q does not name the broker and the refusal", name, err)
		}
	}
	b.start()
	if err := in.Connect(ctx); err != nil {
		t.Fatalf("input: second Connect: %v", err)
	}
	defer in.Close(ctx)
	if err := out.Connect(ctx); err != nil {
		t.Fatalf("output: second Connect: %v", err)
	}
	defer out.Close(ctx)
	if err := out.Write(ctx, batchOf("up")); err != nil {
		t.Fatal(err)
	}
	// The output's client id differs; the input subscribed t/#.
	if got := payloads(readN(t, in, 1, nil)); got[0] != "up" {
		t.Errorf("got %q", got[0])
	}
}

// TestConnectBadCredentials: a broker refusing the credentials gives a
// Connect error; the password is not in it.
func TestConnectBadCredentials(t *testing.T) {
	b := newBroker(t)
	b.user, b.pass = "flow", "s3cret-right"
	b.start()
	in := newInput(t, inputConf(b, "in-auth", map[string]any{"username": "flow", "password": "s3cret-wrong"}))
	ctx := testCtx(t)
	err := in.Connect(ctx)
	if err == nil {
		t.Fatal("Connect succeeded with a wrong password")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error %q holds the password", err)
	}
	good := connectInput(t, inputConf(b, "in-auth2", map[string]any{"username": "flow", "password": "s3cret-right", "topics": []any{"t/a"}}))
	publish(t, b, "t/a", 1, nil, "ok")
	if got := payloads(readN(t, good, 1, nil)); got[0] != "ok" {
		t.Errorf("got %q", got[0])
	}
}

// TestInputReconnects: the client reconnects and subscribes again after
// the broker restarts, also when the broker lost its state.
func TestInputReconnects(t *testing.T) {
	b := startBroker(t)
	in := connectInput(t, inputConf(b, "in-re", map[string]any{"topics": []any{"t/r"}}))
	publish(t, b, "t/r", 1, nil, "before")
	readOne(t, in)
	b.stop()
	b.store.mu.Lock()
	b.store.kv = map[string][]byte{} // a broker without persistence forgets the subscription
	b.store.mu.Unlock()
	b.start()
	deadline := time.Now().Add(15 * time.Second)
	// Publish until the resubscribed client receives (the subscription is
	// back a moment after the reconnect).
	for {
		publish(t, b, "t/r", 1, nil, "after")
		ctx, cancel := context.WithTimeout(testCtx(t), 200*time.Millisecond)
		batch, ack, err := in.Read(ctx)
		cancel()
		if err == nil {
			_ = ack(context.Background(), nil)
			if got := payloads(batch.Messages); got[0] != "after" {
				t.Fatalf("got %q", got[0])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no message after the broker restarted")
		}
	}
}
