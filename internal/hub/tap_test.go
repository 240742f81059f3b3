package hub

import (
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// TestTapRelayKeepsNodesApart crosses the node -> Hub boundary of a tap:
// only the tapped node's Agent is handed the request, a batch another
// node's session pushes into it is refused (the Hub answers 410) and
// reaches no operator, and once the operator left even the tapped node's
// push is refused.
func TestTapRelayKeepsNodesApart(t *testing.T) {
	r := newTapRelay()
	now := time.Now()
	s, ok := r.open(wire.TapRequest{TapID: "t1", Kind: "stream", ResourceID: "a", Rate: 10, DurationMS: 1000}, "node-a")
	if !ok {
		t.Fatal("open refused")
	}
	if reqs, _ := r.take("node-b", now); len(reqs) != 0 {
		t.Fatalf("node-b was handed node-a's tap: %+v", reqs)
	}
	if reqs, _ := r.take("node-a", now); len(reqs) != 1 || reqs[0].TapID != "t1" {
		t.Fatalf("node-a's poll got %+v", reqs)
	}
	forged := wire.TapBatch{Messages: []wire.TapMessage{{Stage: "input", Payload: "forged"}}}
	if r.push("t1", "node-b", forged) {
		t.Fatal("node-b pushed into node-a's tap")
	}
	if !r.push("t1", "node-a", wire.TapBatch{}) {
		t.Fatal("node-a's own push refused")
	}
	if b := <-s.batches; len(b.Messages) != 0 {
		t.Fatalf("the operator got %+v, not node-a's empty batch", b)
	}
	select {
	case b := <-s.batches:
		t.Fatalf("the operator got a batch nobody entitled pushed: %+v", b)
	default:
	}
	r.close("t1", "node-a")
	if r.push("t1", "node-a", wire.TapBatch{}) {
		t.Fatal("a push after the operator left was taken")
	}
}
