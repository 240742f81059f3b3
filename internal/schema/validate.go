package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/flowplane/flowplane/internal/component"
)

// Problem is one thing wrong with a configuration, at a path such as
// `streams[1].pipeline.processors[0].type`. The root has the empty path.
type Problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (p Problem) Error() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// Validator checks value trees against a compiled schema document.
type Validator struct {
	doc    map[string]any
	schema *jsonschema.Schema
	// defs holds the compiled schema of every definition that arrays
	// refer to for their items ("#/$defs/Stream"), for [Validator.Validate]
	// to check array items one at a time.
	defs map[string]*jsonschema.Schema
}

// Compile compiles a document made by Generate.
func Compile(doc map[string]any) (*Validator, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(ID, inst); err != nil {
		return nil, err
	}
	s, err := c.Compile(ID)
	if err != nil {
		return nil, fmt.Errorf("configuration schema does not compile: %w", err)
	}
	v := &Validator{doc: inst.(map[string]any), schema: s, defs: map[string]*jsonschema.Schema{}}
	for _, ref := range v.itemRefs() {
		ds, err := c.Compile(ID + ref)
		if err != nil {
			return nil, fmt.Errorf("configuration schema does not compile: %s: %w", ref, err)
		}
		v.defs[ref] = ds
	}
	return v, nil
}

var printer = message.NewPrinter(language.English)

// Validate returns every problem of tree, sorted by path. tree must hold
// only JSON types (as produced by encoding/json into any).
//
// Array items that are objects of their own definition (streams, their
// processors, jobs, operators...) are checked one at a time, apart from
// the object holding the array: the validator's error tree, a few
// kilobytes per problem, then lives for one item only, and what a
// validation costs grows with the document, not with the number of its
// problems.
func (v *Validator) Validate(tree any) []Problem {
	var out []Problem
	v.validate(v.schema, v.doc, tree, nil, &out)
	slices.SortStableFunc(out, func(a, b Problem) int { return strings.Compare(a.Path, b.Path) })
	return slices.Compact(out)
}

// item is an array item checked on its own, against the definition ref.
type item struct {
	ref   string
	value any
	at    []string
}

func (v *Validator) validate(s *jsonschema.Schema, def map[string]any, inst any, at []string, out *[]Problem) {
	var items []item
	inst = v.split(def, inst, at, &items, out)
	if err := s.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			v.leaves(ve, at, out)
		} else {
			*out = append(*out, Problem{Path: Path(at), Message: err.Error()})
		}
	}
	for _, it := range items {
		v.validate(v.defs[it.ref], v.def(it.ref), it.value, it.at, out)
	}
}

// split returns inst with the arrays def checks item by item emptied (in a
// copy: inst is not modified), adding their items to items and reporting
// a maxItems they exceed. It descends into properties that are objects of
// their own definition.
func (v *Validator) split(def map[string]any, inst any, at []string, items *[]item, out *[]Problem) any {
	m, ok := inst.(map[string]any)
	if !ok {
		return inst
	}
	props, _ := def["properties"].(map[string]any)
	var cp map[string]any
	set := func(k string, val any) {
		if cp == nil {
			cp = maps.Clone(m)
		}
		cp[k] = val
	}
	for _, name := range slices.Sorted(maps.Keys(props)) {
		val, present := m[name]
		ps, _ := props[name].(map[string]any)
		if !present || ps == nil {
			continue
		}
		p := append(slices.Clone(at), name)
		if ref := itemRef(ps); ref != "" && v.defs[ref] != nil {
			if arr, ok := val.([]any); ok && len(arr) > 0 {
				if max, err := strconv.Atoi(fmt.Sprint(ps["maxItems"])); err == nil && len(arr) > max {
					*out = append(*out, Problem{Path: Path(p), Message: (&kind.MaxItems{Got: len(arr), Want: max}).LocalizedString(printer)})
				}
				for i, e := range arr {
					*items = append(*items, item{ref: ref, value: e, at: append(slices.Clone(p), strconv.Itoa(i))})
				}
				set(name, []any{})
			}
			continue
		}
		if ref, _ := ps["$ref"].(string); ref != "" {
			if sub := v.def(ref); sub != nil {
				if nv := v.split(sub, val, p, items, out); !sameMap(nv, val) {
					set(name, nv)
				}
			}
		}
	}
	if cp == nil {
		return inst
	}
	return cp
}

func sameMap(a, b any) bool {
	ma, ok1 := a.(map[string]any)
	mb, ok2 := b.(map[string]any)
	if !ok1 || !ok2 {
		return !ok1 && !ok2
	}
	return reflect.ValueOf(ma).UnsafePointer() == reflect.ValueOf(mb).UnsafePointer()
}

// itemRef is the definition an array schema's items refer to, or "".
func itemRef(ps map[string]any) string {
	if ps["type"] != "array" {
		return ""
	}
	items, _ := ps["items"].(map[string]any)
	ref, _ := items["$ref"].(string)
	return ref
}

// def returns the definition a local reference ("#/$defs/Stream") names.
func (v *Validator) def(ref string) map[string]any {
	name, ok := strings.CutPrefix(ref, "#/$defs/")
	if !ok {
		return nil
	}
	defs, _ := v.doc["$defs"].(map[string]any)
	d, _ := defs[name].(map[string]any)
	return d
}

// itemRefs lists every definition array items refer to, from the root
// and from every definition.
func (v *Validator) itemRefs() []string {
	seen := map[string]bool{}
	scan := func(def map[string]any) {
		props, _ := def["properties"].(map[string]any)
		for _, p := range props {
			if ps, ok := p.(map[string]any); ok {
				if ref := itemRef(ps); ref != "" && v.def(ref) != nil {
					seen[ref] = true
				}
			}
		}
	}
	scan(v.doc)
	defs, _ := v.doc["$defs"].(map[string]any)
	for _, d := range defs {
		if dm, ok := d.(map[string]any); ok {
			scan(dm)
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

func (v *Validator) leaves(e *jsonschema.ValidationError, prefix []string, out *[]Problem) {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			v.leaves(c, prefix, out)
		}
		return
	}
	at := slices.Concat(prefix, e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		known := v.propertiesAt(e.SchemaURL)
		for _, p := range k.Properties {
			*out = append(*out, Problem{Path: Path(append(slices.Clone(at), p)), Message: unknownField(p, known)})
		}
	case *kind.Required:
		for _, m := range k.Missing {
			*out = append(*out, Problem{Path: Path(append(slices.Clone(at), m)), Message: "required field is missing"})
		}
	case *kind.Enum:
		*out = append(*out, Problem{Path: Path(at), Message: v.enumMessage(e.SchemaURL, k)})
	case *kind.FalseSchema:
		*out = append(*out, Problem{Path: Path(at), Message: "field not allowed here"})
	default:
		*out = append(*out, Problem{Path: Path(at), Message: e.ErrorKind.LocalizedString(printer)})
	}
}

func unknownField(name string, known []string) string {
	if hint, ok := Removed[name]; ok {
		return hint
	}
	msg := "unknown field"
	if s := component.Suggest(name, known); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return msg
}

// enumMessage words an unknown component type the way users think of it.
func (v *Validator) enumMessage(schemaURL string, k *kind.Enum) string {
	want := make([]string, 0, len(k.Want))
	for _, w := range k.Want {
		want = append(want, fmt.Sprint(w))
	}
	got := fmt.Sprint(k.Got)
	for _, ck := range component.Kinds {
		if strings.Contains(schemaURL, "/$defs/"+kindDef(ck)+"/") {
			// The registry's wording: a suggestion for a typo, and why
			// for a name flowplane cannot offer (vrl, python).
			return (&component.UnknownError{Kind: ck, Name: got, Known: want}).Error()
		}
	}
	msg := fmt.Sprintf("%q is not one of %s", got, strings.Join(want, ", "))
	if s := component.Suggest(got, want); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return msg
}

// propertiesAt lists the properties of the schema object an
// additionalProperties keyword belongs to.
func (v *Validator) propertiesAt(schemaURL string) []string {
	_, ptr, ok := strings.Cut(schemaURL, "#")
	if !ok {
		return nil
	}
	ptr = strings.TrimSuffix(ptr, "/additionalProperties")
	var cur any = v.doc
	for tok := range strings.SplitSeq(strings.TrimPrefix(ptr, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	m, _ := cur.(map[string]any)
	props, _ := m["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Path writes an instance location as a configuration path: keys joined by
// dots, array indices in brackets.
func Path(elems []string) string {
	var b strings.Builder
	for _, e := range elems {
		if isIndex(e) {
			b.WriteString("[" + e + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(e)
	}
	return b.String()
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
