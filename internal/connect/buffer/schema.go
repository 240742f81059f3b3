package buffer

import (
	"fmt"
	"time"
)

// durationPattern is the JSON Schema pattern of a Go duration string.
const durationPattern = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`

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

func durationProp(desc string, def any) map[string]any {
	p := prop("string", desc, def)
	p["pattern"] = durationPattern
	return p
}

func countProp(desc string, def any) map[string]any {
	p := prop("integer", desc, def)
	p["minimum"] = 1
	return p
}

// parseDuration reads a positive duration field, naming it in the error.
func parseDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("%s: required", field)
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive duration such as \"1s\"", field, s)
	}
	return d, nil
}
