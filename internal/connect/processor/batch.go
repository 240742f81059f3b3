package processor

import (
	"context"
	"fmt"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterProcessor(component.Spec{
		Name: "batch",
		Summary: "Splits each batch it is handed into batches of at most `count` messages. It does not " +
			"gather messages across input batches: use a `memory` buffer (`capacity`, `timeout`) for that, " +
			"which acknowledges the inputs only once the merged batch is delivered.",
		Schema: component.ObjectSchema(map[string]any{
			"count": func() map[string]any {
				p := component.Prop("integer", "Maximum number of messages per output batch.", nil)
				p["minimum"] = 1
				return p
			}(),
			"timeout_ms": func() map[string]any {
				p := component.Prop("integer", "Accepted for ArkFlow compatibility and ignored: a processor returns "+
					"its batches at once and never holds messages; configure a `memory` buffer's `timeout` "+
					"to wait for more messages.", 1000)
				p["minimum"] = 0
				return p
			}(),
		}, "count"),
		Example: `type: batch
count: 100
`,
	}, NewBatch)
}

var _ component.Processor = (*Batch)(nil)

// BatchConfig is the configuration of the batch processor.
type BatchConfig struct {
	Count     int `json:"count"`
	TimeoutMs int `json:"timeout_ms"`
}

// Batch splits batches into batches of at most Count messages.
//
// Accumulating across calls would need the runtime's help: a processor has
// no acknowledgement handle, and the runtime treats messages a processor
// does not return as delivered, so holding them would acknowledge their
// input before they reached an output (lost on a crash). The memory buffer
// does that job with correct acknowledgements.
type Batch struct {
	count int
}

// NewBatch builds a batch processor from its configuration.
func NewBatch(conf map[string]any, _ component.Resources) (component.Processor, error) {
	c := BatchConfig{TimeoutMs: 1000}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	if c.Count < 1 {
		return nil, fmt.Errorf("count: must be at least 1, got %d", c.Count)
	}
	if c.TimeoutMs < 0 {
		return nil, fmt.Errorf("timeout_ms: must not be negative, got %d", c.TimeoutMs)
	}
	return &Batch{count: c.Count}, nil
}

// Process returns b split into consecutive batches of at most count
// messages, sharing b's messages (no copy).
func (p *Batch) Process(_ context.Context, b message.Batch) ([]message.Batch, error) {
	n := len(b.Messages)
	if n <= p.count {
		if n == 0 {
			return nil, nil
		}
		return []message.Batch{b}, nil
	}
	out := make([]message.Batch, 0, (n+p.count-1)/p.count)
	for i := 0; i < n; i += p.count {
		j := min(i+p.count, n)
		// The full slice expression keeps an append to one part from
		// overwriting the next.
		out = append(out, message.Batch{Messages: b.Messages[i:j:j]})
	}
	return out, nil
}

// Close releases nothing.
func (p *Batch) Close(context.Context) error { return nil }
