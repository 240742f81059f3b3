package config

import (
	"fmt"
	"reflect"
	"strconv"

	"github.com/flowplane/flowplane/internal/schema"
)

// Limits on what one configuration may hold. The document is at most
// MaxSize bytes; these bound what validating it costs and what its report
// weighs, whatever the document holds. The per-array limits are the
// `maxItems` tags of the Config types, and the schema's maxItems.
const (
	// MaxProblems is how many problems a validation lists; the rest are
	// counted in one last problem, "and N more problems".
	MaxProblems = 100
	// MaxArrayItems bounds an array the Config types give no limit of its
	// own: component fields, operator settings.
	MaxArrayItems = 4096
)

// CapProblems keeps the first MaxProblems problems and, when there are
// more, adds one problem without a path counting the rest.
func CapProblems(ps []Problem) []Problem {
	if len(ps) <= MaxProblems {
		return ps
	}
	more := len(ps) - MaxProblems
	out := make([]Problem, MaxProblems, MaxProblems+1)
	copy(out, ps)
	return append(out, Problem{Message: fmt.Sprintf("and %d more problems", more)})
}

// TotalProblems is how many problems ps stands for: its length, or, when
// CapProblems cut it, the problems listed plus those counted.
func TotalProblems(ps []Problem) int {
	if len(ps) == MaxProblems+1 {
		var n int
		if last := ps[MaxProblems]; last.Path == "" {
			if _, err := fmt.Sscanf(last.Message, "and %d more problems", &n); err == nil && n > 0 {
				return MaxProblems + n
			}
		}
	}
	return len(ps)
}

// limitTree cuts every array of tree longer than its limit down to it,
// in place, and reports each cut: the rest of the walk (secret
// references, schema, decoding) then costs no more than a configuration
// within the limits, and reports on the items kept.
func limitTree(tree any) (any, []Problem) {
	var ps []Problem
	out := limitValue(reflect.TypeFor[Config](), tree, nil, &ps)
	return out, ps
}

// limitValue walks v along type t (nil: a generic tree, such as a
// component's fields).
func limitValue(t reflect.Type, v any, path []string, ps *[]Problem) any {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[Component]() || (t != nil && t.Kind() == reflect.Map) {
		t = nil
	}
	switch tv := v.(type) {
	case map[string]any:
		if t == nil || t.Kind() != reflect.Struct {
			for k, e := range tv {
				tv[k] = limitValue(nil, e, append(path, k), ps)
			}
			return tv
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name := JSONName(f)
			e, ok := tv[name]
			if name == "" || !ok {
				continue
			}
			p := append(path, name)
			if s, ok := e.([]any); ok && f.Type.Kind() == reflect.Slice {
				tv[name] = limitSlice(f.Type.Elem(), s, maxItems(f), p, ps)
				continue
			}
			tv[name] = limitValue(f.Type, e, p, ps)
		}
		return tv
	case []any:
		var elem reflect.Type
		if t != nil && t.Kind() == reflect.Slice {
			elem = t.Elem()
		}
		return limitSlice(elem, tv, MaxArrayItems, path, ps)
	}
	return v
}

func limitSlice(elem reflect.Type, s []any, max int, path []string, ps *[]Problem) []any {
	if len(s) > max {
		*ps = append(*ps, Problem{Path: schema.Path(path), Message: fmt.Sprintf("%d items; at most %d are allowed (only the first %d were checked)", len(s), max, max)})
		clear(s[max:])
		s = s[:max]
	}
	for i, e := range s {
		s[i] = limitValue(elem, e, append(path, strconv.Itoa(i)), ps)
	}
	return s
}

// maxItems is a slice field's `maxItems` tag, or MaxArrayItems.
func maxItems(f reflect.StructField) int {
	if v := f.Tag.Get("maxItems"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			panic("config: bad maxItems tag on " + f.Name)
		}
		return n
	}
	return MaxArrayItems
}
