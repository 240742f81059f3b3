package output

import (
	"context"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterOutput(component.Spec{
		Name: "drop",
		Summary: "Discards every batch (benchmarks, or streams and jobs kept only for their side effects); " +
			"with nothing written, delivery guarantees do not apply.",
		Schema:  component.ObjectSchema(map[string]any{}),
		Example: "type: drop\n",
	}, NewDrop)
}

var _ component.Output = (*Drop)(nil)

// Drop accepts every batch and does nothing with it.
type Drop struct{}

// NewDrop builds a drop output; it takes no fields.
func NewDrop(conf map[string]any, _ component.Resources) (component.Output, error) {
	if err := component.Decode(conf, &struct{}{}); err != nil {
		return nil, err
	}
	return Drop{}, nil
}

// Connect does nothing.
func (Drop) Connect(context.Context) error { return nil }

// Write accepts b.
func (Drop) Write(context.Context, message.Batch) error { return nil }

// Close does nothing.
func (Drop) Close(context.Context) error { return nil }
