package placement

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// plan builds a plan of one operator per chain with the given
// parallelisms, and a late edge per entry of late (from chain index -> to
// chain index).
func plan(pars []int, late map[int]int) *job.Plan {
	p := &job.Plan{}
	for i, par := range pars {
		id := fmt.Sprintf("c%d", i)
		p.Operators = append(p.Operators, job.Operator{ID: id, Parallelism: par, Chain: id})
		p.Chains = append(p.Chains, job.Chain{ID: id, Operators: []string{id}, Parallelism: par})
		for s := range par {
			p.Tasks = append(p.Tasks, job.Task{ID: fmt.Sprintf("%s#%d", id, s), Chain: id, Subtask: s})
		}
	}
	for _, to := range slices.Sorted(maps.Keys(late)) {
		from := late[to]
		p.Edges = append(p.Edges, job.Edge{ID: fmt.Sprintf("late%d", to), From: fmt.Sprintf("c%d", from),
			To: fmt.Sprintf("c%d", to), Mode: job.Late})
	}
	return p
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name  string
		plan  *job.Plan
		nodes []string
		want  map[string]string
	}{
		{"one node takes all", plan([]int{1, 2}, nil), []string{"a"},
			map[string]string{"c0#0": "a", "c1#0": "a", "c1#1": "a"}},
		{"subtasks spread before any node gets a second", plan([]int{1, 2}, nil), []string{"a", "b"},
			map[string]string{"c0#0": "a", "c1#0": "b", "c1#1": "a"}},
		{"rotation by subtask", plan([]int{3}, nil), []string{"a", "b", "c"},
			map[string]string{"c0#0": "a", "c0#1": "b", "c0#2": "c"}},
		{"late edge pinned to its upstream subtask", plan([]int{2, 1, 4}, map[int]int{2: 0}), []string{"a", "b", "c"},
			map[string]string{"c0#0": "a", "c0#1": "b", "c1#0": "c", "c2#0": "a", "c2#1": "b", "c2#2": "a", "c2#3": "b"}},
		{"repeated nodes count once", plan([]int{2}, nil), []string{"a", "a", "b"},
			map[string]string{"c0#0": "a", "c0#1": "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Split(tt.plan, tt.nodes)); diff != "" {
				t.Errorf("Split (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPropSplit: every task is placed, on a given node; without late
// edges the task counts differ by at most one and a chain's subtasks
// spread over distinct nodes as long as there are nodes enough; a late
// edge's downstream subtask i shares the node of upstream subtask i mod
// its parallelism; the result is deterministic.
func TestPropSplit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nc := rapid.IntRange(1, 6).Draw(t, "chains")
		pars := rapid.SliceOfN(rapid.IntRange(1, 5), nc, nc).Draw(t, "pars")
		late := map[int]int{}
		if rapid.Bool().Draw(t, "with late") {
			for to := 1; to < nc; to++ {
				if rapid.Bool().Draw(t, fmt.Sprintf("late to %d", to)) {
					late[to] = rapid.IntRange(0, to-1).Draw(t, fmt.Sprintf("late from %d", to))
				}
			}
		}
		nodes := rapid.SliceOfNDistinct(rapid.SampledFrom(ids), 1, len(ids), rapid.ID[string]).Draw(t, "nodes")
		p := plan(pars, late)

		got := Split(p, nodes)
		if again := Split(p, slices.Clone(nodes)); !maps.Equal(got, again) {
			t.Fatalf("not deterministic: %v vs %v", got, again)
		}
		if len(got) != len(p.Tasks) {
			t.Fatalf("placed %d tasks of %d: %v", len(got), len(p.Tasks), got)
		}
		count := map[string]int{}
		for _, n := range nodes {
			count[n] = 0
		}
		for _, task := range p.Tasks {
			n, ok := got[task.ID]
			if !ok || !slices.Contains(nodes, n) {
				t.Fatalf("task %s on %q (nodes %v)", task.ID, n, nodes)
			}
			count[n]++
		}
		for to, from := range late {
			for s := range pars[to] {
				if a, b := got[fmt.Sprintf("c%d#%d", to, s)], got[fmt.Sprintf("c%d#%d", from, s%pars[from])]; a != b {
					t.Fatalf("late edge c%d -> c%d: subtask %d on %s, upstream on %s", from, to, s, a, b)
				}
			}
		}
		if len(late) > 0 {
			return
		}
		lo, hi := slices.Min(slices.Collect(maps.Values(count))), slices.Max(slices.Collect(maps.Values(count)))
		if hi-lo > 1 {
			t.Fatalf("task counts %v differ by %d", count, hi-lo)
		}
		for c, par := range pars {
			on := map[string]bool{}
			for s := range min(par, len(nodes)) {
				on[got[fmt.Sprintf("c%d#%d", c, s)]] = true
			}
			if len(on) != min(par, len(nodes)) {
				t.Fatalf("chain c%d: its first %d subtasks share nodes: %v", c, min(par, len(nodes)), got)
			}
		}
	})
}

func TestEligible(t *testing.T) {
	node := func(id string, jobs int, addr string, caps ...string) Candidate {
		return Candidate{NodeID: id, Status: "online", Mode: "active", Capabilities: caps, Jobs: jobs, DataAddress: addr}
	}
	shuffle := []string{"job_control", "network_shuffle"}
	cands := []Candidate{
		node("n1", 2, "h1:7000", shuffle...),
		node("n2", 0, "h2:7000", shuffle...),
		node("n3", 0, "", shuffle...),
		node("n4", 0, "h4:7000", "job_control"),
		{NodeID: "n5", Status: "unavailable", Mode: "active", Capabilities: shuffle, DataAddress: "h5:7000"},
		node("n0", 1, "h0:7000", shuffle...),
	}
	tests := []struct {
		name    string
		req     Request
		want    []string
		reasons map[string]string
	}{
		{"every node, least loaded first", Request{Required: shuffle}, []string{"n2", "n0", "n1"},
			map[string]string{"n3": ReasonNoDataAddress, "n4": ReasonMissingCapability + " network_shuffle", "n5": ReasonUnavailable}},
		{"requested order kept", Request{Required: shuffle, Requested: []string{"n1", "n9", "n2", "n1"}}, []string{"n1", "n2"},
			map[string]string{"n9": ReasonUnknown}},
		{"excluded", Request{Required: shuffle, Requested: []string{"n1", "n2"}, Exclude: []string{"n2"}}, []string{"n1"},
			map[string]string{"n2": ReasonExcluded}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reasons := Eligible(cands, tt.req)
			var ids []string
			for _, c := range got {
				ids = append(ids, c.NodeID)
			}
			if diff := cmp.Diff(tt.want, ids); diff != "" {
				t.Errorf("eligible (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.reasons, reasons); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
		})
	}
}
