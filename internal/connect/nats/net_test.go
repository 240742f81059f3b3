package nats_test

import (
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/connect/nats"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sandbox"
	"github.com/flowplane/flowplane/internal/sandbox/sandboxtest"
)

// TestDialsThroughNet: the servers are dialled through the component's
// Net: one that refuses every address fails Connect with the refusal, one
// that allows them connects and publishes, having decided the connection.
func TestDialsThroughNet(t *testing.T) {
	ns := startServer(t)
	sandboxtest.DialsThroughNet(t, func(t *testing.T, _ string, n sandbox.Net) error {
		out, err := nats.NewOutput(map[string]any{"url": ns.url(), "connect_timeout": "1s",
			"mode": map[string]any{"type": "regular", "subject": "x"}}, component.Resources{Net: n})
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close(testCtx(t))
		if err := out.Connect(testCtx(t)); err != nil {
			return err
		}
		return out.Write(testCtx(t), message.Batch{Messages: []message.Message{message.New([]byte("x"))}})
	})
}
