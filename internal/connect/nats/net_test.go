package nats_test

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/connect/nats"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sandbox"
)

// TestDialsThroughNet: the servers are dialled through the component's
// Net: one that refuses every address fails Connect with the refusal, one
// that allows them connects and publishes, having decided the connection.
func TestDialsThroughNet(t *testing.T) {
	ns := startServer(t)
	for _, tc := range []struct {
		name string
		why  string
	}{{"refused", "not allowed here"}, {"allowed", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			var decided atomic.Int32
			n := sandbox.Restrict(func(string, netip.Addr) string { decided.Add(1); return tc.why }, nil, "remote_policy.outbound_allow")
			out, err := nats.NewOutput(map[string]any{"url": ns.url(), "connect_timeout": "1s",
				"mode": map[string]any{"type": "regular", "subject": "x"}}, component.Resources{Net: n})
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close(testCtx(t))
			err = out.Connect(testCtx(t))
			if err == nil {
				err = out.Write(testCtx(t), message.Batch{Messages: []message.Message{message.New([]byte("x"))}})
			}
			if errors.Is(err, sandbox.ErrDenied) != (tc.why != "") || (tc.why == "" && err != nil) {
				t.Fatalf("Connect/Write = %v", err)
			}
			if decided.Load() == 0 {
				t.Error("no connection was decided by the Net")
			}
		})
	}
}
