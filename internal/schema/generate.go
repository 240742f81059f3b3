package schema

import (
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"strings"

	"github.com/flowplane/flowplane/internal/component"
)

// ID is the $id of the configuration schema.
const ID = "https://flowplane.dev/schema/config.json"

// Removed lists fields that existed in earlier releases, with the hint given
// when a configuration still uses them. The schema rejects them as unknown.
var Removed = map[string]string{
	"hub_url": `field hub_url was removed in 0.6; use the list hub_urls instead, e.g. hub_urls: ["http://hub:8080"] (addresses are tried in order)`,
}

// Generate returns the JSON Schema document of root (the Config type), with
// component objects selected by their type from reg.
func Generate(root reflect.Type, reg *component.Registry) map[string]any {
	g := &generator{defs: map[string]any{}}
	doc := g.object(root)
	doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	doc["$id"] = ID
	doc["title"] = "flowplane configuration"
	for _, k := range component.Kinds {
		g.defs[kindDef(k)] = kindSchema(k, reg)
		for _, s := range specsOf(reg, k) {
			g.defs[specDef(k, s.Name)] = specSchema(s)
		}
	}
	addOperatorConfigs(g.defs)
	doc["$defs"] = g.defs
	return doc
}

func kindDef(k component.Kind) string           { return "component." + string(k) }
func specDef(k component.Kind, n string) string { return string(k) + "." + n }

func specsOf(reg *component.Registry, k component.Kind) []component.Spec {
	var out []component.Spec
	for _, n := range reg.Names(k) {
		s, _ := reg.Lookup(k, n)
		out = append(out, s)
	}
	return out
}

// kindSchema selects a component's own schema by its type field.
func kindSchema(k component.Kind, reg *component.Registry) map[string]any {
	names := reg.Names(k)
	var branches []any
	for _, n := range names {
		branches = append(branches, map[string]any{
			"if":   map[string]any{"properties": map[string]any{"type": map[string]any{"const": n}}, "required": []any{"type"}},
			"then": map[string]any{"$ref": "#/$defs/" + specDef(k, n)},
		})
	}
	enum := make([]any, len(names))
	for i, n := range names {
		enum[i] = n
	}
	s := map[string]any{
		"type":        "object",
		"description": fmt.Sprintf("A %s component, selected by type.", k),
		"required":    []any{"type"},
		"properties": map[string]any{
			"type": map[string]any{"type": "string", "enum": enum, "description": fmt.Sprintf("The %s type.", k)},
		},
	}
	if len(branches) > 0 {
		s["allOf"] = branches
	}
	return s
}

// specSchema is a component's schema with its type field added.
func specSchema(s component.Spec) map[string]any {
	out := maps.Clone(s.Schema)
	props := map[string]any{}
	if p, ok := out["properties"].(map[string]any); ok {
		maps.Copy(props, p)
	}
	props["type"] = map[string]any{"const": s.Name}
	out["properties"] = props
	out["type"] = "object"
	out["additionalProperties"] = false
	if s.Summary != "" {
		out["description"] = s.Summary
	}
	if s.Example != "" {
		out["examples"] = []any{s.Example}
	}
	return out
}

type generator struct {
	defs map[string]any
}

func (g *generator) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []any
	for i := range t.NumField() {
		f := t.Field(i)
		name := jsonName(f)
		if name == "" {
			continue
		}
		props[name] = g.field(f)
		if f.Tag.Get("required") == "true" {
			required = append(required, name)
		}
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func (g *generator) field(f reflect.StructField) map[string]any {
	var s map[string]any
	if k := f.Tag.Get("component"); k != "" {
		ref := map[string]any{"$ref": "#/$defs/" + kindDef(component.Kind(k))}
		if f.Type.Kind() == reflect.Slice {
			s = map[string]any{"type": "array", "items": ref}
		} else {
			s = ref
		}
	} else {
		s = g.typ(f.Type)
	}
	if d := f.Tag.Get("doc"); d != "" {
		s["description"] = d
	}
	if e := f.Tag.Get("enum"); e != "" {
		var vals []any
		for v := range strings.SplitSeq(e, "|") {
			vals = append(vals, v)
		}
		s["enum"] = vals
	}
	if p := f.Tag.Get("pattern"); p != "" {
		s["pattern"] = p
	}
	for tag, kw := range map[string]string{"min": "minimum", "max": "maximum", "maxItems": "maxItems"} {
		if v := f.Tag.Get(tag); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				panic("schema: bad " + tag + " tag on " + f.Name)
			}
			s[kw] = n
		}
	}
	if d, ok := f.Tag.Lookup("default"); ok {
		switch f.Type.Kind() {
		case reflect.Bool:
			s["default"] = d == "true"
		case reflect.Int, reflect.Int64:
			n, _ := strconv.Atoi(d)
			s["default"] = n
		case reflect.Float64:
			f, _ := strconv.ParseFloat(d, 64)
			s["default"] = f
		default:
			s["default"] = d
		}
	}
	return s
}

func (g *generator) typ(t reflect.Type) map[string]any {
	switch t.Kind() {
	case reflect.Pointer:
		return g.typ(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.typ(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object"}
	case reflect.Struct:
		name := t.Name()
		if _, ok := g.defs[name]; !ok {
			g.defs[name] = nil // reserve against recursion
			g.defs[name] = g.object(t)
		}
		return map[string]any{"$ref": "#/$defs/" + name}
	}
	panic("schema: unsupported field type " + t.String())
}

func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return f.Name
	}
	return name
}
