package operator

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/sandbox"
)

// ErrNotBool is returned when a filter condition evaluates to something
// other than a boolean.
var ErrNotBool = errors.New("condition did not return a boolean")

// newOperator is New's body.
func newOperator(op *job.Operator, fsys sandbox.FS) (Operator, error) {
	missing := func() error { return fmt.Errorf("operator %s: %s without its config", op.ID, op.Kind) }
	var (
		o   Operator
		err error
	)
	switch op.Kind {
	case "map":
		if op.Map == nil {
			return nil, missing()
		}
		o, err = newMap(op.ID, op.Map)
	case "filter":
		if op.Filter == nil {
			return nil, missing()
		}
		o, err = newFilter(op.ID, op.Filter)
	case "aggregate":
		if op.Aggregate == nil {
			return nil, missing()
		}
		o, err = newAggregate(op.ID, op.Aggregate)
	case "window":
		if op.Window == nil {
			return nil, missing()
		}
		o, err = newWindow(op.ID, op.Window)
	case "udf":
		if op.UDF == nil {
			return nil, missing()
		}
		o, err = newUDF(op.ID, op.UDF, fsys)
	default:
		return nil, fmt.Errorf("operator %s: kind %q is not a transforming operator", op.ID, op.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("operator %s: %w", op.ID, err)
	}
	return o, nil
}

// stateless holds the calls a stateless operator does nothing in.
type stateless struct{}

func (stateless) Open(context.Context, *Context) error                { return nil }
func (stateless) OnWatermark(context.Context, int64, Collector) error { return nil }
func (stateless) Snapshot(context.Context, int64) error               { return nil }
func (stateless) Commit(context.Context, int64) error                 { return nil }
func (stateless) Close(context.Context) error                         { return nil }

// mapOp replaces each record's value with its expression's result; a nil
// result drops the record.
type mapOp struct {
	stateless
	id   string
	expr *compiled
}

func newMap(id string, c *job.MapConfig) (*mapOp, error) {
	e, err := compileExpr("config.expression", c.Expression)
	if err != nil {
		return nil, err
	}
	return &mapOp{id: id, expr: e}, nil
}

func (o *mapOp) Process(_ context.Context, in []Record, out Collector) error {
	defer o.expr.release()
	for i := range in {
		r := &in[i]
		// A value decoded here from the payload is held by nobody else,
		// so merge(this, {...}) may extend it in place.
		_, owned := r.Value.([]byte)
		v, err := o.expr.eval(r, owned)
		if err != nil {
			return fmt.Errorf("operator %s: %w", o.id, err)
		}
		if v != nil {
			out.Emit(Record{Value: v, Time: r.Time})
		}
	}
	return nil
}

// filterOp passes the records whose condition is true.
type filterOp struct {
	stateless
	id   string
	cond *compiled
}

func newFilter(id string, c *job.FilterConfig) (*filterOp, error) {
	e, err := compileExpr("config.condition", c.Condition)
	if err != nil {
		return nil, err
	}
	if k := e.prog.ResultKind(); k != reflect.Bool && k != reflect.Interface {
		return nil, fmt.Errorf("config.condition: %w: it returns %s", ErrNotBool, k)
	}
	return &filterOp{id: id, cond: e}, nil
}

func (o *filterOp) Process(_ context.Context, in []Record, out Collector) error {
	defer o.cond.release()
	for i := range in {
		r := &in[i]
		v, err := o.cond.eval(r, false)
		if err != nil {
			return fmt.Errorf("operator %s: %w", o.id, err)
		}
		keep, ok := v.(bool)
		if !ok {
			return fmt.Errorf("operator %s: %w: got %s", o.id, ErrNotBool, typeName(v))
		}
		if keep {
			out.Emit(*r)
		}
	}
	return nil
}
