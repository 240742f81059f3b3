package openapi

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/wire"
)

// Schema is a JSON Schema (2020-12) object as the document holds it.
type Schema = map[string]any

// TypeSchema is the explicit schema of a type whose JSON form reflection
// cannot see: one with its own MarshalJSON or MarshalText.
type TypeSchema struct {
	Schema Schema
	// ZeroIsNull says the type's zero value is written as null; a field of
	// the type is then nullable unless it is omitted when zero (omitzero).
	ZeroIsNull bool
}

// builtinTypes are the explicit schemas every document knows.
var builtinTypes = map[reflect.Type]TypeSchema{
	reflect.TypeFor[time.Time]():       {Schema: Schema{"type": "string", "format": "date-time"}},
	reflect.TypeFor[json.RawMessage](): {Schema: Schema{}},
	reflect.TypeFor[time.Duration]():   {Schema: Schema{"type": "integer", "description": "nanoseconds"}},
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// reflector turns Go types into schemas, collecting named struct types in
// defs. It is used by one Build call only.
type reflector struct {
	types map[reflect.Type]TypeSchema
	defs  map[string]Schema
	names map[reflect.Type]string
	taken map[string]reflect.Type
	err   error
}

func newReflector(types map[reflect.Type]TypeSchema) *reflector {
	all := make(map[reflect.Type]TypeSchema, len(builtinTypes)+len(types))
	for t, s := range builtinTypes {
		all[t] = s
	}
	for t, s := range types {
		all[t] = s
	}
	return &reflector{types: all, defs: map[string]Schema{}, names: map[reflect.Type]string{}, taken: map[string]reflect.Type{}}
}

// of returns the schema of v's type (a $ref for a named struct).
func (r *reflector) of(v any) Schema {
	switch v := v.(type) {
	case nil:
		return Schema{}
	case httpapi.AnyOf:
		alts := make([]any, len(v))
		for i, a := range v {
			alts[i] = r.of(a)
		}
		return Schema{"anyOf": alts}
	}
	return r.schema(reflect.TypeOf(v))
}

func (r *reflector) fail(format string, args ...any) Schema {
	if r.err == nil {
		r.err = fmt.Errorf("openapi: "+format, args...)
	}
	return Schema{}
}

func (r *reflector) schema(t reflect.Type) Schema {
	if ts, ok := r.types[t]; ok {
		return copySchema(ts.Schema)
	}
	if t.Kind() == reflect.Pointer {
		return r.schema(t.Elem())
	}
	if t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) ||
		(t.Kind() != reflect.String && (t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType))) {
		return r.fail("%s has its own JSON form: give its schema in Info.Types", t)
	}
	switch t.Kind() {
	case reflect.Bool:
		return Schema{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return Schema{"type": "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return Schema{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return Schema{"type": "number"}
	case reflect.String:
		return Schema{"type": "string"}
	case reflect.Interface:
		return Schema{}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return Schema{"type": "string", "contentEncoding": "base64"}
		}
		return Schema{"type": "array", "items": r.schema(t.Elem())}
	case reflect.Map:
		return Schema{"type": "object", "additionalProperties": r.schema(t.Elem())}
	case reflect.Struct:
		if t.Name() == "" {
			return r.object(t)
		}
		return Schema{"$ref": "#/components/schemas/" + r.define(t)}
	}
	return r.fail("%s (%s) has no JSON form", t, t.Kind())
}

// define returns the component name of a named struct type, reflecting it
// the first time.
func (r *reflector) define(t reflect.Type) string {
	if name, ok := r.names[t]; ok {
		return name
	}
	name := typeName(t)
	if other, ok := r.taken[name]; ok && other != t {
		// Two types of one short name: the later one is qualified by its
		// package.
		pkg := t.PkgPath()
		name = pkg[strings.LastIndex(pkg, "/")+1:] + "." + name
	}
	r.names[t], r.taken[name] = name, t
	r.defs[name] = nil // reserved: a recursive type refers to itself
	r.defs[name] = r.object(t)
	return name
}

var genericArg = regexp.MustCompile(`[\w./]*\.`)

// typeName is a component name for t: its name, with a generic type's
// arguments reduced to their own names (Page[...wire.Event] is
// Page_Event).
func typeName(t reflect.Type) string {
	name := t.Name()
	// Unexported types get a capital, as component names usually have.
	name = strings.ToUpper(name[:1]) + name[1:]
	base, args, ok := strings.Cut(name, "[")
	if !ok {
		return name
	}
	args = genericArg.ReplaceAllString(strings.TrimSuffix(args, "]"), "")
	args = strings.NewReplacer("[]", "ListOf", ",", "_", "*", "", "[", "_", "]", "").Replace(args)
	return base + "_" + args
}

// field is one JSON property of a struct, with the depth of the embedding
// it comes from (encoding/json: the shallowest wins).
type field struct {
	name     string
	depth    int
	schema   Schema
	required bool
}

// object is the schema of a struct's JSON object: its exported fields by
// their json names, embedded structs flattened as encoding/json does.
func (r *reflector) object(t reflect.Type) Schema {
	var fields []field
	r.fields(t, 0, &fields)
	props := Schema{}
	var required []string
	depth := map[string]int{}
	for _, f := range fields {
		if d, ok := depth[f.name]; ok && d <= f.depth {
			continue
		}
		depth[f.name] = f.depth
		props[f.name] = f.schema
		required = remove(required, f.name)
		if f.required {
			required = append(required, f.name)
		}
	}
	s := Schema{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = sortedStrings(required)
	}
	return s
}

func (r *reflector) fields(t reflect.Type, depth int, out *[]field) {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := sf.Type
		if sf.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				if _, explicit := r.types[et]; !explicit {
					r.fields(et, depth+1, out)
					continue
				}
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		omitEmpty, omitZero, asString := hasOpt(opts, "omitempty"), hasOpt(opts, "omitzero"), hasOpt(opts, "string")
		s := r.schema(ft)
		if asString {
			s = Schema{"type": "string"}
		}
		nullable := false
		switch {
		case ft.Kind() == reflect.Pointer:
			nullable = !omitEmpty && !omitZero
		case ft.Kind() == reflect.Interface:
			// {} already admits null.
		default:
			if ts, ok := r.types[ft]; ok && ts.ZeroIsNull && !omitZero {
				nullable = true
			}
		}
		if nullable {
			s = orNull(s)
		}
		*out = append(*out, field{name: name, depth: depth, schema: s, required: !omitEmpty && !omitZero})
	}
}

// orNull is s admitting null as well.
func orNull(s Schema) Schema {
	switch typ := s["type"].(type) {
	case string:
		out := copySchema(s)
		out["type"] = []any{typ, "null"}
		return out
	case nil:
		if _, ref := s["$ref"]; !ref {
			return s // no type: null is admitted already
		}
	}
	return Schema{"anyOf": []any{s, Schema{"type": "null"}}}
}

func hasOpt(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

func remove(list []string, s string) []string {
	out := list[:0]
	for _, v := range list {
		if v != s {
			out = append(out, v)
		}
	}
	return out
}

func copySchema(s Schema) Schema {
	out := make(Schema, len(s))
	for k, v := range s {
		out[k] = v
	}
	return out
}

// WireTypes are the explicit schemas of internal/wire's types with their
// own JSON form, for every surface's Info.Types.
var WireTypes = map[reflect.Type]TypeSchema{
	reflect.TypeFor[wire.Time](): {Schema: Schema{"type": "string", "format": "date-time"}, ZeroIsNull: true},
}
