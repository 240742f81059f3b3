package output

import (
	"context"
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/policy"
)

// TestHTTPPolicyAtUse: DNS rebinding. A Hub-delivered http output's host
// name resolves into the node's allow-list when the work arrives and to
// loopback, which the list does not hold, when the output connects: the
// connection is refused at the address it would reach, naming it and the
// rule, and the loopback server sees no request. Local work reaches it.
func TestHTTPPolicyAtUse(t *testing.T) {
	rec, base := serve(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var lookups atomic.Int32
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		if host != "rebind.test" {
			return nil, errors.New("no such host")
		}
		if lookups.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("10.9.0.1")}, nil // when the work arrives
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil // when the output connects
	}
	rp := config.Default().RemotePolicy
	rp.OutboundAllow = []string{"10.9.0.0/16"}
	pol := policy.New(rp, t.TempDir()).WithLookup(lookup)
	target := "http://rebind.test:" + u.Port() + "/ingest"
	if err := pol.Destination(t.Context(), target); err != nil {
		t.Fatalf("the arrival check refused %s: %v", target, err)
	}

	out, err := component.Default.NewOutput("http", map[string]any{"url": target, "retry_count": 3}, component.Resources{Net: pol.Net()})
	if err != nil {
		t.Fatal(err)
	}
	mustConnect(t, out)
	err = out.Write(testCtx(t), batch(`{"a":1}`))
	if !errors.Is(err, policy.ErrDenied) || !component.IsPermanent(err) {
		t.Fatalf("write = %v, want a permanent refusal by the policy", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "127.0.0.1:"+u.Port()+" (rebind.test)") || !strings.Contains(msg, policy.RuleOutbound) {
		t.Errorf("refusal %q does not name the address and the rule", msg)
	}
	if n := lookups.Load(); n != 2 {
		t.Errorf("%d lookups, want one at arrival and one at connect (a refusal is not retried)", n)
	}
	if got := rec.requests(); len(got) != 0 {
		t.Fatalf("the refused output reached the server: %v", got)
	}

	local := build(t, "http", map[string]any{"url": base + "/ingest"})
	mustConnect(t, local)
	if err := local.Write(testCtx(t), batch(`{"a":1}`)); err != nil {
		t.Fatalf("local work: %v", err)
	}
	if got := rec.requests(); len(got) != 1 {
		t.Errorf("local work made %d requests, want 1", len(got))
	}
}

func mustConnect(t *testing.T, out component.Output) {
	t.Helper()
	if err := out.Connect(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = out.Close(context.Background()) })
}
