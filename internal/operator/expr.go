package operator

import (
	"regexp"

	"github.com/flowplane/flowplane/internal/expression"
)

// compiled is one expression of an operator, evaluated over records with
// the record's value as `this` (and no `meta`). It keeps one evaluator:
// an operator instance runs on one goroutine.
type compiled struct {
	prog *expression.Program
	ev   *expression.Evaluator
	// field is set when the expression is exactly this.<field>: an object
	// record then answers with a map read instead of a VM run. Any other
	// value runs the program, so results and errors stay expr's.
	field string
}

// fieldRead matches an expression that is one field read of this.
var fieldRead = regexp.MustCompile(`^\s*this\.([A-Za-z_][A-Za-z0-9_]*)\s*$`)

// compileExpr compiles src; errors start with path, the configuration
// field it came from.
func compileExpr(path, src string) (*compiled, error) {
	p, err := expression.Compile(path, src)
	if err != nil {
		return nil, err
	}
	c := &compiled{prog: p, ev: p.Acquire()}
	if m := fieldRead.FindStringSubmatch(src); m != nil {
		c.field = m[1]
	}
	return c, nil
}

// eval evaluates the expression over r. owned lets a map expression
// extend r's value in place: only a map may pass it, and only for a value
// it just decoded from r's payload (nobody else holds it).
func (c *compiled) eval(r *Record, owned bool) (any, error) {
	this := r.Data()
	if c.field != "" {
		if obj, ok := this.(map[string]any); ok {
			return obj[c.field], nil
		}
	}
	return c.prog.Eval(c.ev, this, nil, owned)
}

// release drops the evaluator's reference to the last record.
func (c *compiled) release() { c.prog.Clear(c.ev) }
