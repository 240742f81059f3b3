package mqtt

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sandbox"
)

// TestDialsThroughNet: the broker is dialled through the component's
// Net: one that refuses every address fails Connect with the refusal, one
// that allows it connects and publishes, having decided the connection.
func TestDialsThroughNet(t *testing.T) {
	b := startBroker(t)
	for _, tc := range []struct {
		name string
		why  string
	}{{"refused", "not allowed here"}, {"allowed", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			var decided atomic.Int32
			res := quiet()
			res.Net = sandbox.Restrict(func(string, netip.Addr) string { decided.Add(1); return tc.why }, nil, "remote_policy.outbound_allow")
			out, err := NewOutput(map[string]any{"host": "127.0.0.1", "port": float64(b.port), "client_id": "net-" + tc.name,
				"topic": "t/x", "connect_timeout_ms": float64(2000)}, res)
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
