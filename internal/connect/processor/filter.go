package processor

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterProcessor(component.Spec{
		Name: "filter",
		Summary: "Keeps the messages for which an expr-lang condition over `this` and `meta` is true " +
			"and drops the others; a result that is not a boolean fails the batch.",
		Schema: component.ObjectSchema(map[string]any{
			"condition": component.Prop("string", "expr-lang boolean expression compiled once when the stream is "+
				"built, over `this` (the message's structured value) and `meta` (its metadata fields). "+
				"Messages for which it is false are dropped (and count as delivered). A missing field is "+
				"`nil`, which is not a boolean: write `this.flag ?? false` when a field may be absent.", nil),
		}, "condition"),
		Example: `type: filter
condition: 'this.v >= 500000'
`,
	}, NewFilter)
}

var _ component.Processor = (*Filter)(nil)

// ErrNotBool is returned when a filter condition evaluates to something
// other than a boolean.
var ErrNotBool = errors.New("condition did not return a boolean")

// FilterConfig is the configuration of the filter processor.
type FilterConfig struct {
	Condition string `json:"condition"`
}

// Filter drops the messages for which a condition is false.
type Filter struct {
	prog *program
}

// NewFilter builds a filter processor. A condition the checker can prove is
// not boolean (`this.v + 1`) is a construction error.
func NewFilter(conf map[string]any, _ component.Resources) (component.Processor, error) {
	var c FilterConfig
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	if c.Condition == "" {
		return nil, errors.New("condition: required")
	}
	p, err := compile("condition", c.Condition)
	if err != nil {
		return nil, err
	}
	if k := p.ResultKind(); k != reflect.Bool && k != reflect.Interface {
		return nil, fmt.Errorf("condition: %w: it returns %s", ErrNotBool, k)
	}
	return &Filter{prog: p}, nil
}

// Process keeps, in order, the messages whose condition is true; it returns
// no batch when none is kept.
func (p *Filter) Process(_ context.Context, b message.Batch) ([]message.Batch, error) {
	e := p.prog.acquire()
	defer p.prog.release(e)
	kept := 0
	for i := range b.Messages {
		m := &b.Messages[i]
		this, owned, err := view(m)
		if err != nil {
			return nil, fmt.Errorf("filter: message %d: %w", i, err)
		}
		out, err := p.prog.eval(e, m, this, owned)
		if err != nil {
			return nil, fmt.Errorf("filter: message %d: %w", i, err)
		}
		keep, ok := out.(bool)
		if !ok {
			return nil, fmt.Errorf("filter: message %d: %w: got %T", i, ErrNotBool, out)
		}
		if keep {
			if kept != i {
				b.Messages[kept] = b.Messages[i]
			}
			kept++
		}
	}
	if kept == 0 {
		return nil, nil
	}
	clear(b.Messages[kept:]) // drop references to the removed messages
	return []message.Batch{{Messages: b.Messages[:kept]}}, nil
}

// Close releases nothing.
func (p *Filter) Close(context.Context) error { return nil }
