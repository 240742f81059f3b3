package component

// DurationPattern is the JSON Schema pattern of a Go duration string such
// as "1s" or "250ms", the form of ArkFlow-compatible duration fields.
const DurationPattern = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`

// ObjectSchema is the schema of a component's fields beside "type": the
// listed properties and nothing else.
func ObjectSchema(props map[string]any, required ...string) map[string]any {
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

// Prop is one property of JSON type typ; def is omitted when nil (required
// fields have no default).
func Prop(typ, desc string, def any) map[string]any {
	p := map[string]any{"type": typ, "description": desc}
	if def != nil {
		p["default"] = def
	}
	return p
}

// DurationProp is a duration-string property.
func DurationProp(desc string, def any) map[string]any {
	p := Prop("string", desc, def)
	p["pattern"] = DurationPattern
	return p
}

// EnumProp is a string property limited to values.
func EnumProp(desc, def string, values ...string) map[string]any {
	p := Prop("string", desc, def)
	p["enum"] = values
	return p
}
