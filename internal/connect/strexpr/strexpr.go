package strexpr

import (
	"context"
	"fmt"
	"strconv"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/expression"
	"github.com/flowplane/flowplane/internal/message"
)

// Expr is a compiled string field. The zero value is not usable; build
// one with Parse.
type Expr struct {
	field string
	value string
	prog  *expression.Program // nil for a constant or SQL
	sql   string              // the query of an SQL expression
}

// Schema is the JSON Schema of such a field: a string, or an object
// {type: value, value} or {type: expr, expr}.
func Schema(desc string) map[string]any {
	value := component.ObjectSchema(map[string]any{
		"type":  map[string]any{"const": "value"},
		"value": component.Prop("string", "The constant.", nil),
	}, "type", "value")
	expr := component.ObjectSchema(map[string]any{
		"type": map[string]any{"const": "expr"},
		"expr": component.Prop("string", "An expression evaluated per message: `this` is its value, `meta` its metadata fields; "+
			"or, when it is not one, an SQL expression over the message's fields (`concat('lamp:', device)`).", nil),
	}, "type", "expr")
	return map[string]any{
		"description": desc + " A string, `{type: value, value: ...}` or `{type: expr, expr: ...}`.",
		"oneOf":       []any{map[string]any{"type": "string"}, value, expr},
	}
}

// Parse reads conf (a string, or the decoded object) of the configuration
// field named field; errors name the field.
func Parse(field string, conf any) (*Expr, error) {
	switch c := conf.(type) {
	case string:
		return &Expr{field: field, value: c}, nil
	case map[string]any:
		switch c["type"] {
		case "value":
			v, ok := c["value"].(string)
			if !ok {
				return nil, fmt.Errorf("%s.value: a string is required with type value", field)
			}
			return &Expr{field: field, value: v}, nil
		case "expr":
			src, ok := c["expr"].(string)
			if !ok || src == "" {
				return nil, fmt.Errorf("%s.expr: an expression is required with type expr", field)
			}
			p, err := expression.Compile(field+".expr", src)
			if err != nil {
				q, sqlErr := compileSQL(src)
				if sqlErr != nil {
					return nil, fmt.Errorf("%w; as SQL: %v", err, sqlErr)
				}
				return &Expr{field: field, sql: q}, nil
			}
			return &Expr{field: field, prog: p}, nil
		default:
			return nil, fmt.Errorf("%s.type: must be value or expr, got %v", field, c["type"])
		}
	case nil:
		return nil, fmt.Errorf("%s: required", field)
	default:
		return nil, fmt.Errorf("%s: must be a string or {type: value|expr, ...}, got %T", field, conf)
	}
}

// Static returns the constant and true when the field is one.
func (e *Expr) Static() (string, bool) { return e.value, e.prog == nil && e.sql == "" }

// SQL reports whether the field is an SQL expression.
func (e *Expr) SQL() bool { return e.sql != "" }

// Strings evaluates the field for each message, an SQL expression in one
// query over the batch.
func (e *Expr) Strings(ctx context.Context, msgs []message.Message) ([]string, error) {
	if e.sql != "" {
		if len(msgs) == 0 {
			return nil, nil
		}
		return e.evalSQL(ctx, msgs)
	}
	out := make([]string, len(msgs))
	for i := range msgs {
		s, err := e.String(&msgs[i])
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// String evaluates the field for m. A result that is not a string is
// formatted: numbers in their shortest form, booleans as true/false; nil
// is an error naming the field, as is a value that is not valid JSON when
// the expression reads `this`.
func (e *Expr) String(m *message.Message) (string, error) {
	if e.sql != "" {
		out, err := e.evalSQL(context.Background(), []message.Message{*m})
		if err != nil {
			return "", err
		}
		return out[0], nil
	}
	if e.prog == nil {
		return e.value, nil
	}
	this, err := m.Structured()
	if err != nil {
		this = nil // an expression that reads only meta still works
	}
	ev := e.prog.Acquire()
	v, err := e.prog.Eval(ev, this, m.Meta.Fields, false)
	e.prog.Release(ev)
	if err != nil {
		return "", fmt.Errorf("%s: %w", e.field, err)
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case nil:
		return "", fmt.Errorf("%s: the expression gave null", e.field)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case bool:
		return strconv.FormatBool(x), nil
	case []byte:
		return string(x), nil
	default:
		return "", fmt.Errorf("%s: the expression gave a %T, not a string", e.field, v)
	}
}
