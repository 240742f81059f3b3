package kafka

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sandbox"
)

// TestDialsThroughNet: the output's brokers are dialled through the
// component's Net: one that refuses every address fails Connect with the
// refusal, one that allows them connects and writes, having decided each
// connection.
func TestDialsThroughNet(t *testing.T) {
	addr := cluster(t, kfake.SeedTopics(1, "t")).ListenAddrs()[0]
	for _, tc := range []struct {
		name string
		why  string
	}{{"refused", "not allowed here"}, {"allowed", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			var decided atomic.Int32
			n := sandbox.Restrict(func(string, netip.Addr) string { decided.Add(1); return tc.why }, nil, "remote_policy.outbound_allow")
			out, err := NewOutput(map[string]any{"brokers": []any{addr}, "topic": "t", "connect_timeout": "2s"}, component.Resources{Net: n})
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close(t.Context())
			err = out.Connect(t.Context())
			if err == nil {
				err = out.Write(t.Context(), message.Batch{Messages: []message.Message{message.New([]byte("x"))}})
			}
			if got := errors.Is(err, sandbox.ErrDenied); got != (tc.why != "") || (tc.why == "" && err != nil) {
				t.Fatalf("Connect/Write = %v", err)
			}
			if decided.Load() == 0 {
				t.Error("no connection was decided by the Net")
			}
		})
	}
}
