package config

import "maps"

// arkflowNulls replaces the nulls ArkFlow accepts where the schema wants a
// value: `processors:` with only comments under it (YAML null) is an
// empty list. The key stays required; only its null value is read as [].
func arkflowNulls(tree any) any {
	root, _ := tree.(map[string]any)
	streams, _ := root["streams"].([]any)
	for _, s := range streams {
		sm, _ := s.(map[string]any)
		p, _ := sm["pipeline"].(map[string]any)
		if v, present := p["processors"]; present && v == nil {
			p["processors"] = []any{}
		}
	}
	return tree
}

// withoutChildNames returns tree for the schema check: the name of every
// multiple_inputs child (ArkFlow's `inputs: [{name: orders, type: ...}]`)
// is removed, in copies (tree itself keeps them, for the component), since
// a child is checked against its own type's schema, which has no name.
// The names are the multiple_inputs input's to check; here only that one
// is a string.
func withoutChildNames(tree any) (any, []Problem) {
	root, ok := tree.(map[string]any)
	if !ok {
		return tree, nil
	}
	streams, ok := root["streams"].([]any)
	if !ok {
		return tree, nil
	}
	var ps []Problem
	out := make([]any, len(streams))
	changed := false
	for i, s := range streams {
		out[i] = s
		sm, ok := s.(map[string]any)
		if !ok {
			continue
		}
		in, ok := sm["input"]
		if !ok {
			continue
		}
		if nin, c := stripChildNames(in, "streams["+itoa(i)+"].input", &ps); c {
			sm = maps.Clone(sm)
			sm["input"] = nin
			out[i], changed = sm, true
		}
	}
	if !changed {
		return tree, ps
	}
	root = maps.Clone(root)
	root["streams"] = out
	return root, ps
}

// stripChildNames removes the names of a multiple_inputs component's
// children, nested ones too, reporting whether it changed anything.
func stripChildNames(comp any, path string, ps *[]Problem) (any, bool) {
	m, ok := comp.(map[string]any)
	if !ok || m["type"] != "multiple_inputs" {
		return comp, false
	}
	kids, ok := m["inputs"].([]any)
	if !ok {
		return comp, false
	}
	out := make([]any, len(kids))
	changed := false
	for i, k := range kids {
		out[i] = k
		km, ok := k.(map[string]any)
		if !ok {
			continue
		}
		p := path + ".inputs[" + itoa(i) + "]"
		if n, has := km["name"]; has {
			if _, isString := n.(string); !isString {
				*ps = append(*ps, at(p+".name", "got %s, want string", jsonType(n)))
			}
			km = maps.Clone(km)
			delete(km, "name")
			out[i], changed = km, true
		}
		if nk, c := stripChildNames(km, p, ps); c {
			out[i], changed = nk, true
		}
	}
	if !changed {
		return comp, false
	}
	m = maps.Clone(m)
	m["inputs"] = out
	return m, true
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "string"
}
