package job

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/expression"
)

// AggregateFunctions are the functions an aggregation may use.
var AggregateFunctions = []string{"count", "sum", "min", "max", "avg", "first", "last"}

// WindowTypes are the window assigners.
var WindowTypes = []string{"tumbling", "sliding", "session"}

// ReservedResultNames are the result fields an aggregation may not be named
// after: the key and window bounds share the result object with them.
var ReservedResultNames = []string{"key", "window_start", "window_end"}

// problems collects configuration problems.
type problems []config.Problem

func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, config.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// fields reads one configuration object strictly: every key must be one of
// known, and the typed getters report missing and mistyped fields.
type fields struct {
	m    map[string]any
	path string
	ps   *problems
}

// object starts reading v at path, reporting unknown fields; ok is false
// (and a problem added) when v is not an object.
func object(v any, path string, known []string, ps *problems) (fields, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		ps.add(path, "must be an object, got %s", typeName(v))
		return fields{}, false
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if slices.Contains(known, k) {
			continue
		}
		if s := component.Suggest(k, known); s != "" {
			ps.add(path+"."+k, "unknown field; did you mean %q?", s)
		} else {
			ps.add(path+"."+k, "unknown field; known fields: %s", strings.Join(known, ", "))
		}
	}
	return fields{m: m, path: path, ps: ps}, true
}

func (f fields) has(name string) bool { _, ok := f.m[name]; return ok }

// str returns the string field name; required fields must be present and
// non-empty.
func (f fields) str(name string, required bool) string {
	v, ok := f.m[name]
	if !ok {
		if required {
			f.ps.add(f.path+"."+name, "required field is missing")
		}
		return ""
	}
	s, ok := v.(string)
	if !ok {
		f.ps.add(f.path+"."+name, "must be a string, got %s", typeName(v))
		return ""
	}
	if required && strings.TrimSpace(s) == "" {
		f.ps.add(f.path+"."+name, "must not be empty")
	}
	return s
}

// int returns the integer field name; ok is false, and a problem added,
// when it is present but not an integer.
func (f fields) int(name string) (n int64, ok bool) {
	v, present := f.m[name]
	if !present {
		return 0, true
	}
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), true
		}
	}
	f.ps.add(f.path+"."+name, "must be an integer, got %s", typeName(v))
	return 0, false
}

func typeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64:
		if x == math.Trunc(x) {
			return "an integer"
		}
		return "a number"
	case int, int64:
		return "an integer"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// decodeConfig decodes op's config into the typed config of its kind,
// setting the matching field of out. Unknown kinds are left alone: the
// configuration's own validation reports them.
func decodeConfig(op config.Operator, path string, out *Operator, ps *problems) {
	q := path + ".config"
	switch op.Kind {
	case "source", "sink":
		if op.Config != nil {
			list := map[string]string{"source": "sources[].config", "sink": "sinks[].config"}[op.Kind]
			ps.add(q, "a %s operator takes no config: its component's settings go in %s", op.Kind, list)
		}
		return
	case "map", "filter", "aggregate", "window", "udf":
	default:
		return
	}
	var raw any = op.Config
	if op.Config == nil {
		raw = map[string]any{}
	}
	switch op.Kind {
	case "map":
		f, ok := object(raw, q, []string{"expression"}, ps)
		if !ok {
			return
		}
		c := &MapConfig{Expression: f.str("expression", true)}
		checkExpr(q+".expression", c.Expression, ps)
		out.Map = c
	case "filter":
		f, ok := object(raw, q, []string{"condition"}, ps)
		if !ok {
			return
		}
		c := &FilterConfig{Condition: f.str("condition", true)}
		checkExpr(q+".condition", c.Condition, ps)
		out.Filter = c
	case "aggregate":
		f, ok := object(raw, q, []string{"key", "aggregations"}, ps)
		if !ok {
			return
		}
		c := &AggregateConfig{Key: f.str("key", true)}
		checkExpr(q+".key", c.Key, ps)
		c.Aggregations = aggregations(f, ps)
		out.Aggregate = c
	case "window":
		f, ok := object(raw, q, []string{"key", "window", "aggregations"}, ps)
		if !ok {
			return
		}
		c := &WindowConfig{Key: f.str("key", true)}
		checkExpr(q+".key", c.Key, ps)
		if !f.has("window") {
			ps.add(q+".window", "required field is missing")
		} else {
			c.Window = windowSpec(f.m["window"], q+".window", ps)
		}
		c.Aggregations = aggregations(f, ps)
		out.Window = c
	case "udf":
		f, ok := object(raw, q, []string{"module", "function"}, ps)
		if !ok {
			return
		}
		out.UDF = &UDFConfig{Module: f.str("module", true), Function: f.str("function", true)}
	}
}

func windowSpec(v any, q string, ps *problems) WindowSpec {
	f, ok := object(v, q, []string{"type", "size_ms", "slide_ms", "gap_ms"}, ps)
	if !ok {
		return WindowSpec{}
	}
	w := WindowSpec{Type: f.str("type", true)}
	bad := map[string]bool{}
	for _, fld := range []struct {
		name string
		dst  *int64
	}{{"size_ms", &w.SizeMs}, {"slide_ms", &w.SlideMs}, {"gap_ms", &w.GapMs}} {
		n, ok := f.int(fld.name)
		*fld.dst, bad[fld.name] = n, !ok
	}
	positive := func(name string, n int64) {
		switch {
		case bad[name]:
		case !f.has(name):
			ps.add(q+"."+name, "required field is missing: a %s window needs %s > 0", w.Type, name)
		case n <= 0:
			ps.add(q+"."+name, "must be > 0, got %d", n)
		}
	}
	notApplicable := func(names ...string) {
		for _, name := range names {
			if f.has(name) {
				ps.add(q+"."+name, "does not apply to a %s window", w.Type)
			}
		}
	}
	switch w.Type {
	case "tumbling":
		positive("size_ms", w.SizeMs)
		notApplicable("slide_ms", "gap_ms")
	case "sliding":
		positive("size_ms", w.SizeMs)
		positive("slide_ms", w.SlideMs)
		if w.SizeMs > 0 && w.SlideMs > w.SizeMs {
			ps.add(q+".slide_ms", "must not exceed size_ms (%d), got %d", w.SizeMs, w.SlideMs)
		}
		notApplicable("gap_ms")
	case "session":
		positive("gap_ms", w.GapMs)
		notApplicable("size_ms", "slide_ms")
	case "":
	default:
		msg := fmt.Sprintf("%q is not one of %s", w.Type, strings.Join(WindowTypes, ", "))
		if s := component.Suggest(w.Type, WindowTypes); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		ps.add(q+".type", "%s", msg)
	}
	return w
}

// aggregations decodes the optional aggregations list of f.
func aggregations(f fields, ps *problems) []Aggregation {
	v, ok := f.m["aggregations"]
	if !ok {
		return nil
	}
	q := f.path + ".aggregations"
	list, ok := v.([]any)
	if !ok {
		ps.add(q, "must be an array, got %s", typeName(v))
		return nil
	}
	out := make([]Aggregation, 0, len(list))
	seen := map[string]int{}
	for i, item := range list {
		qi := fmt.Sprintf("%s[%d]", q, i)
		g, ok := object(item, qi, []string{"name", "function", "expression"}, ps)
		if !ok {
			continue
		}
		a := Aggregation{Name: g.str("name", true), Function: g.str("function", true), Expression: g.str("expression", false)}
		if a.Name != "" {
			if slices.Contains(ReservedResultNames, a.Name) {
				ps.add(qi+".name", "%q is a result field of its own (%s); choose another name", a.Name, strings.Join(ReservedResultNames, ", "))
			} else if first, dup := seen[a.Name]; dup {
				ps.add(qi+".name", "duplicate aggregation name %q (also %s[%d])", a.Name, q, first)
			} else {
				seen[a.Name] = i
			}
		}
		switch {
		case a.Function == "":
		case !slices.Contains(AggregateFunctions, a.Function):
			msg := fmt.Sprintf("%q is not one of %s", a.Function, strings.Join(AggregateFunctions, ", "))
			if s := component.Suggest(a.Function, AggregateFunctions); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			ps.add(qi+".function", "%s", msg)
		case a.Function == "count":
			if g.has("expression") {
				ps.add(qi+".expression", "count counts records and takes no expression")
			}
		case !g.has("expression"):
			ps.add(qi+".expression", "required field is missing: %s needs the expression it aggregates", a.Function)
		default:
			if strings.TrimSpace(a.Expression) == "" {
				ps.add(qi+".expression", "must not be empty")
			}
			checkExpr(qi+".expression", a.Expression, ps)
		}
		out = append(out, a)
	}
	return out
}

// checkExpr compiles src as the operators will, with the record as this
// and its metadata as meta, and reports a compile error at path. Empty
// sources are reported by the caller.
func checkExpr(path, src string, ps *problems) {
	if strings.TrimSpace(src) == "" {
		return
	}
	if err := CheckExpression(src); err != nil {
		ps.add(path, "%s", err.Error())
	}
}

// CheckExpression compile-checks an operator expression (map expression,
// filter condition, key, aggregation expression) in the environment the
// operators evaluate it in: this is the record, meta its metadata, and the
// functions of the mapping processor (merge, uuid) are available.
func CheckExpression(src string) error {
	return expression.Check(src)
}
