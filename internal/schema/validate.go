package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
	return &Validator{doc: inst.(map[string]any), schema: s}, nil
}

var printer = message.NewPrinter(language.English)

// Validate returns every problem of tree, sorted by path. tree must hold
// only JSON types (as produced by encoding/json into any).
func (v *Validator) Validate(tree any) []Problem {
	err := v.schema.Validate(tree)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []Problem{{Message: err.Error()}}
	}
	var out []Problem
	v.leaves(ve, &out)
	slices.SortStableFunc(out, func(a, b Problem) int { return strings.Compare(a.Path, b.Path) })
	return slices.Compact(out)
}

func (v *Validator) leaves(e *jsonschema.ValidationError, out *[]Problem) {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			v.leaves(c, out)
		}
		return
	}
	at := e.InstanceLocation
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
			msg := fmt.Sprintf("unknown %s %q", ck, got)
			if s := component.Suggest(got, want); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			return msg
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
