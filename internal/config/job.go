package config

import (
	"slices"
	"strings"

	"github.com/flowplane/flowplane/internal/component"
)

// Operator kinds of a job graph.
var (
	OperatorKinds = []string{"source", "map", "filter", "aggregate", "window", "sink", "udf"}
	// ReservedOperatorKinds are named by the interface but not supported yet.
	ReservedOperatorKinds = []string{"join"}
	// StatefulOperatorKinds need a state backend.
	StatefulOperatorKinds = []string{"aggregate", "window"}
	// StateBackends are the supported job state backends.
	StateBackends = []string{"embedded_kv"}
)

// validate checks one job's graph and its state and time rules.
func (j *Job) validate(p string, reg *component.Registry) []Problem {
	var ps []Problem
	ops := map[string]string{} // id -> kind
	stateful := ""
	for i, op := range j.Operators {
		op := op
		q := p + ".operators[" + itoa(i) + "]"
		if _, dup := ops[op.ID]; dup {
			ps = append(ps, at(q+".id", "duplicate operator id %q", op.ID))
		}
		ops[op.ID] = op.Kind
		switch {
		case slices.Contains(ReservedOperatorKinds, op.Kind):
			ps = append(ps, at(q+".kind", "operator kind %q is reserved and not supported in this release", op.Kind))
		case !slices.Contains(OperatorKinds, op.Kind):
			msg := "unknown operator kind %q; use one of " + strings.Join(OperatorKinds, ", ")
			if s := component.Suggest(op.Kind, OperatorKinds); s != "" {
				msg = "unknown operator kind %q; did you mean \"" + s + "\"?"
			}
			ps = append(ps, at(q+".kind", msg, op.Kind))
		case slices.Contains(StatefulOperatorKinds, op.Kind) && stateful == "":
			stateful = op.ID
		}
	}
	edgeIDs := map[string]bool{}
	adj := map[string][]string{}
	for i, e := range j.Edges {
		q := p + ".edges[" + itoa(i) + "]"
		if edgeIDs[e.ID] {
			ps = append(ps, at(q+".id", "duplicate edge id %q", e.ID))
		}
		edgeIDs[e.ID] = true
		okFrom, okTo := ops[e.From] != "", ops[e.To] != ""
		if !okFrom {
			ps = append(ps, at(q+".from", "no operator %q in this job", e.From))
		}
		if !okTo {
			ps = append(ps, at(q+".to", "no operator %q in this job", e.To))
		}
		if okFrom && okTo {
			adj[e.From] = append(adj[e.From], e.To)
		}
	}
	if cycle := findCycle(j.Operators, adj); cycle != nil {
		ps = append(ps, at(p+".edges", "the operator graph must be acyclic; cycle: %s", strings.Join(cycle, " -> ")))
	}
	bound := map[string]bool{}
	for i, s := range j.Sources {
		q := p + ".sources[" + itoa(i) + "]"
		ps = append(ps, binding(reg, ops, q, s.OperatorID, "source", "input_type", component.KindInput, s.InputType)...)
		bound[s.OperatorID] = true
		if s.Time != nil {
			ps = append(ps, s.Time.validate(q+".time", ops)...)
		}
	}
	for i, s := range j.Sinks {
		q := p + ".sinks[" + itoa(i) + "]"
		ps = append(ps, binding(reg, ops, q, s.OperatorID, "sink", "output_type", component.KindOutput, s.OutputType)...)
		bound[s.OperatorID] = true
	}
	for i, op := range j.Operators {
		if (op.Kind == "source" || op.Kind == "sink") && !bound[op.ID] {
			list := "sources"
			if op.Kind == "sink" {
				list = "sinks"
			}
			ps = append(ps, at(p+".operators["+itoa(i)+"]", "%s operator %q has no entry in %s", op.Kind, op.ID, list))
		}
	}
	ps = append(ps, j.validateState(p, stateful)...)
	if rs := j.RestartStrategy; rs != nil && rs.MaxDelayMs < rs.DelayMs {
		ps = append(ps, at(p+".restart_strategy.max_delay_ms", "must be at least delay_ms (%d), got %d", rs.DelayMs, rs.MaxDelayMs))
	}
	return ps
}

// binding checks a source or sink entry at q: its operator exists and has
// the wanted kind, and its component type is registered.
func binding(reg *component.Registry, ops map[string]string, q, opID, wantKind, typeField string, kind component.Kind, typ string) []Problem {
	var ps []Problem
	switch k := ops[opID]; {
	case k == "":
		ps = append(ps, at(q+".operator_id", "no operator %q in this job", opID))
	case k != wantKind:
		ps = append(ps, at(q+".operator_id", "operator %q is a %s, not a %s", opID, k, wantKind))
	}
	if _, ok := reg.Lookup(kind, typ); !ok {
		ps = append(ps, at(q+"."+typeField, "%s", (&component.UnknownError{Kind: kind, Name: typ, Known: reg.Names(kind)}).Error()))
	}
	return ps
}

func (j *Job) validateState(p, stateful string) []Problem {
	var ps []Problem
	st := j.State
	if st == nil {
		if stateful != "" {
			ps = append(ps, at(p+".state", "operator %q is stateful; declare state (backend: embedded_kv)", stateful))
		}
		return ps
	}
	q := p + ".state"
	if !slices.Contains(StateBackends, st.Backend) {
		ps = append(ps, at(q+".backend", "unsupported state backend %q; supported: %s", st.Backend, strings.Join(StateBackends, ", ")))
	}
	if st.Durability == "durable" && j.Checkpoint == nil {
		ps = append(ps, at(q+".durability", "durable state requires checkpoint (with object_store_uri), or declare durability: ephemeral"))
	}
	if st.MaxPendingTransactions <= 0 {
		ps = append(ps, at(q+".max_pending_transactions", "must be a positive integer, got %d", st.MaxPendingTransactions))
	}
	if st.MaxBytes != nil && *st.MaxBytes <= 0 {
		ps = append(ps, at(q+".max_bytes", "must be a positive integer, got %d", *st.MaxBytes))
	}
	return ps
}

func (t *Time) validate(q string, ops map[string]string) []Problem {
	var ps []Problem
	if t.LateEventPolicy == "route" {
		switch {
		case t.LateEventRoute == "":
			ps = append(ps, at(q+".late_event_route", "late_event_policy route needs late_event_route naming the operator that receives late events"))
		case ops[t.LateEventRoute] == "":
			ps = append(ps, at(q+".late_event_route", "no operator %q in this job", t.LateEventRoute))
		}
	}
	if t.Mode == "processing_time" && t.TimestampField != "" {
		ps = append(ps, at(q+".timestamp_field", "timestamp_field is read only in event_time mode"))
	}
	return ps
}

// findCycle returns one cycle of the graph as a list of operator ids that
// starts and ends at the same operator, or nil when the graph is a DAG.
func findCycle(ops []Operator, adj map[string][]string) []string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var visit func(string) []string
	visit = func(n string) []string {
		color[n] = grey
		stack = append(stack, n)
		for _, m := range adj[n] {
			switch color[m] {
			case grey:
				i := slices.Index(stack, m)
				return append(slices.Clone(stack[i:]), m)
			case white:
				if c := visit(m); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
		return nil
	}
	for _, op := range ops {
		if color[op.ID] == white {
			if c := visit(op.ID); c != nil {
				return c
			}
		}
	}
	return nil
}
