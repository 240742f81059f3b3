package processor

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"

	"github.com/flowplane/flowplane/internal/message"
)

// program is one compiled expression. It is safe for concurrent use: each
// caller takes an evaluator (a VM and an environment map) from the pool.
//
// When the expression reads fields as this.<name>, fast is compiled with
// each such read replaced by a variable that eval fills from the object
// before running: expr would otherwise fetch each field through reflection
// and one allocation. plain is the expression as written, run when `this`
// is not an object so that errors and results stay expr's own.
type program struct {
	fast   *vm.Program // nil when the expression reads no this.<name>
	plain  *vm.Program
	fields []string  // names read as this.<name>
	vars   []string  // fieldVar of each name
	uses   usedNames // what fast reads of this, meta and ownedVar
	pool   sync.Pool // of *evaluator
}

type evaluator struct {
	vm  vm.VM
	env map[string]any // this, meta, ownedVar and vars, rewritten per message
}

// fieldVar is the variable holding this.<name> in fast programs.
func fieldVar(name string) string { return "#this." + name }

// thisFields finds the reads this.<name> (also this["name"], not this?.name)
// and, when rewrite is set, replaces each by the variable fieldVar(name).
type thisFields struct {
	rewrite bool
	names   []string
}

func (f *thisFields) Visit(node *ast.Node) {
	m, ok := (*node).(*ast.MemberNode)
	if !ok || m.Optional {
		return
	}
	id, ok := m.Node.(*ast.IdentifierNode)
	if !ok || id.Value != "this" {
		return
	}
	prop, ok := m.Property.(*ast.StringNode)
	if !ok {
		return
	}
	if f.rewrite {
		ast.Patch(node, &ast.IdentifierNode{Value: fieldVar(prop.Value)})
		return
	}
	for _, n := range f.names {
		if n == prop.Value {
			return
		}
	}
	f.names = append(f.names, prop.Value)
}

// usedNames records which of this, meta and ownedVar an expression reads,
// so that eval sets only those.
type usedNames struct{ this, meta, owned bool }

func (u *usedNames) Visit(node *ast.Node) {
	if id, ok := (*node).(*ast.IdentifierNode); ok {
		switch id.Value {
		case "this":
			u.this = true
		case "meta":
			u.meta = true
		case ownedVar:
			u.owned = true
		}
	}
}

// compile compiles src once; errors carry expr's message with the position
// and are prefixed with the configuration field.
func compile(field, src string) (*program, error) {
	found := &thisFields{}
	plain, err := expr.Compile(src, append(exprOptions(nil), expr.Patch(found))...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	p := &program{plain: plain}
	if len(found.names) == 0 {
		return p, nil
	}
	fast, err := expr.Compile(src, append(exprOptions(found.names),
		expr.Patch(&thisFields{rewrite: true}), expr.Patch(&p.uses))...)
	if err != nil {
		// The rewrite only renames reads the checker accepted; should it
		// ever be refused, the expression still runs as written.
		return p, nil
	}
	p.fast, p.fields = fast, found.names
	for _, n := range found.names {
		p.vars = append(p.vars, fieldVar(n))
	}
	return p, nil
}

// resultKind is the kind the checker inferred for the result, or
// reflect.Interface when it is only known at run time.
func (p *program) resultKind() reflect.Kind {
	t := p.plain.Node().Type()
	if t == nil {
		return reflect.Interface
	}
	return t.Kind()
}

func (p *program) acquire() *evaluator {
	if e, ok := p.pool.Get().(*evaluator); ok {
		return e
	}
	e := &evaluator{env: make(map[string]any, 3+len(p.vars))}
	e.env["this"], e.env["meta"], e.env[ownedVar] = nil, nil, false
	for _, v := range p.vars {
		e.env[v] = nil
	}
	return e
}

func (p *program) release(e *evaluator) {
	// Keep no message alive.
	e.env["this"], e.env["meta"] = nil, nil
	for _, v := range p.vars {
		e.env[v] = nil
	}
	p.pool.Put(e)
}

// eval runs the program with this and m's metadata. owned says that this
// was made for this evaluation alone (parsed from the payload), so the
// result may reuse it.
func (p *program) eval(e *evaluator, m *message.Message, this any, owned bool) (any, error) {
	if obj, ok := this.(map[string]any); ok && p.fast != nil {
		for i, name := range p.fields {
			e.env[p.vars[i]] = obj[name]
		}
		if p.uses.this {
			e.env["this"] = this
		}
		if p.uses.meta {
			e.env["meta"] = m.Meta.Fields
		}
		if p.uses.owned {
			e.env[ownedVar] = owned
		}
		return e.vm.Run(p.fast, e.env)
	}
	e.env["this"] = this
	e.env["meta"] = m.Meta.Fields
	e.env[ownedVar] = owned
	return e.vm.Run(p.plain, e.env)
}
