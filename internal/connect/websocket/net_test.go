package websocket_test

import (
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/connect/websocket"
	"github.com/flowplane/flowplane/internal/sandbox"
	"github.com/flowplane/flowplane/internal/sandbox/sandboxtest"
)

// TestDialsThroughNet: the server is dialled through the component's
// Net: one that refuses every address fails Connect with the refusal, one
// that allows it connects, having decided the connection.
func TestDialsThroughNet(t *testing.T) {
	s := startServer(t)
	sandboxtest.DialsThroughNet(t, func(t *testing.T, _ string, n sandbox.Net) error {
		in, err := websocket.NewInput(map[string]any{"url": s.url()}, component.Resources{Net: n})
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close(testCtx(t))
		return in.Connect(testCtx(t))
	})
}
