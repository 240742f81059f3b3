package nats_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/connect/nats"
	"github.com/flowplane/flowplane/internal/message"
)

// TestOutageSurfacesErrors: while the server is down, Read and Write fail
// with ErrNotConnected instead of hanging, and both work again once the
// client has reconnected to the restarted server.
func TestOutageSurfacesErrors(t *testing.T) {
	ns := startServer(t)
	_, js := ns.client()
	createStream(t, js, "OUT", "out.>")
	conn := map[string]any{"url": ns.url(), "reconnect_wait": "100ms"}
	with := func(kv map[string]any) map[string]any {
		for k, v := range conn {
			kv[k] = v
		}
		return kv
	}
	core, err := nats.NewInput(with(map[string]any{"mode": map[string]any{"type": "regular", "subject": "out.>"}}), component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := nats.NewOutput(with(map[string]any{"timeout": "1s",
		"mode": map[string]any{"type": "jet_stream", "subject": "out.a", "msg_id": map[string]any{"type": "expr", "expr": "this.id"}}}),
		component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []interface{ Connect(context.Context) error }{core, out} {
		if err := c.Connect(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = core.Close(context.Background()); _ = out.Close(context.Background()) })
	batch := message.Batch{Messages: []message.Message{message.New([]byte(`{"id":1}`))}}
	if err := out.Write(testCtx(t), batch); err != nil {
		t.Fatalf("write: %v", err)
	}
	if b, _, err := core.Read(testCtx(t)); err != nil || b.Len() != 1 {
		t.Fatalf("read: %d messages, %v", b.Len(), err)
	}

	ns.stop()
	// A Read that was waiting when the connection dropped, and Reads and
	// Writes after, fail rather than hang (the bound is the test's ctx).
	componenttest.WaitFor(t, "Read to report the outage", 10*time.Second, func() bool {
		_, _, err := core.Read(testCtx(t))
		return errors.Is(err, nats.ErrNotConnected)
	})
	componenttest.WaitFor(t, "Write to report the outage", 10*time.Second, func() bool {
		return errors.Is(out.Write(testCtx(t), batch), nats.ErrNotConnected)
	})

	ns.start()
	componenttest.WaitFor(t, "Write to work again", 20*time.Second, func() bool { return out.Write(testCtx(t), batch) == nil })
	if got := streamMsgs(t, js, "OUT"); got != 1 {
		t.Errorf("OUT holds %d messages, want 1 (the rewrites carry the same Nats-Msg-Id)", got)
	}
	// Core NATS is at-most-once: what is published before the input's own
	// connection has resubscribed is not delivered, so publish until a
	// message arrives.
	componenttest.WaitFor(t, "Read to work again", 20*time.Second, func() bool {
		if err := out.Write(testCtx(t), batch); err != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		b, _, err := core.Read(ctx)
		return err == nil && b.Len() >= 1
	})
}

// TestDeletedConsumerIsRecreated: when the durable consumer disappears
// under a running input, Read reports it and the next Read creates it
// again, so the stream goes on.
func TestDeletedConsumerIsRecreated(t *testing.T) {
	ns := startServer(t)
	_, js := ns.client()
	createStream(t, js, "IN", "in.>")
	in, err := nats.NewInput(map[string]any{"url": ns.url(), "max_wait": "300ms",
		"mode": map[string]any{"type": "jet_stream", "stream": "IN", "consumer_name": "c"}}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Connect(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(context.Background()) })
	if err := js.DeleteConsumer(testCtx(t), "IN", "c"); err != nil {
		t.Fatal(err)
	}
	publish(t, js, "in.x", 0, 1)
	var errs []error
	componenttest.WaitFor(t, "the message read through the recreated consumer", 10*time.Second, func() bool {
		b, ack, err := in.Read(testCtx(t))
		if err != nil {
			errs = append(errs, err)
			return false
		}
		return b.Len() == 1 && ack(testCtx(t), nil) == nil
	})
	if len(errs) == 0 || !strings.Contains(errs[0].Error(), `consumer "c" of stream "IN" is gone`) {
		t.Errorf("errors before the consumer was recreated: %v", errs)
	}
}
