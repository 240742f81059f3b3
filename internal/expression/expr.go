package expression

import (
	"errors"
	"fmt"
	"maps"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/types"
	"github.com/google/uuid"
)

// ErrNotObject is returned by merge() for an argument that is not an object.
var ErrNotObject = errors.New("not an object")

// options are the compile options every expression shares. The
// environment is typed: `this` is the structured value (any JSON value;
// map[string]any for objects) and `meta` free-form metadata fields
// (map[string]string). Besides expr's builtins (now(), upper(), ...) there
// are:
//
//	merge(a, b, ...)  a new object holding the fields of every argument, later ones winning
//	uuid()            a new UUIDv7 string
//
// fields are the object fields the expression reads as this.<name>, each
// declared as the variable fieldVar(name) (see thisFields).
func options(fields []string) []expr.Option {
	return optionsFor(types.Any, fields)
}

// optionsFor is options with `this` of type this.
func optionsFor(this types.Type, fields []string) []expr.Option {
	env := types.Map{
		"this":   this,
		"meta":   types.TypeOf(map[string]string(nil)),
		ownedVar: types.Bool,
	}
	for _, f := range fields {
		env[fieldVar(f)] = types.Any
	}
	return []expr.Option{
		expr.Env(env),
		expr.Function("merge", merge, new(func(...map[string]any) map[string]any)),
		expr.Function("uuid", newUUID, new(func() string)),
		expr.Function(assignFunc, assign),
		expr.Patch(&mergeLiteral{}),
	}
}

// Names that user expressions cannot spell (they are not identifiers):
// only the rewrites produce them.
const (
	ownedVar   = "#owned" // true when `this` was parsed for this evaluation alone
	assignFunc = "#assign"
)

// mergeLiteral rewrites merge(a, {"k": v, ...}) into #assign(owned, a, "k",
// v, ...), which skips building the literal object. When that call is the
// whole expression and a is `this`, owned is the #owned variable, so that a
// value parsed just for this evaluation is extended in place instead of
// copied: the call runs once, after its arguments, so nothing can observe
// the object before the change. Every other rewritten call copies.
type mergeLiteral struct {
	last *ast.CallNode // the newest rewrite that may extend `this` in place
}

func (r *mergeLiteral) Visit(node *ast.Node) {
	// ast.Walk visits children before parents: a node visited after a
	// rewrite is its ancestor, so that rewrite is not the whole expression.
	if r.last != nil {
		r.last.Arguments[0] = &ast.BoolNode{Value: false}
		r.last = nil
	}
	call, ok := (*node).(*ast.CallNode)
	if !ok || len(call.Arguments) != 2 {
		return
	}
	if id, ok := call.Callee.(*ast.IdentifierNode); !ok || id.Value != "merge" {
		return
	}
	lit, ok := call.Arguments[1].(*ast.MapNode)
	if !ok {
		return
	}
	args := make([]ast.Node, 0, 2+2*len(lit.Pairs))
	var owned ast.Node = &ast.BoolNode{Value: false}
	id, isThis := call.Arguments[0].(*ast.IdentifierNode)
	if isThis && id.Value == "this" {
		owned = &ast.IdentifierNode{Value: ownedVar}
	}
	args = append(args, owned, call.Arguments[0])
	for _, p := range lit.Pairs {
		pair := p.(*ast.PairNode)
		args = append(args, pair.Key, pair.Value)
	}
	rewritten := &ast.CallNode{Callee: &ast.IdentifierNode{Value: assignFunc}, Arguments: args}
	ast.Patch(node, rewritten)
	if isThis && id.Value == "this" {
		r.last = rewritten
	}
}

// assign implements the rewritten merge(obj, {k: v, ...}): args are owned,
// obj, then key/value pairs. It writes into obj only when owned and every
// value is a scalar (a map or slice could contain obj itself).
func assign(args ...any) (any, error) {
	owned, _ := args[0].(bool)
	kv := args[2:]
	obj, ok := args[1].(map[string]any)
	if !ok && args[1] != nil {
		return nil, fmt.Errorf("merge: argument 1 is %T: %w", args[1], ErrNotObject)
	}
	for i := 0; i < len(kv); i += 2 {
		if _, ok := kv[i].(string); !ok {
			return nil, fmt.Errorf("merge: object key %v is %T, not a string", kv[i], kv[i])
		}
		switch kv[i+1].(type) {
		case map[string]any, []any:
			owned = false
		}
	}
	if !owned || obj == nil {
		out := make(map[string]any, len(obj)+len(kv)/2)
		maps.Copy(out, obj)
		obj = out
	}
	for i := 0; i < len(kv); i += 2 {
		obj[kv[i].(string)] = kv[i+1]
	}
	return obj, nil
}

// merge builds a new object from its arguments so that the objects it is
// given (which copies of a value may share) are never modified.
func merge(args ...any) (any, error) {
	n := 0
	for _, a := range args {
		if m, ok := a.(map[string]any); ok {
			n += len(m)
		}
	}
	out := make(map[string]any, n)
	for i, a := range args {
		switch m := a.(type) {
		case map[string]any:
			maps.Copy(out, m)
		case nil:
		default:
			return nil, fmt.Errorf("merge: argument %d is %T: %w", i+1, a, ErrNotObject)
		}
	}
	return out, nil
}

func newUUID(...any) (any, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	return id.String(), nil
}
