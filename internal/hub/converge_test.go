package hub

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// TestWriteConvergesFromWrittenState: a desired write hands the
// convergence worker the state it committed (no read-back), and the worker
// evaluates it as the store has it. A carried state older than one the
// worker already looked at (the write, then the command succeeded and a
// report showed it in_sync, then the carried state arrives late) is passed
// over instead of turning the stream back to pending.
func TestWriteConvergesFromWrittenState(t *testing.T) {
	c := newClockHub(t, 0)
	ctx := context.Background()
	c.register(t, "n1")
	w := recDecode[wire.DesiredStateResponse](t, c.do(t, "PUT", APIPrefix+"/nodes/n1/streams/s1/desired-state", `{"state":"running"}`, ""))
	_, res := c.h.conv.take()
	carried := res[[2]string{"n1", "s1"}]
	if carried == nil {
		t.Fatal("the write left no state for the convergence worker")
	}
	stored, err := c.h.st.GetResourceState(ctx, "n1", "stream", "s1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.h.convergenceOf(carried.rs, c0), c.h.convergenceOf(stored, c0); got != want {
		t.Errorf("convergence of the written state %+v, of the stored one %+v", got, want)
	}
	if carried.rs.Latest == nil || carried.rs.Latest.ID != w.OperationID || carried.rs.Generation != w.Generation {
		t.Fatalf("written state %+v, want intent %s at generation %d", carried.rs, w.OperationID, w.Generation)
	}

	last := func() wire.Event {
		t.Helper()
		evs := c.h.events.Query(eventlogFilterKind(wire.EventConvergenceChanged), 1, 100).Items
		if len(evs) == 0 {
			t.Fatal("no convergence event")
		}
		return evs[0]
	}
	if err := c.h.convergeSome(ctx, nil, map[[2]string]*written{{"n1", "s1"}: carried}); err != nil {
		t.Fatal(err)
	}
	if e := last(); e.Data["convergence"] != wire.ConvergencePending || e.OperationID != w.OperationID {
		t.Fatalf("after the write: %+v", e)
	}

	c.at(0) // dispatches the command: the stream is applying
	if err := c.h.convergeNodes(ctx, map[string]bool{"n1": true}); err != nil {
		t.Fatal(err)
	}
	in := last()
	if in.Data["convergence"] != wire.ConvergenceApplying {
		t.Fatalf("after the dispatch: %+v", in)
	}
	if err := c.h.convergeSome(ctx, nil, map[[2]string]*written{{"n1", "s1"}: carried}); err != nil {
		t.Fatal(err)
	}
	if e := last(); e.ID != in.ID {
		t.Errorf("a state older than the one looked at made event %+v", e)
	}
}

// TestEventsLiveAtCommit: the events of a write are in the live log when
// its answer is sent, without the pump reading them back, and they are the
// rows the store holds.
func TestEventsLiveAtCommit(t *testing.T) {
	c := newClockHub(t, 0)
	ctx := context.Background()
	w := recDecode[wire.DesiredStateResponse](t, c.do(t, "PUT", APIPrefix+"/nodes/n1/streams/s1/desired-state", `{"state":"running"}`, ""))
	live := c.h.events.Query(eventlogFilterKind(wire.EventIntentAccepted), 1, 100).Items
	if len(live) != 1 || live[0].OperationID != w.OperationID {
		t.Fatalf("live intent_accepted events %+v, want the write's", live)
	}
	stored, err := c.h.st.EventsAfter(ctx, live[0].ID-1, store.EventFilter{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(stored, live); diff != "" {
		t.Errorf("live event differs from the stored one (-stored +live):\n%s", diff)
	}
}
