package codec

import "github.com/flowplane/flowplane/internal/component"

func prop(typ, desc string) map[string]any { return component.Prop(typ, desc, nil) }

// stringList is an array-of-strings property.
func stringList(desc string) map[string]any {
	p := component.Prop("array", desc, nil)
	p["items"] = map[string]any{"type": "string"}
	return p
}
