package config

import (
	"encoding/json"
	"errors"
	"maps"
)

// Component is a component object: its type plus the component's own fields,
// written flat as in `{type: generate, count: 10}`.
type Component struct {
	Type   string
	Fields map[string]any
}

// MarshalJSON writes the flat form.
func (c Component) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(c.Fields)+1)
	maps.Copy(m, c.Fields)
	m["type"] = c.Type
	return json.Marshal(m)
}

// UnmarshalJSON reads the flat form.
func (c *Component) UnmarshalJSON(b []byte) error {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	t, ok := m["type"].(string)
	if !ok {
		return errors.New("component needs a string field type")
	}
	delete(m, "type")
	c.Type, c.Fields = t, m
	return nil
}
