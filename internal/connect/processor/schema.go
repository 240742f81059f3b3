package processor

// object is the schema of a component's fields beside "type".
func object(props map[string]any, required ...string) map[string]any {
	s := map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"properties":           props,
	}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// prop is one property; def is omitted when nil (required fields).
func prop(typ, desc string, def any) map[string]any {
	p := map[string]any{"type": typ, "description": desc}
	if def != nil {
		p["default"] = def
	}
	return p
}

// enumProp is a string property limited to values.
func enumProp(desc, def string, values ...string) map[string]any {
	p := prop("string", desc, def)
	p["enum"] = values
	return p
}
