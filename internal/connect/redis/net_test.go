package redis

import (
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/sandbox"
	"github.com/flowplane/flowplane/internal/sandbox/sandboxtest"
)

// TestDialsThroughNet: the server is dialled through the component's
// Net: one that refuses every address fails Connect with the refusal, one
// that allows it connects and writes, having decided the connection.
func TestDialsThroughNet(t *testing.T) {
	s := startServer(t)
	sandboxtest.DialsThroughNet(t, func(t *testing.T, _ string, n sandbox.Net) error {
		out, err := NewOutput(conf(t, "mode: {type: single, url: '"+s.url()+"'}\nredis_type: {type: list, key: l}"), component.Resources{Net: n})
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close(t.Context())
		if err := out.Connect(t.Context()); err != nil {
			return err
		}
		return out.Write(t.Context(), batchOf(`{"a":1}`))
	})
}
