package nats_test

import (
	"context"
	"errors"
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
