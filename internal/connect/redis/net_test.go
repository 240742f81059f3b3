package redis

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/sandbox"
)

// TestDialsThroughNet: the server is dialled through the component's
// Net: one that refuses every address fails Connect with the refusal, one
// that allows it connects and writes, having decided the connection.
func TestDialsThroughNet(t *testing.T) {
	s := startServer(t)
	for _, tc := range []struct {
		name string
		why  string
	}{{"refused", "not allowed here"}, {"allowed", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			var decided atomic.Int32
			n := sandbox.Restrict(func(string, netip.Addr) string { decided.Add(1); return tc.why }, nil, "remote_policy.outbound_allow")
			out, err := NewOutput(conf(t, "mode: {type: single, url: '"+s.url()+"'}\nredis_type: {type: list, key: l}"), component.Resources{Net: n})
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close(t.Context())
			err = out.Connect(t.Context())
			if err == nil {
				err = out.Write(t.Context(), batchOf(`{"a":1}`))
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
