package sandboxtest

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/flowplane/flowplane/internal/sandbox"
)

// DialsThroughNet runs connect twice, under a Net that refuses every
// address and under one that allows them (name is "refused" or "allowed",
// for client ids that must differ). The refused run must fail with
// sandbox.ErrDenied, the allowed one succeed, and each must have had a
// connection decided by the Net.
func DialsThroughNet(t *testing.T, connect func(t *testing.T, name string, n sandbox.Net) error) {
	t.Helper()
	for _, tc := range []struct {
		name string
		why  string
	}{{"refused", "not allowed here"}, {"allowed", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			var decided atomic.Int32
			n := sandbox.Restrict(func(string, netip.Addr) string { decided.Add(1); return tc.why }, nil, "remote_policy.outbound_allow")
			err := connect(t, tc.name, n)
			if errors.Is(err, sandbox.ErrDenied) != (tc.why != "") || (tc.why == "" && err != nil) {
				t.Fatalf("connect = %v", err)
			}
			if decided.Load() == 0 {
				t.Error("no connection was decided by the Net")
			}
		})
	}
}
