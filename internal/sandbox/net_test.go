package sandbox

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

// listen returns the address of a loopback TCP server that accepts and
// closes connections until the test ends.
func listen(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// TestNetRebinding: a name that resolved to an allowed address when it
// was checked and resolves to a refused one when dialled is refused at
// the address it is dialled at; the zero Net dials as the host does.
func TestNetRebinding(t *testing.T) {
	addr := listen(t)
	_, port, _ := net.SplitHostPort(addr)
	var lookups atomic.Int32
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		if host != "rebind.test" {
			return nil, errors.New("no such host")
		}
		lookups.Add(1)
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	var asked []string
	allow := func(host string, a netip.Addr) string {
		asked = append(asked, host+" "+a.String())
		if a.IsLoopback() {
			return a.String() + " is not in the allowed destinations"
		}
		return ""
	}
	n := Restrict(allow, lookup, "remote_policy.outbound_allow")
	_, err := n.DialContext(context.Background(), "tcp", "rebind.test:"+port)
	var se *Error
	if !errors.As(err, &se) || !errors.Is(err, ErrDenied) {
		t.Fatalf("dial = %v, want a refusal", err)
	}
	if want := "dial " + addr + " (rebind.test): 127.0.0.1 is not in the allowed destinations (remote_policy.outbound_allow)"; se.Error() != want {
		t.Errorf("refusal %q, want %q", se.Error(), want)
	}
	if lookups.Load() != 1 || len(asked) != 1 || asked[0] != "rebind.test 127.0.0.1" {
		t.Errorf("lookups %d, decisions %v", lookups.Load(), asked)
	}
	if _, err := n.DialContext(context.Background(), "tcp", addr); !errors.Is(err, ErrDenied) {
		t.Errorf("dial of the address itself = %v, want refused", err)
	}
	if _, err := n.DialContext(context.Background(), "unix", "/run/docker.sock"); !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "only TCP and UDP") {
		t.Errorf("dial of a unix socket = %v, want refused", err)
	}

	open := Restrict(func(string, netip.Addr) string { return "" }, lookup, "r")
	c, err := open.Dial(&net.Dialer{})(context.Background(), "tcp", "rebind.test:"+port)
	if err != nil {
		t.Fatalf("an allowed dial: %v", err)
	}
	c.Close()
	c, err = Net{}.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatalf("the zero Net: %v", err)
	}
	c.Close()
}
