package processor

import (
	"github.com/expr-lang/expr/vm"

	"github.com/flowplane/flowplane/internal/expression"
	"github.com/flowplane/flowplane/internal/message"
)

// program is one compiled expression (see expression.Program) evaluated
// over messages: `meta` is the message's metadata fields. It is safe for
// concurrent use: each caller takes an evaluator from acquire.
type program struct {
	*expression.Program
	fields []string    // names read as this.<name> through the fast path
	fast   *vm.Program // nil when there is no fast path
}

type evaluator = expression.Evaluator

// compile compiles src once; errors carry expr's message with the position
// and are prefixed with the configuration field.
func compile(field, src string) (*program, error) {
	p, err := expression.Compile(field, src)
	if err != nil {
		return nil, err
	}
	return &program{Program: p, fields: p.Fields(), fast: p.Fast()}, nil
}

func (p *program) acquire() *evaluator  { return p.Acquire() }
func (p *program) release(e *evaluator) { p.Release(e) }

// eval runs the program with this and m's metadata. owned says that this
// was made for this evaluation alone (parsed from the payload), so the
// result may reuse it.
func (p *program) eval(e *evaluator, m *message.Message, this any, owned bool) (any, error) {
	return p.Eval(e, this, m.Meta.Fields, owned)
}
