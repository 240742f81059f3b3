package component

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
)

// Spec describes a component to users and to the configuration schema.
type Spec struct {
	Name    string
	Kind    Kind
	Summary string
	// Schema is the JSON Schema (an object schema) of the component's fields
	// other than "type". Properties not listed are rejected.
	Schema map[string]any
	// Example is a YAML component object, "type" included, that builds and runs.
	Example string
}

type entry struct {
	spec     Spec
	ctor     any
	ownCodec bool // an input or output that declares its own codec field
}

// Registry maps (kind, name) to a spec and a constructor. It is safe for
// concurrent use; registration normally happens from init().
type Registry struct {
	mu      sync.RWMutex // guards m and arkflow
	m       map[Kind]map[string]entry
	arkflow []ArkFlowRow
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{m: make(map[Kind]map[string]entry)} }

// Default is the registry the built-in components register into.
var Default = NewRegistry()

func (r *Registry) register(spec Spec, ctor any) {
	if spec.Name == "" || ctor == nil {
		panic("component: registration needs a name and a constructor")
	}
	if spec.Schema == nil {
		spec.Schema = map[string]any{"type": "object"}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.m[spec.Kind]
	if k == nil {
		k = make(map[string]entry)
		r.m[spec.Kind] = k
	}
	if _, dup := k[spec.Name]; dup {
		panic(fmt.Sprintf("component: %s %q registered twice", spec.Kind, spec.Name))
	}
	e := entry{spec: spec, ctor: ctor}
	if spec.Kind == KindInput || spec.Kind == KindOutput {
		props, _ := spec.Schema["properties"].(map[string]any)
		_, e.ownCodec = props[codecField]
		e.spec.Schema = withCodecField(spec.Schema)
	}
	k[spec.Name] = e
}

// RegisterInput adds an input. A duplicate name panics.
func (r *Registry) RegisterInput(s Spec, c InputCtor) { s.Kind = KindInput; r.register(s, c) }

// RegisterBuffer adds a buffer. A duplicate name panics.
func (r *Registry) RegisterBuffer(s Spec, c BufferCtor) { s.Kind = KindBuffer; r.register(s, c) }

// RegisterProcessor adds a processor. A duplicate name panics.
func (r *Registry) RegisterProcessor(s Spec, c ProcessorCtor) {
	s.Kind = KindProcessor
	r.register(s, c)
}

// RegisterOutput adds an output. A duplicate name panics.
func (r *Registry) RegisterOutput(s Spec, c OutputCtor) { s.Kind = KindOutput; r.register(s, c) }

// Lookup returns the spec of one component.
func (r *Registry) Lookup(kind Kind, name string) (Spec, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.m[kind][name]
	return e.spec, ok
}

// Names lists the registered names of one kind, sorted.
func (r *Registry) Names(kind Kind) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.m[kind]))
	for n := range r.m[kind] {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Specs lists every spec, by kind in pipeline order, then by name.
func (r *Registry) Specs() []Spec {
	var out []Spec
	for _, k := range Kinds {
		for _, n := range r.Names(k) {
			s, _ := r.Lookup(k, n)
			out = append(out, s)
		}
	}
	return out
}

func (r *Registry) ctor(kind Kind, name string) (any, error) {
	r.mu.RLock()
	e, ok := r.m[kind][name]
	r.mu.RUnlock()
	if !ok {
		return nil, &UnknownError{Kind: kind, Name: name, Known: r.Names(kind)}
	}
	return e.ctor, nil
}

func fill(res Resources, kind Kind, name string) Resources {
	if res.Logger == nil {
		res.Logger = slog.New(slog.DiscardHandler)
	}
	res.Logger = res.Logger.With(string(kind), name)
	return res
}

// NewInput builds an input.
func (r *Registry) NewInput(name string, conf map[string]any, res Resources) (Input, error) {
	c, err := r.ctor(KindInput, name)
	if err != nil {
		return nil, err
	}
	return c.(InputCtor)(conf, fill(res, KindInput, name))
}

// NewBuffer builds a buffer.
func (r *Registry) NewBuffer(name string, conf map[string]any, res Resources) (Buffer, error) {
	c, err := r.ctor(KindBuffer, name)
	if err != nil {
		return nil, err
	}
	return c.(BufferCtor)(conf, fill(res, KindBuffer, name))
}

// NewProcessor builds a processor.
func (r *Registry) NewProcessor(name string, conf map[string]any, res Resources) (Processor, error) {
	c, err := r.ctor(KindProcessor, name)
	if err != nil {
		return nil, err
	}
	return c.(ProcessorCtor)(conf, fill(res, KindProcessor, name))
}

// NewOutput builds an output.
func (r *Registry) NewOutput(name string, conf map[string]any, res Resources) (Output, error) {
	c, err := r.ctor(KindOutput, name)
	if err != nil {
		return nil, err
	}
	return c.(OutputCtor)(conf, fill(res, KindOutput, name))
}

// UnknownError is returned for a component name that is not registered.
type UnknownError struct {
	Kind  Kind
	Name  string
	Known []string
}

// unavailable explains component names other engines have (ArkFlow's
// processors) that flowplane cannot offer, with what to use instead, so a
// user bringing such a configuration learns more than "unknown".
var unavailable = map[Kind]map[string]string{
	KindProcessor: {
		"vrl": "VRL (Vector Remap Language) is a Rust library and cannot run in flowplane, a Go program; " +
			"use a mapping processor with an expr-lang expression instead, e.g. " +
			`{type: mapping, expression: 'merge(this, {"doubled": this.value * 2})'}, and filter for conditions`,
		"python": "Python processors cannot run in flowplane, a Go program without a Python interpreter; " +
			"use mapping (expr-lang expressions) and filter processors instead, " +
			"or, in a job, a udf operator (a WebAssembly function; see docs/jobs.md)",
	},
}

func (e *UnknownError) Error() string {
	msg := fmt.Sprintf("unknown %s %q", e.Kind, e.Name)
	if why, ok := unavailable[e.Kind][e.Name]; ok {
		return msg + ": " + why
	}
	if s := Suggest(e.Name, e.Known); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return msg
}

// Decode turns a component's configuration map into its typed form,
// rejecting fields the type does not declare. Components call it from their
// constructors.
func Decode(conf map[string]any, into any) error {
	b, err := json.Marshal(conf)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(into)
}
