package mqtt

import (
	"testing"

	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/sandbox"
	"github.com/flowplane/flowplane/internal/sandbox/sandboxtest"
)

// TestDialsThroughNet: the broker is dialled through the component's
// Net: one that refuses every address fails Connect with the refusal, one
// that allows it connects and publishes, having decided the connection.
func TestDialsThroughNet(t *testing.T) {
	b := startBroker(t)
	sandboxtest.DialsThroughNet(t, func(t *testing.T, name string, n sandbox.Net) error {
		res := quiet()
		res.Net = n
		out, err := NewOutput(map[string]any{"host": "127.0.0.1", "port": float64(b.port), "client_id": "net-" + name,
			"topic": "t/x", "connect_timeout_ms": float64(2000)}, res)
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
