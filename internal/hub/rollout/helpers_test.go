package rollout

import (
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func sec(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }

// hub plays the Hub's part around Step and Act: it keeps the rollout and
// the observations, and sets a generation for every apply it is given,
// as the store does in the same transaction.
type hub struct {
	t   *testing.T
	r   Rollout
	obs map[string]Observation
	gen int64
}

func newHub(t *testing.T, p Plan) *hub {
	return &hub{t: t, r: New("r1", p, t0), obs: map[string]Observation{}}
}

func (h *hub) commit(r Rollout, effects []Effect) {
	for _, e := range effects {
		if e.Kind == EffectApply {
			h.gen++
			r = SetGeneration(r, e.NodeID, h.gen)
		}
	}
	h.r = r
}

func (h *hub) step(now time.Time) []Effect {
	h.t.Helper()
	r, effects := Step(h.r, h.obs, now)
	h.commit(r, effects)
	return effects
}

func (h *hub) act(action string, now time.Time) []Effect {
	h.t.Helper()
	r, effects, err := Act(h.r, action, h.obs, now)
	if err != nil {
		h.t.Fatalf("Act(%s) on a %s rollout: %v", action, h.r.State, err)
	}
	h.commit(r, effects)
	return effects
}

// set changes node id's observation.
func (h *hub) set(id string, f func(*Observation)) {
	o := h.obs[id]
	f(&o)
	h.obs[id] = o
}

func (h *hub) node(id string) Node {
	h.t.Helper()
	for _, n := range h.r.Nodes {
		if n.NodeID == id {
			return n
		}
	}
	h.t.Fatalf("no node %s", id)
	return Node{}
}

func (h *hub) phases() map[string]string {
	m := map[string]string{}
	for _, n := range h.r.Nodes {
		m[n.NodeID] = n.Phase
	}
	return m
}

// applied lists the nodes of the apply effects (rollback ones marked "-").
func applied(effects []Effect) []string {
	var ids []string
	for _, e := range effects {
		if e.Kind == EffectApply {
			if e.Rollback {
				ids = append(ids, "-"+e.NodeID)
			} else {
				ids = append(ids, e.NodeID)
			}
		}
	}
	return ids
}

func messages(effects []Effect) []string {
	var m []string
	for _, e := range effects {
		if e.Kind == EffectEvent {
			m = append(m, e.Message)
		}
	}
	return m
}

func active1() Observation { return Observation{Online: true, Mode: "active"} }

func inSync(o *Observation) { o.InSync = true }

const (
	waiting     = wire.RolloutNodeWaiting
	applying    = wire.RolloutNodeApplying
	soaking     = wire.RolloutNodeSoaking
	passed      = wire.RolloutNodePassed
	failed      = wire.RolloutNodeFailed
	skipped     = wire.RolloutNodeSkipped
	rollingBack = wire.RolloutNodeRollingBack
	rolledBack  = wire.RolloutNodeRolledBack
)
