package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// TestNodeIdentityBinding: the first registration binds the node id to its
// credential digest; another digest is refused and writes nothing; a
// forget removes the binding, the session and the observations, keeps the
// desired state, and lets another credential register the id.
func TestNodeIdentityBinding(t *testing.T) { backends(t, testNodeIdentityBinding) }

func testNodeIdentityBinding(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	if err := s.RegisterNode(ctx, reg("n1", "tok1", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterNode(ctx, reg("n1", "tok2", t0)); err != nil {
		t.Fatalf("same credential again: %v", err)
	}
	other := reg("n1", "tok3", t0)
	other.CredentialDigest = hashToken("another")
	if err := s.RegisterNode(ctx, other); !errors.Is(err, ErrIdentityMismatch) {
		t.Fatalf("another credential: %v, want ErrIdentityMismatch", err)
	}
	got, err := s.LookupSession(ctx, "tok2", t0)
	if err != nil || got.NodeID != "n1" || string(got.Binding) != "binding" || string(got.CredentialDigest) != string(hashToken("credential-n1")) {
		t.Fatalf("session after a refused registration: %+v %v", got, err)
	}
	if _, err := s.LookupSession(ctx, "tok3", t0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the refused registration's session: %v", err)
	}
	if _, err := s.ApplyReport(ctx, Report{NodeID: "n1", BootID: "b", Seq: 1, Now: t0,
		Streams: []ObservedStream{{StreamID: "s1", State: "running", Generation: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteDesired(ctx, dw("i1", "n1", "s1", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.ForgetNode(ctx, Forget{NodeID: "n1", Actor: "operator", Now: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.ForgetNode(ctx, Forget{NodeID: "n1", Actor: "operator", Now: t0}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("forget twice: %v, want ErrNotFound", err)
	}
	if _, err := s.LookupSession(ctx, "tok2", t0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("session after forget: %v", err)
	}
	if obs, _ := s.ObservedStreams(ctx, "n1"); len(obs) != 0 {
		t.Fatalf("observations after forget: %+v", obs)
	}
	if rs, err := s.ResourceStates(ctx, "n1"); err != nil || len(rs) != 1 {
		t.Fatalf("desired state after forget: %+v %v", rs, err)
	}
	audit, err := s.ListAudit(ctx, AuditFilter{Action: ActionNodeForget}, Paging{Page: 1, PageSize: 10})
	if err != nil || len(audit.Items) != 1 || audit.Items[0].Actor != "operator" || audit.Items[0].Outcome != OutcomeAccepted {
		t.Fatalf("audit: %+v %v", audit.Items, err)
	}
	evs, err := s.ListEvents(ctx, EventFilter{Kind: wire.EventNodeForgotten}, Paging{Page: 1, PageSize: 10})
	if err != nil || len(evs.Items) != 1 || evs.Items[0].NodeID != "n1" {
		t.Fatalf("events: %+v %v", evs.Items, err)
	}
	if err := s.RegisterNode(ctx, other); err != nil {
		t.Fatalf("another credential after forget: %v", err)
	}
}
