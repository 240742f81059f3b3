package processor

import (
	"context"
	"errors"
	"fmt"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterProcessor(component.Spec{
		Name: "mapping",
		Summary: "Replaces each message's structured value with the result of an expr-lang expression " +
			"over `this` (the value) and `meta` (metadata fields). To add or change fields and keep the " +
			"others write `merge(this, {\"w\": this.v * 2})`: as the whole expression this is also the " +
			"fastest form, since the object literal is never built and a value parsed from the payload is " +
			"extended in place.",
		Schema: component.ObjectSchema(map[string]any{
			"expression": component.Prop("string", "expr-lang expression (https://expr-lang.org) compiled once when "+
				"the stream is built. `this` is the message's structured value (its JSON payload parsed "+
				"on demand), `meta` its metadata fields; helpers: `merge(a, b, ...)` (new object, later "+
				"fields win), `uuid()` (UUIDv7), `now()` and expr's builtins. The result becomes the new "+
				"structured value; an evaluation error fails the batch.", nil),
		}, "expression"),
		Example: `type: mapping
expression: 'merge(this, {"w": this.v * 2})'
`,
	}, NewMapping)
}

var _ component.Processor = (*Mapping)(nil)

// MappingConfig is the configuration of the mapping processor.
type MappingConfig struct {
	Expression string `json:"expression"`
}

// Mapping replaces each message's structured value with the result of an
// expression. The expression `merge(this, {"k": v, ...})` is evaluated
// without building the literal object, and when the value was parsed from
// the payload by this call (nobody else holds it) its fields are added in
// place (see mergeLiteral).
type Mapping struct {
	prog *program
}

// NewMapping builds a mapping processor; a compile error of the expression
// is returned with expr's message and position.
func NewMapping(conf map[string]any, _ component.Resources) (component.Processor, error) {
	var c MappingConfig
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	if c.Expression == "" {
		return nil, errors.New("expression: required")
	}
	p, err := compile("expression", c.Expression)
	if err != nil {
		return nil, err
	}
	return &Mapping{prog: p}, nil
}

// Process evaluates the expression for every message of b and stores the
// results in place. The first message that cannot be parsed or evaluated
// fails the batch.
func (p *Mapping) Process(_ context.Context, b message.Batch) ([]message.Batch, error) {
	e := p.prog.acquire()
	defer p.prog.release(e)
	for i := range b.Messages {
		m := &b.Messages[i]
		this, owned, err := view(m)
		if err != nil {
			return nil, fmt.Errorf("mapping: message %d: %w", i, err)
		}
		out, err := p.prog.eval(e, m, this, owned)
		if err != nil {
			return nil, fmt.Errorf("mapping: message %d: %w", i, err)
		}
		m.SetStructured(out)
	}
	return []message.Batch{b}, nil
}

// Close releases nothing.
func (p *Mapping) Close(context.Context) error { return nil }
