package operator

import (
	"fmt"
	"math"

	"github.com/flowplane/flowplane/internal/job"
)

// Aggregation functions.
const (
	fnCount = iota
	fnSum
	fnMin
	fnMax
	fnAvg
	fnFirst
	fnLast
)

var functions = map[string]int{
	"count": fnCount, "sum": fnSum, "min": fnMin, "max": fnMax,
	"avg": fnAvg, "first": fnFirst, "last": fnLast,
}

// reserved are the result fields an aggregation name may not take.
var reserved = map[string]bool{"key": true, "window_start": true, "window_end": true}

// aggregation is one compiled aggregation.
type aggregation struct {
	name string
	fn   int
	expr *compiled // nil for count
}

// acc is the accumulator of one aggregation: n values seen; f their sum
// (sum, avg), minimum or maximum; v and t the value and time of the first
// or last record. first and last go by record time, ties by arrival, so
// that a window's result does not depend on the order records arrived in.
type acc struct {
	n int64
	f float64
	t int64
	v any
}

// accBytes estimates an accumulator's live bytes for the budget.
const accBytes = 48

// compileAggregations compiles aggs of the operator (there may be none:
// the result is then the key and window bounds); errors carry the
// configuration path.
func compileAggregations(aggs []job.Aggregation) ([]aggregation, error) {
	out := make([]aggregation, len(aggs))
	seen := make(map[string]bool, len(aggs))
	for i, a := range aggs {
		path := fmt.Sprintf("config.aggregations[%d]", i)
		fn, ok := functions[a.Function]
		switch {
		case a.Name == "":
			return nil, fmt.Errorf("%s.name: required", path)
		case reserved[a.Name]:
			return nil, fmt.Errorf("%s.name: %q is a result field of its own", path, a.Name)
		case seen[a.Name]:
			return nil, fmt.Errorf("%s.name: %q is used twice", path, a.Name)
		case !ok:
			return nil, fmt.Errorf("%s.function: %q is not one of count, sum, min, max, avg, first, last", path, a.Function)
		case fn != fnCount && a.Expression == "":
			return nil, fmt.Errorf("%s.expression: required by %s", path, a.Function)
		}
		seen[a.Name] = true
		out[i] = aggregation{name: a.Name, fn: fn}
		if fn != fnCount {
			c, err := compileExpr(path+".expression", a.Expression)
			if err != nil {
				return nil, err
			}
			out[i].expr = c
		}
	}
	return out, nil
}

// add accumulates r into accs (one per aggregation). op names the operator
// in errors.
func add(op string, aggs []aggregation, accs []acc, r *Record) error {
	for i := range aggs {
		a, c := &aggs[i], &accs[i]
		if a.fn == fnCount {
			c.n++
			continue
		}
		v, err := a.expr.eval(r, false)
		if err != nil {
			return fmt.Errorf("operator %s: aggregation %s: %w", op, a.name, err)
		}
		switch a.fn {
		case fnFirst:
			if c.n == 0 || r.Time < c.t {
				c.v, c.t = v, r.Time
			}
			c.n++
			continue
		case fnLast:
			if c.n == 0 || r.Time >= c.t {
				c.v, c.t = v, r.Time
			}
			c.n++
			continue
		}
		f, ok := number(v)
		if !ok {
			return fmt.Errorf("operator %s: aggregation %s (%s): the value is %s, not a number",
				op, a.name, fnName(a.fn), typeName(v))
		}
		switch a.fn {
		case fnSum, fnAvg:
			c.f += f
		case fnMin:
			if c.n == 0 || f < c.f {
				c.f = f
			}
		case fnMax:
			if c.n == 0 || f > c.f {
				c.f = f
			}
		}
		c.n++
	}
	return nil
}

// mergeAccs folds src into dst (session windows merging).
func mergeAccs(aggs []aggregation, dst, src []acc) {
	for i := range aggs {
		d, s := &dst[i], &src[i]
		if s.n == 0 {
			continue
		}
		if d.n == 0 {
			*d = *s
			continue
		}
		switch aggs[i].fn {
		case fnSum, fnAvg:
			d.f += s.f
		case fnMin:
			d.f = math.Min(d.f, s.f)
		case fnMax:
			d.f = math.Max(d.f, s.f)
		case fnFirst:
			if s.t < d.t {
				d.v, d.t = s.v, s.t
			}
		case fnLast:
			if s.t >= d.t {
				d.v, d.t = s.v, s.t
			}
		}
		d.n += s.n
	}
}

// results writes each aggregation's result into m under its name.
func results(aggs []aggregation, accs []acc, m map[string]any) {
	for i := range aggs {
		c := &accs[i]
		var v any
		switch aggs[i].fn {
		case fnCount:
			v = float64(c.n)
		case fnSum:
			v = c.f
		case fnMin, fnMax:
			if c.n > 0 {
				v = c.f
			}
		case fnAvg:
			if c.n > 0 {
				v = c.f / float64(c.n)
			}
		case fnFirst, fnLast:
			v = c.v
		}
		m[aggs[i].name] = v
	}
}

// number converts the numbers expressions produce to float64.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case float32:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint64:
		return float64(x), true
	case uint32:
		return float64(x), true
	}
	return 0, false
}

// typeName names v's type as JSON does.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("a %T", v)
}

func fnName(fn int) string {
	for name, f := range functions {
		if f == fn {
			return name
		}
	}
	return "?"
}
