package placement

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/flowplane/flowplane/internal/job"
)

// Split places the tasks of a split job on nodes (the eligible
// candidates, in order of preference; at least one): each task on one
// node, balanced by task count, every subtask of a chain spread before any
// node gets a second one, and the downstream end of a late-event edge on
// the node of its upstream subtask. It returns task id -> node id for
// every task of p.
//
// A task goes to the node with the fewest tasks so far; among those, to
// the one with the fewest tasks of the same chain; among those, to the
// first in nodes rotated by the subtask index. Chained operators are
// already one task. A chain that receives a late edge from another chain
// (job.Late) is pinned instead: its subtask i runs on the node of the
// upstream chain's subtask i mod the upstream parallelism, so the late
// side output never crosses the network. Pinned chains are placed after
// the others; a chain pinned to a chain that cannot be resolved (a cycle)
// is placed balanced.
func Split(p *job.Plan, nodes []string) map[string]string {
	nodes = unique(nodes)
	out := make(map[string]string, len(p.Tasks))
	if len(nodes) == 0 {
		return out
	}
	pinned := lateUpstreams(p)
	load := make(map[string]int, len(nodes))
	perChain := map[string]map[string]int{}
	put := func(c job.Chain, subtask int, node string) {
		out[taskID(c.ID, subtask)] = node
		load[node]++
		if perChain[c.ID] == nil {
			perChain[c.ID] = map[string]int{}
		}
		perChain[c.ID][node]++
	}
	balanced := func(c job.Chain) {
		for s := range c.Parallelism {
			best := ""
			for k := range nodes {
				n := nodes[(s+k)%len(nodes)]
				if best == "" || load[n] < load[best] ||
					(load[n] == load[best] && perChain[c.ID][n] < perChain[c.ID][best]) {
					best = n
				}
			}
			put(c, s, best)
		}
	}
	var waiting []job.Chain
	for _, c := range p.Chains {
		if _, ok := pinned[c.ID]; ok {
			waiting = append(waiting, c)
			continue
		}
		balanced(c)
	}
	// Each pass places every waiting chain whose upstream is placed; a
	// pass that places none leaves only cycles.
	for len(waiting) > 0 {
		var next []job.Chain
		for _, c := range waiting {
			up := pinned[c.ID]
			if _, ok := out[taskID(up.ID, 0)]; !ok || up.Parallelism < 1 {
				next = append(next, c)
				continue
			}
			for s := range c.Parallelism {
				put(c, s, out[taskID(up.ID, s%up.Parallelism)])
			}
		}
		if len(next) == len(waiting) {
			for _, c := range next {
				balanced(c)
			}
			break
		}
		waiting = next
	}
	return out
}

// lateUpstreams maps each chain that receives a late edge from another
// chain to that upstream chain (the first such edge in plan order).
func lateUpstreams(p *job.Plan) map[string]job.Chain {
	chains := make(map[string]job.Chain, len(p.Chains))
	for _, c := range p.Chains {
		chains[c.ID] = c
	}
	out := map[string]job.Chain{}
	for _, e := range p.Edges {
		if e.Mode != job.Late {
			continue
		}
		from, to := p.Operator(e.From), p.Operator(e.To)
		if from == nil || to == nil || from.Chain == to.Chain {
			continue
		}
		if _, done := out[to.Chain]; done {
			continue
		}
		if up, ok := chains[from.Chain]; ok {
			out[to.Chain] = up
		}
	}
	return out
}

// taskID is the id of a chain's subtask ("<chain>#<subtask>").
func taskID(chain string, subtask int) string { return chain + "#" + strconv.Itoa(subtask) }

// Eligible returns the candidates a split placement may use, and why each
// other node considered may not. Considered are the requested nodes (in
// that order), or else every candidate, least loaded first, ties by node
// id. A node is eligible when Choose would qualify it for req and it
// advertises a data address.
func Eligible(cands []Candidate, req Request) ([]Candidate, map[string]string) {
	byID := make(map[string]Candidate, len(cands))
	for _, c := range cands {
		if _, dup := byID[c.NodeID]; !dup {
			byID[c.NodeID] = c
		}
	}
	considered := unique(req.Requested)
	if len(considered) == 0 {
		all := make([]Candidate, 0, len(byID))
		for _, c := range byID {
			all = append(all, c)
		}
		slices.SortFunc(all, func(a, b Candidate) int { return cmp.Or(cmp.Compare(a.Jobs, b.Jobs), cmp.Compare(a.NodeID, b.NodeID)) })
		for _, c := range all {
			considered = append(considered, c.NodeID)
		}
	}
	var out []Candidate
	reasons := map[string]string{}
	for _, id := range considered {
		c, known := byID[id]
		switch {
		case !known:
			reasons[id] = ReasonUnknown
		case disqualified(c, req) != "":
			reasons[id] = disqualified(c, req)
		case c.DataAddress == "":
			reasons[id] = ReasonNoDataAddress
		default:
			out = append(out, c)
		}
	}
	return out, reasons
}
