package component

// Info is one component as GET /components lists it (node and Hub).
type Info struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Summary string `json:"summary"`
}

// Detail is one component as GET /components/{kind}/{name} shows it.
type Detail struct {
	Info
	Schema  map[string]any `json:"schema"`
	Example string         `json:"example"`
}

// Catalog lists the registered components in the order of Specs.
func (r *Registry) Catalog() []Info {
	var out []Info
	for _, s := range r.Specs() {
		out = append(out, Info{Kind: string(s.Kind), Name: s.Name, Summary: s.Summary})
	}
	return out
}

// Describe returns one component's schema and example.
func (r *Registry) Describe(kind, name string) (Detail, bool) {
	s, ok := r.Lookup(Kind(kind), name)
	if !ok {
		return Detail{}, false
	}
	return Detail{Info: Info{Kind: kind, Name: name, Summary: s.Summary}, Schema: s.Schema, Example: s.Example}, true
}
