package job

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/expression"
)

// TypeCheck checks the expressions of p's operators against the shape of
// their input where it is known before the job runs. samples holds, by
// source operator id, a record of the shape that source emits (a decoded
// JSON value; see component.Sampler). A filter passes its input's shape
// on, a map the shape its expression gives the sample; after an aggregate,
// a window, a udf, a join of several inputs or a source without a sample
// the shape is unknown. Errors are expressions the checker refuses for a
// known shape (they would fail on every record); warnings name the
// operators whose expressions could not be checked. Paths are those of
// spec, under prefix.
func TypeCheck(prefix string, spec config.Job, p *Plan, samples map[string]any) (errs, warns []config.Problem) {
	index := map[string]int{}
	for i, o := range spec.Operators {
		index[o.ID] = i
	}
	out := map[string]any{} // operator id -> a record of its output shape; absent: unknown
	for _, op := range p.Operators {
		path := prefix + ".operators[" + strconv.Itoa(index[op.ID]) + "].config"
		in, known := inputSample(p, &op, out)
		if op.Kind == "source" {
			if s, ok := samples[op.ID]; ok {
				out[op.ID] = s
			}
			continue
		}
		exprs := operatorExprs(&op)
		if len(exprs) == 0 {
			continue
		}
		if !known {
			from := "its input"
			if len(op.Inputs) == 1 {
				from = "the records from " + p.Edges[op.Inputs[0]].From
			}
			warns = append(warns, config.Problem{Path: path, Message: fmt.Sprintf(
				"expressions not type-checked: the shape of %s is not known before the job runs (a generate source with a JSON context gives one)", from)})
			continue
		}
		bad := false
		for _, e := range exprs {
			if err := expression.CheckShape(e.src, in); err != nil {
				errs = append(errs, config.Problem{Path: path + "." + e.field, Message: fmt.Sprintf(
					"%v (checked against the records this operator receives, for example %s)", err, sampleText(in))})
				bad = true
			}
		}
		if bad {
			continue
		}
		switch op.Kind {
		case "filter":
			out[op.ID] = in
		case "map":
			if v, ok := evalSample(op.Map.Expression, in); ok {
				out[op.ID] = v
			}
		}
	}
	return errs, warns
}

// inputSample is a record of the shape op receives, when every record
// comes from one operator whose output shape is known.
func inputSample(p *Plan, op *Operator, out map[string]any) (any, bool) {
	var from string
	for _, ei := range op.Inputs {
		e := &p.Edges[ei]
		if e.Mode == Late || from != "" && e.From != from {
			return nil, false // late records of a window, or several inputs
		}
		from = e.From
	}
	if from == "" {
		return nil, false
	}
	v, ok := out[from]
	return v, ok
}

type namedExpr struct{ field, src string }

// operatorExprs are op's expressions with their fields under its config.
func operatorExprs(op *Operator) []namedExpr {
	var es []namedExpr
	aggs := func(as []Aggregation) {
		for i, a := range as {
			if a.Expression != "" {
				es = append(es, namedExpr{"aggregations[" + strconv.Itoa(i) + "].expression", a.Expression})
			}
		}
	}
	switch {
	case op.Map != nil:
		es = append(es, namedExpr{"expression", op.Map.Expression})
	case op.Filter != nil:
		es = append(es, namedExpr{"condition", op.Filter.Condition})
	case op.Aggregate != nil:
		es = append(es, namedExpr{"key", op.Aggregate.Key})
		aggs(op.Aggregate.Aggregations)
	case op.Window != nil:
		es = append(es, namedExpr{"key", op.Window.Key})
		aggs(op.Window.Aggregations)
	}
	return es
}

// evalSample is what the map expression src makes of sample.
func evalSample(src string, sample any) (any, bool) {
	prog, err := expression.Compile("expression", src)
	if err != nil {
		return nil, false
	}
	e := prog.Acquire()
	defer prog.Release(e)
	v, err := prog.Eval(e, deepCopy(sample), nil, false)
	return v, err == nil
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, f := range x {
			m[k] = deepCopy(f)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, f := range x {
			s[i] = deepCopy(f)
		}
		return s
	}
	return v
}

// sampleText is a short rendering of a sample record for a message.
func sampleText(v any) string {
	b, _ := json.Marshal(v)
	s := string(b)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
