package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sandbox"
	"github.com/flowplane/flowplane/internal/sandbox/sandboxtest"
)

// TestDialsThroughNet: the output's brokers are dialled through the
// component's Net: one that refuses every address fails Connect with the
// refusal, one that allows them connects and writes, having decided each
// connection.
func TestDialsThroughNet(t *testing.T) {
	addr := cluster(t, kfake.SeedTopics(1, "t")).ListenAddrs()[0]
	sandboxtest.DialsThroughNet(t, func(t *testing.T, _ string, n sandbox.Net) error {
		out, err := NewOutput(map[string]any{"brokers": []any{addr}, "topic": "t", "connect_timeout": "2s"}, component.Resources{Net: n})
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close(t.Context())
		if err := out.Connect(t.Context()); err != nil {
			return err
		}
		return out.Write(t.Context(), message.Batch{Messages: []message.Message{message.New([]byte("x"))}})
	})
}
