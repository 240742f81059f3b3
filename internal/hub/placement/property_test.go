package placement

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

var (
	ids  = []string{"n0", "n1", "n2", "n3", "n4", "n5"}
	caps = []string{"job_control", "input:kafka", "output:http"}
)

func genCandidates(t *rapid.T) []Candidate {
	n := rapid.IntRange(0, 5).Draw(t, "n")
	present := rapid.SliceOfNDistinct(rapid.SampledFrom(ids), n, n, rapid.ID[string]).Draw(t, "ids")
	out := make([]Candidate, len(present))
	for i, id := range present {
		out[i] = Candidate{
			NodeID:       id,
			Status:       rapid.SampledFrom([]string{"online", "online", "unavailable", "unknown"}).Draw(t, id+".status"),
			Mode:         rapid.SampledFrom([]string{"active", "active", "draining", "maintenance"}).Draw(t, id+".mode"),
			Capabilities: rapid.SliceOfNDistinct(rapid.SampledFrom(caps), 0, len(caps), rapid.ID[string]).Draw(t, id+".caps"),
			Jobs:         rapid.IntRange(0, 3).Draw(t, id+".jobs"),
		}
	}
	return out
}

func genRequest(t *rapid.T) Request {
	return Request{
		Required:  rapid.SliceOfNDistinct(rapid.SampledFrom(caps), 0, 2, rapid.ID[string]).Draw(t, "required"),
		Requested: rapid.SliceOfN(rapid.SampledFrom(ids), 0, 3).Draw(t, "requested"),
		Exclude:   rapid.SliceOfN(rapid.SampledFrom(ids), 0, 2).Draw(t, "exclude"),
	}
}

// qualifies is the rule restated independently of Choose.
func qualifies(c Candidate, req Request) bool {
	if c.Status != "online" || c.Mode != "active" || slices.Contains(req.Exclude, c.NodeID) {
		return false
	}
	for _, r := range req.Required {
		if !slices.Contains(c.Capabilities, r) {
			return false
		}
	}
	return true
}

// The choice always qualifies, is among the requested nodes when some are
// requested, is never more loaded than another qualified node considered,
// wins ties by the documented order, and does not depend on the order of
// the candidates. When nothing is chosen, nothing considered qualifies and
// every node considered has a reason.
func TestPropChoose(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cands, req := genCandidates(t), genRequest(t)
		considered := map[string]int{} // id -> rank (preference among equals)
		if len(req.Requested) > 0 {
			for i, id := range req.Requested {
				if _, ok := considered[id]; !ok {
					considered[id] = i
				}
			}
		} else {
			for _, c := range cands {
				considered[c.NodeID] = slices.Index(ids, c.NodeID)
			}
		}
		var qualified []Candidate
		for _, c := range cands {
			if _, ok := considered[c.NodeID]; ok && qualifies(c, req) {
				qualified = append(qualified, c)
			}
		}

		got, err := Choose(cands, req)

		perm := rapid.Permutation(cands).Draw(t, "perm")
		again, err2 := Choose(perm, req)
		if got != again || fmt.Sprint(err) != fmt.Sprint(err2) {
			t.Fatalf("candidate order changed the result: %+v, %v vs %+v, %v", got, err, again, err2)
		}

		if err != nil {
			var ne *NoNodeError
			if !errors.As(err, &ne) {
				t.Fatalf("Choose error %v is not a *NoNodeError", err)
			}
			if len(qualified) > 0 {
				t.Fatalf("no node chosen, but %+v qualifies", qualified[0])
			}
			if len(ne.Reasons) != len(considered) {
				t.Fatalf("reasons %v for considered %v", ne.Reasons, considered)
			}
			for id := range considered {
				if ne.Reasons[id] == "" {
					t.Fatalf("no reason for considered node %s: %v", id, ne.Reasons)
				}
			}
			return
		}
		wantStrategy := StrategyLeastLoaded
		if len(req.Requested) > 0 {
			wantStrategy = StrategyRequested
		}
		if got.Strategy != wantStrategy {
			t.Fatalf("strategy %q, want %q", got.Strategy, wantStrategy)
		}
		i := slices.IndexFunc(qualified, func(c Candidate) bool { return c.NodeID == got.NodeID })
		if i < 0 {
			t.Fatalf("chose %s, which does not qualify (qualified: %+v)", got.NodeID, qualified)
		}
		chosen := qualified[i]
		for _, c := range qualified {
			if c.Jobs < chosen.Jobs {
				t.Fatalf("chose %s with %d jobs over %s with %d", chosen.NodeID, chosen.Jobs, c.NodeID, c.Jobs)
			}
			if c.Jobs == chosen.Jobs && considered[c.NodeID] < considered[chosen.NodeID] {
				t.Fatalf("tie between %s and %s went to the later one", c.NodeID, chosen.NodeID)
			}
		}
	})
}
