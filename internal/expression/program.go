package expression

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/types"
	"github.com/expr-lang/expr/vm"
)

// Program is one compiled expression. It is safe for concurrent use: each
// caller takes an Evaluator (a VM and an environment map) with Acquire.
//
// When the expression reads fields as this.<name>, fast is compiled with
// each such read replaced by a variable that Eval fills from the object
// before running: expr would otherwise fetch each field through reflection
// and one allocation. plain is the expression as written, run when `this`
// is not an object so that errors and results stay expr's own.
type Program struct {
	fast   *vm.Program // nil when the expression reads no this.<name>
	plain  *vm.Program
	fields []string  // names read as this.<name>
	vars   []string  // fieldVar of each name
	uses   usedNames // what fast reads of this, meta and ownedVar
	pool   sync.Pool // of *Evaluator
}

// Evaluator is what one goroutine evaluates a Program with. It is not safe
// for concurrent use.
type Evaluator struct {
	vm  vm.VM
	env map[string]any // this, meta, ownedVar and vars, rewritten per evaluation
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
// so that Eval sets only those.
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

// Compile compiles src once; errors carry expr's message with the position
// and are prefixed with field, the configuration field it came from.
func Compile(field, src string) (*Program, error) {
	found := &thisFields{}
	plain, err := expr.Compile(src, append(options(nil), expr.Patch(found))...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	p := &Program{plain: plain}
	if len(found.names) == 0 {
		return p, nil
	}
	fast, err := expr.Compile(src, append(options(found.names),
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

// ResultKind is the kind the checker inferred for the result, or
// reflect.Interface when it is only known at run time.
func (p *Program) ResultKind() reflect.Kind {
	t := p.plain.Node().Type()
	if t == nil {
		return reflect.Interface
	}
	return t.Kind()
}

// Fields are the object fields read as this.<name> through the fast path
// (nil when there is none).
func (p *Program) Fields() []string { return p.fields }

// Fast is the program with those reads rewritten, or nil.
func (p *Program) Fast() *vm.Program { return p.fast }

// Acquire returns an evaluator for the caller's goroutine; give it back
// with Release. A caller that evaluates many times (a job operator) may
// keep one for its lifetime.
func (p *Program) Acquire() *Evaluator {
	if e, ok := p.pool.Get().(*Evaluator); ok {
		return e
	}
	e := &Evaluator{env: make(map[string]any, 3+len(p.vars))}
	e.env["this"], e.env["meta"], e.env[ownedVar] = nil, nil, false
	for _, v := range p.vars {
		e.env[v] = nil
	}
	return e
}

// Release returns e to the pool, keeping no value alive.
func (p *Program) Release(e *Evaluator) {
	p.Clear(e)
	p.pool.Put(e)
}

// Clear drops e's references to the last evaluated value, for a caller
// that keeps e between evaluations.
func (p *Program) Clear(e *Evaluator) {
	e.env["this"], e.env["meta"] = nil, nil
	for _, v := range p.vars {
		e.env[v] = nil
	}
}

// Eval runs the program with this and meta. owned says that this was made
// for this evaluation alone (parsed from a payload, held by nobody else),
// so the result may reuse it.
func (p *Program) Eval(e *Evaluator, this any, meta map[string]string, owned bool) (any, error) {
	if obj, ok := this.(map[string]any); ok && p.fast != nil {
		for i, name := range p.fields {
			e.env[p.vars[i]] = obj[name]
		}
		if p.uses.this {
			e.env["this"] = this
		}
		if p.uses.meta {
			e.env["meta"] = meta
		}
		if p.uses.owned {
			e.env[ownedVar] = owned
		}
		return e.vm.Run(p.fast, e.env)
	}
	e.env["this"] = this
	e.env["meta"] = meta
	e.env[ownedVar] = owned
	return e.vm.Run(p.plain, e.env)
}

// Check compile-checks src as Compile does, without keeping the program:
// validation and evaluation share one language and one environment.
func Check(src string) error {
	_, err := expr.Compile(src, options(nil)...)
	return err
}

// CheckShape compile-checks src as Check does with `this` typed after
// sample, a decoded JSON value of the shape the expression's input has:
// the checker then refuses what would fail on every such record (this.n %
// 7 when n is a JSON number, which decodes as a float). Fields sample
// lacks stay untyped.
func CheckShape(src string, sample any) error {
	_, err := expr.Compile(src, optionsFor(typeOfSample(sample), nil)...)
	return err
}

// typeOfSample is the checker's type of a decoded JSON value: objects are
// maps whose known fields are typed and others any, numbers float64.
func typeOfSample(v any) types.Type {
	switch x := v.(type) {
	case map[string]any:
		m := types.Map{types.Extra: types.Any}
		for k, f := range x {
			m[k] = typeOfSample(f)
		}
		return m
	case nil:
		return types.Any
	case []any:
		return types.Array(types.Any)
	}
	return types.TypeOf(v)
}
