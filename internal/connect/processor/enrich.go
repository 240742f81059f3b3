package processor

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/connect/strexpr"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/goccy/go-json"
)

func init() {
	component.Default.RegisterProcessor(component.Spec{
		Name: "enrich",
		Summary: "Looks each message's key up in one of the stream's temporary tables (for example a Redis " +
			"table) and sets what it finds on a field of the message. One lookup per batch, for its distinct keys.",
		Schema: component.ObjectSchema(map[string]any{
			"temporary": component.Prop("string", "The name of a table in the stream's `temporary` list.", nil),
			"key":       strexpr.Schema("The key to look up, per message."),
			"target": component.Prop("string", "The field of the message (a JSON object) that receives the "+
				"value found: the first stored value, decoded as JSON. Default: the table's name.", nil),
			"all": component.Prop("boolean", "Set the target to an array of every value stored under the key "+
				"(a list table), not only the first.", false),
			"missing": func() map[string]any {
				p := component.Prop("string", "A key with nothing stored: `keep` the message unchanged, set the "+
					"target to `null`, `drop` the message, or fail the batch (`error`, to error_output).", "keep")
				p["enum"] = []any{"keep", "null", "drop", "error"}
				return p
			}(),
		}, "temporary", "key"),
		Example: `type: enrich
temporary: profiles
key: {type: expr, expr: 'this.user'}
target: profile
missing: "null"
`,
	}, NewEnrich)
}

var _ component.Processor = (*Enrich)(nil)

// EnrichConfig is the configuration of the enrich processor.
type EnrichConfig struct {
	Temporary string `json:"temporary"`
	Key       any    `json:"key"`
	Target    string `json:"target"`
	All       bool   `json:"all"`
	Missing   string `json:"missing"`
}

// Enrich sets, on each message, the value a temporary table holds under
// the message's key.
type Enrich struct {
	table   component.Temporary
	key     *strexpr.Expr
	target  string
	all     bool
	missing string
}

// NewEnrich builds an enrich processor. The table must be one of the
// stream's temporaries.
func NewEnrich(conf map[string]any, res component.Resources) (component.Processor, error) {
	var c EnrichConfig
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	if c.Temporary == "" {
		return nil, errors.New("temporary: required")
	}
	key, err := strexpr.Parse("key", c.Key)
	if err != nil {
		return nil, err
	}
	var table component.Temporary
	ok := false
	if res.Temporary != nil {
		table, ok = res.Temporary(c.Temporary)
	}
	if !ok || table == nil {
		return nil, fmt.Errorf("temporary: the stream has no temporary table named %q", c.Temporary)
	}
	if c.Target == "" {
		c.Target = c.Temporary
	}
	switch c.Missing {
	case "":
		c.Missing = "keep"
	case "keep", "null", "drop", "error":
	default:
		return nil, fmt.Errorf("missing: must be keep, null, drop or error, got %q", c.Missing)
	}
	return &Enrich{table: table, key: key, target: c.Target, all: c.All, missing: c.Missing}, nil
}

// Process looks the batch's distinct keys up in one call and sets the
// target field of each message. A message that is not a JSON object, a
// key that does not evaluate, a stored value that is not JSON or a failed
// lookup fails the batch.
func (p *Enrich) Process(ctx context.Context, b message.Batch) ([]message.Batch, error) {
	keys := make([]string, len(b.Messages))
	index := map[string]int{}
	var distinct []string
	for i := range b.Messages {
		k, err := p.key.String(&b.Messages[i])
		if err != nil {
			return nil, fmt.Errorf("enrich: message %d: %w", i, err)
		}
		keys[i] = k
		if _, ok := index[k]; !ok {
			index[k] = len(distinct)
			distinct = append(distinct, k)
		}
	}
	if len(distinct) == 0 {
		return []message.Batch{b}, nil
	}
	found, err := p.table.Get(ctx, distinct)
	if err != nil {
		return nil, fmt.Errorf("enrich: lookup: %w", err)
	}
	if len(found) != len(distinct) {
		return nil, fmt.Errorf("enrich: lookup returned %d results for %d keys", len(found), len(distinct))
	}
	out := b.Messages[:0:0]
	for i := range b.Messages {
		m := b.Messages[i]
		vals := found[index[keys[i]]]
		if len(vals) == 0 {
			switch p.missing {
			case "keep":
				out = append(out, m)
				continue
			case "drop":
				continue
			case "error":
				return nil, fmt.Errorf("enrich: message %d: nothing stored under key %q", i, keys[i])
			}
		}
		v, err := p.value(vals)
		if err != nil {
			return nil, fmt.Errorf("enrich: message %d: key %q: %w", i, keys[i], err)
		}
		this, err := m.Structured()
		if err != nil {
			return nil, fmt.Errorf("enrich: message %d: %w", i, err)
		}
		obj, ok := this.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("enrich: message %d is a %T, not a JSON object", i, this)
		}
		obj = maps.Clone(obj) // the structured value may be shared with other batches
		obj[p.target] = v
		m.SetStructured(obj)
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return []message.Batch{{Messages: out}}, nil
}

// value decodes what was found: nil for nothing, the first value, or with
// all every value as an array.
func (p *Enrich) value(vals [][]byte) (any, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	if !p.all {
		vals = vals[:1]
	}
	out := make([]any, len(vals))
	for i, raw := range vals {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, fmt.Errorf("stored value is not JSON: %w", err)
		}
	}
	if !p.all {
		return out[0], nil
	}
	return out, nil
}

// Close does nothing: the stream closes its temporaries.
func (p *Enrich) Close(context.Context) error { return nil }
