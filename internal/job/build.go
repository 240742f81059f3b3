package job

import (
	"fmt"
	"slices"

	"github.com/flowplane/flowplane/internal/config"
)

// keyed reports whether operators of kind keep keyed state and are
// partitioned by a key.
func keyed(kind string) bool { return kind == "aggregate" || kind == "window" }

// MaxMaxParallelism is the largest max_parallelism a job may declare.
const MaxMaxParallelism = 32768

// builder holds the state of one Build.
type builder struct {
	prefix string
	j      config.Job
	ps     problems

	ops     []Operator     // in configuration order, duplicates left out
	cfgAt   []int          // index in j.Operators of ops[i]
	index   map[string]int // id -> index into ops
	edges   []Edge
	from    []int          // ops index of edges[i].From
	to      []int          // ops index of edges[i].To
	next    [][]int        // ops index -> downstream ops over configured edges; built by reach
	edgeIDs map[string]int // edge id -> index of its first edge
}

func (b *builder) opPath(i int) string { return fmt.Sprintf("%s.operators[%d]", b.prefix, b.cfgAt[i]) }

func build(prefix string, j config.Job) (*Plan, []config.Problem) {
	b := &builder{prefix: prefix, j: j, index: map[string]int{}, edgeIDs: map[string]int{}}
	maxPar := j.MaxParallelism
	if maxPar < 1 || maxPar > MaxMaxParallelism {
		b.ps.add(prefix+".max_parallelism", "must be between 1 and %d, got %d", MaxMaxParallelism, maxPar)
		maxPar = MaxMaxParallelism // go on checking without a parallelism problem per operator
	}
	jobPar := j.Parallelism
	if jobPar < 1 {
		b.ps.add(prefix+".parallelism", "must be a positive integer, got %d", jobPar)
		jobPar = 1
	}
	b.operators(jobPar, maxPar)
	b.bind()
	b.graphEdges()
	b.lateEdges()
	order, ok := b.order()
	if !ok {
		b.ps.add(prefix+".edges", "the operator graph must be acyclic")
		return nil, b.ps
	}
	b.time(order)
	if len(b.ps) > 0 {
		return nil, b.ps
	}
	return b.plan(order, maxPar), nil
}

// operators decodes every operator's config and parallelism.
func (b *builder) operators(jobPar, maxPar int) {
	jobTooHigh := false
	for i, op := range b.j.Operators {
		q := fmt.Sprintf("%s.operators[%d]", b.prefix, i)
		if _, dup := b.index[op.ID]; dup {
			b.ps.add(q+".id", "duplicate operator id %q", op.ID)
			continue
		}
		if op.ID == "" {
			b.ps.add(q+".id", "must not be empty")
		}
		if !slices.Contains(config.OperatorKinds, op.Kind) {
			b.ps.add(q+".kind", "unknown operator kind %q", op.Kind)
		}
		o := Operator{ID: op.ID, Kind: op.Kind, Parallelism: op.Parallelism, Stateful: keyed(op.Kind)}
		switch {
		case op.Parallelism < 0:
			b.ps.add(q+".parallelism", "must be a positive integer, got %d", op.Parallelism)
			o.Parallelism = jobPar
		case op.Parallelism == 0:
			o.Parallelism = jobPar
			if jobPar > maxPar && !jobTooHigh {
				jobTooHigh = true
				b.ps.add(b.prefix+".parallelism", "%d exceeds max_parallelism %d", jobPar, maxPar)
			}
		case op.Parallelism > maxPar:
			b.ps.add(q+".parallelism", "%d exceeds max_parallelism %d", op.Parallelism, maxPar)
		}
		decodeConfig(op, q, &o, &b.ps)
		b.index[op.ID] = len(b.ops)
		b.ops = append(b.ops, o)
		b.cfgAt = append(b.cfgAt, i)
	}
}

// bind attaches the sources[] and sinks[] entries to their operators.
func (b *builder) bind() {
	for k := range b.j.Sources {
		s := &b.j.Sources[k]
		if i, ok := b.index[s.OperatorID]; ok && b.ops[i].Kind == "source" && b.ops[i].Source == nil {
			b.ops[i].Source = s
			b.ops[i].Time = policyOf(s.Time)
		}
	}
	for k := range b.j.Sinks {
		s := &b.j.Sinks[k]
		if i, ok := b.index[s.OperatorID]; ok && b.ops[i].Kind == "sink" && b.ops[i].Sink == nil {
			b.ops[i].Sink = s
		}
	}
	for i, o := range b.ops {
		if (o.Kind == "source" && o.Source == nil) || (o.Kind == "sink" && o.Sink == nil) {
			b.ps.add(b.opPath(i), "%s operator %q has no entry in %ss", o.Kind, o.ID, o.Kind)
		}
	}
}

func policyOf(t *config.Time) *TimePolicy {
	if t == nil {
		return nil
	}
	return &TimePolicy{
		Mode:              t.Mode,
		TimestampField:    t.TimestampField,
		Strategy:          t.Watermark.Strategy,
		OutOfOrdernessMs:  int64(t.Watermark.OutOfOrdernessMs),
		IdleTimeoutMs:     int64(t.Watermark.IdleTimeoutMs),
		AllowedLatenessMs: int64(t.AllowedLatenessMs),
		LatePolicy:        t.LateEventPolicy,
		LateRoute:         t.LateEventRoute,
	}
}

// graphEdges resolves the configured edges and their modes.
func (b *builder) graphEdges() {
	for k, e := range b.j.Edges {
		q := fmt.Sprintf("%s.edges[%d]", b.prefix, k)
		fi, okF := b.index[e.From]
		ti, okT := b.index[e.To]
		if !okF {
			b.ps.add(q+".from", "no operator %q in this job", e.From)
		}
		if !okT {
			b.ps.add(q+".to", "no operator %q in this job", e.To)
		}
		if !okF || !okT {
			continue
		}
		from, to := &b.ops[fi], &b.ops[ti]
		if from.Kind == "sink" {
			b.ps.add(q+".from", "%q is a sink operator and has no outputs", e.From)
		}
		if to.Kind == "source" {
			b.ps.add(q+".to", "%q is a source operator and has no inputs", e.To)
		}
		id := e.ID
		if id == "" {
			id = e.From + "->" + e.To
		}
		if _, dup := b.edgeIDs[id]; dup {
			b.ps.add(q+".id", "duplicate edge id %q", id)
		}
		edge := Edge{ID: id, From: e.From, To: e.To}
		switch {
		case e.Partitioned:
			edge.Mode = Partitioned
			if !keyed(to.Kind) {
				b.ps.add(q+".partitioned", "a partitioned edge routes by the key of the operator it feeds; %q is a %s operator, which has no key (only aggregate and window have one)", e.To, to.Kind)
			}
			edge.Key = keyOf(to)
		case keyed(to.Kind) && to.Parallelism > 1:
			b.ps.add(q, "%q is a keyed %s operator at parallelism %d: every edge into it must be partitioned: true, so that each key reaches the subtask that owns its key group", e.To, to.Kind, to.Parallelism)
			edge.Mode = Rebalance
		case from.Parallelism == to.Parallelism:
			edge.Mode = Forward
		default:
			edge.Mode = Rebalance
		}
		b.addEdge(edge, fi, ti)
	}
}

func keyOf(o *Operator) string {
	switch {
	case o.Aggregate != nil:
		return o.Aggregate.Key
	case o.Window != nil:
		return o.Window.Key
	}
	return ""
}

func (b *builder) addEdge(e Edge, from, to int) {
	if _, dup := b.edgeIDs[e.ID]; !dup {
		b.edgeIDs[e.ID] = len(b.edges)
	}
	b.edges = append(b.edges, e)
	b.from = append(b.from, from)
	b.to = append(b.to, to)
}

// reach returns the operators reachable from start over the configured
// (not late) edges, start included. It terminates on cyclic graphs.
func (b *builder) reach(start int) []bool {
	if b.next == nil {
		b.next = make([][]int, len(b.ops))
		for e := range b.edges {
			if b.edges[e].Mode != Late {
				b.next[b.from[e]] = append(b.next[b.from[e]], b.to[e])
			}
		}
	}
	seen := make([]bool, len(b.ops))
	stack := []int{start}
	seen[start] = true
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, m := range b.next[n] {
			if !seen[m] {
				seen[m] = true
				stack = append(stack, m)
			}
		}
	}
	return seen
}

// lateEdges adds, for each source whose late_event_policy is route, a late
// edge from every window downstream of it to its late_event_route.
func (b *builder) lateEdges() {
	for k, s := range b.j.Sources {
		if s.Time == nil || s.Time.LateEventPolicy != "route" {
			continue
		}
		si, ok := b.index[s.OperatorID]
		if !ok || b.ops[si].Source != &b.j.Sources[k] {
			continue // not bound: reported by bind or validation
		}
		q := fmt.Sprintf("%s.sources[%d].time.late_event_route", b.prefix, k)
		route := s.Time.LateEventRoute
		ri, ok := b.index[route]
		switch {
		case route == "":
			b.ps.add(q, "late_event_policy route needs late_event_route naming the operator that receives late events")
			continue
		case !ok:
			b.ps.add(q, "no operator %q in this job", route)
			continue
		case b.ops[ri].Kind == "source":
			b.ps.add(q, "%q is a source operator and cannot receive late events", route)
			continue
		}
		fromRoute := b.reach(ri)
		for w, down := range b.reach(si) {
			if !down || b.ops[w].Kind != "window" {
				continue
			}
			if fromRoute[w] {
				b.ps.add(q, "late events of window %q cannot go to %q: it is upstream of (or is) the window, which would make a cycle", b.ops[w].ID, route)
				continue
			}
			id := b.ops[w].ID + "->late->" + route
			if k, ok := b.edgeIDs[id]; ok {
				if b.edges[k].Mode != Late {
					b.ps.add(q, "the late edge %q would have the id of a configured edge; rename that edge", id)
				}
				continue
			}
			b.addEdge(Edge{ID: id, From: b.ops[w].ID, To: route, Mode: Late}, w, ri)
		}
	}
}

// order is a topological order of the operators over all edges, stable:
// among the operators ready at each step, the first in configuration
// order. ok is false when the graph has a cycle.
func (b *builder) order() ([]int, bool) {
	indeg := make([]int, len(b.ops))
	for e := range b.edges {
		indeg[b.to[e]]++
	}
	done := make([]bool, len(b.ops))
	order := make([]int, 0, len(b.ops))
	for range b.ops {
		next := -1
		for i := range b.ops {
			if !done[i] && indeg[i] == 0 {
				next = i
				break
			}
		}
		if next < 0 {
			return nil, false
		}
		done[next] = true
		order = append(order, next)
		for e := range b.edges {
			if b.from[e] == next {
				indeg[b.to[e]]--
			}
		}
	}
	return order, true
}

// time gives every operator the time policy of the sources upstream of it.
// A conflict is reported where the sources meet, not again downstream.
func (b *builder) time(order []int) {
	upstream := make([][]int, len(b.ops)) // source operators upstream, sorted
	conflict := make([]bool, len(b.ops))
	for _, i := range order {
		if b.ops[i].Kind == "source" {
			upstream[i] = []int{i}
		}
		inherited := false
		for e := range b.edges {
			if b.to[e] != i {
				continue
			}
			inherited = inherited || conflict[b.from[e]]
			for _, s := range upstream[b.from[e]] {
				if !slices.Contains(upstream[i], s) {
					upstream[i] = append(upstream[i], s)
				}
			}
		}
		slices.Sort(upstream[i])
		if b.ops[i].Kind == "source" {
			continue
		}
		for n, s := range upstream[i] {
			if n == 0 {
				b.ops[i].Time = b.ops[s].Time
				continue
			}
			if !samePolicy(b.ops[i].Time, b.ops[s].Time) {
				conflict[i] = true
				if inherited {
					break
				}
				b.ps.add(b.opPath(i), "operator %q has sources %q and %q upstream whose time declarations (sources[].time) differ; declare the same on both", b.ops[i].ID, b.ops[upstream[i][0]].ID, b.ops[s].ID)
				break
			}
		}
	}
}

// samePolicy compares two sources' time declarations; no declaration is
// processing time with the default watermark and late-event policy.
func samePolicy(a, b *TimePolicy) bool {
	return *effective(a) == *effective(b)
}

func effective(p *TimePolicy) *TimePolicy {
	if p == nil {
		return &TimePolicy{Mode: "processing_time", Strategy: "bounded_out_of_orderness", LatePolicy: "drop"}
	}
	return p
}

// plan assembles the plan once the graph is known to be good.
func (b *builder) plan(order []int, maxPar int) *Plan {
	j := b.j
	p := &Plan{
		JobID:          j.ID,
		Version:        j.Version,
		MaxParallelism: maxPar,
		FormatVersion:  1,
		State:          j.State,
		Checkpoint:     j.Checkpoint,
		Recovery:       j.Recovery,
		Restart:        j.RestartStrategy,
		Edges:          b.edges,
	}
	if p.Restart == nil {
		p.Restart = config.DefaultRestartStrategy()
	}
	if j.State != nil && j.State.FormatVersion > 0 {
		p.FormatVersion = j.State.FormatVersion
	}
	outdeg := make([]int, len(b.ops))
	indeg := make([]int, len(b.ops))
	for e, edge := range b.edges {
		if edge.Mode != Late {
			outdeg[b.from[e]]++
			indeg[b.to[e]]++
		}
	}
	for e := range p.Edges {
		edge := &p.Edges[e]
		edge.Chained = edge.Mode == Forward && outdeg[b.from[e]] == 1 && indeg[b.to[e]] == 1
		b.ops[b.from[e]].Outputs = append(b.ops[b.from[e]].Outputs, e)
		b.ops[b.to[e]].Inputs = append(b.ops[b.to[e]].Inputs, e)
	}
	chainOf := make([]int, len(b.ops)) // index into p.Chains
	for _, i := range order {
		op := &b.ops[i]
		c := -1
		for _, e := range op.Inputs {
			if p.Edges[e].Chained {
				c = chainOf[b.from[e]]
			}
		}
		if c < 0 {
			c = len(p.Chains)
			p.Chains = append(p.Chains, Chain{ID: op.ID, Parallelism: op.Parallelism})
		}
		chainOf[i] = c
		op.Chain = p.Chains[c].ID
		p.Chains[c].Operators = append(p.Chains[c].Operators, op.ID)
		p.Operators = append(p.Operators, *op)
	}
	for _, c := range p.Chains {
		for s := range c.Parallelism {
			p.Tasks = append(p.Tasks, Task{
				ID:        fmt.Sprintf("%s#%d", c.ID, s),
				Chain:     c.ID,
				Subtask:   s,
				KeyGroups: RangeOf(s, c.Parallelism, maxPar),
			})
		}
	}
	return p
}
