package component

import (
	"context"
	"fmt"
	"maps"
)

// KindTemporary is a stream's temporary table: a keyed store outside the
// stream (Redis, say) that processors look values up in to enrich
// messages (the spec's "Temporary storage tables for joins").
const KindTemporary Kind = "temporary"

// Temporary is a lookup table a stream declares in its `temporary` list
// under a name; processors find it by that name (Resources.Temporary).
//
// The stream connects it before its processors run (retrying a failed
// Connect as it does for inputs and outputs) and closes it after they
// stopped. Get may be called concurrently from every worker.
type Temporary interface {
	Connect(ctx context.Context) error
	// Get returns, for each key in order, the values stored under it: none
	// when the key is absent, one for a single value (a string), several
	// for a collection (a list, in its order). The values are the stored
	// bytes, which the temporary's codec says how to read (json: each is
	// a JSON document).
	Get(ctx context.Context, keys []string) ([][][]byte, error)
	Close(ctx context.Context) error
}

// TemporaryCtor builds a temporary from its configuration: the object
// without its "type" and "name" fields.
type TemporaryCtor func(conf map[string]any, res Resources) (Temporary, error)

// TemporaryNamePattern is what a temporary's name must match.
const TemporaryNamePattern = `^[A-Za-z_][A-Za-z0-9_.-]{0,127}$`

// RegisterTemporary adds a temporary. Its schema gains the required field
// "name", which every temporary has. A duplicate name panics.
func (r *Registry) RegisterTemporary(s Spec, c TemporaryCtor) {
	s.Kind = KindTemporary
	if s.Schema == nil {
		s.Schema = ObjectSchema(map[string]any{})
	}
	s.Schema = maps.Clone(s.Schema)
	props := map[string]any{}
	if p, ok := s.Schema["properties"].(map[string]any); ok {
		maps.Copy(props, p)
	}
	name := Prop("string", "The name processors use to find this table.", nil)
	name["pattern"] = TemporaryNamePattern
	props["name"] = name
	s.Schema["properties"] = props
	req := []string{"name"}
	switch old := s.Schema["required"].(type) {
	case []string:
		req = append(req, old...)
	case []any:
		for _, v := range old {
			req = append(req, fmt.Sprint(v))
		}
	}
	s.Schema["required"] = req
	r.register(s, c)
}

// NewTemporary builds a temporary; conf has neither "type" nor "name".
func (r *Registry) NewTemporary(name string, conf map[string]any, res Resources) (Temporary, error) {
	c, err := r.ctor(KindTemporary, name)
	if err != nil {
		return nil, err
	}
	return c.(TemporaryCtor)(conf, fill(res, KindTemporary, name))
}
