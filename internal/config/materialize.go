package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/schema"
	"github.com/flowplane/flowplane/internal/secretref"
)

// Problem is one thing wrong with a configuration, with its path.
type Problem = schema.Problem

// Error carries every problem found in a configuration.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Problems extracts the problems from an error returned by this package; an
// error of another kind becomes one problem without a path.
func Problems(err error) []Problem {
	if err == nil {
		return nil
	}
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Problems
	}
	var p Problem
	if errors.As(err, &p) {
		return []Problem{p}
	}
	return []Problem{{Message: err.Error()}}
}

// Schema returns the JSON Schema document of the configuration with the
// components of reg.
func Schema(reg *component.Registry) map[string]any {
	return schema.Generate(reflect.TypeFor[Config](), reg)
}

var (
	validatorsMu sync.Mutex // guards validators
	validators   = map[*component.Registry]*schema.Validator{}
)

// validator compiles the schema of reg once; registration happens at init,
// so a registry's schema does not change while the process runs.
func validator(reg *component.Registry) (*schema.Validator, error) {
	validatorsMu.Lock()
	defer validatorsMu.Unlock()
	if v, ok := validators[reg]; ok {
		return v, nil
	}
	v, err := schema.Compile(Schema(reg))
	if err != nil {
		return nil, err
	}
	validators[reg] = v
	return v, nil
}

// Materialize turns a document into a typed, defaulted, validated
// configuration: value tree, secret references, schema, defaults, semantic
// rules. Every problem found is returned at once in an *Error. The document
// itself (with its references) is the caller's to keep for display; the
// returned Config holds resolved values and must not leave the process.
func Materialize(data []byte, f Format, reg *component.Registry, res secretref.Resolver) (*Config, error) {
	tree, err := Tree(data, f)
	if err != nil {
		return nil, &Error{Problems: []Problem{{Message: err.Error()}}}
	}
	tree, problems := limitTree(arkflowNulls(tree))
	resolved, resolution, err := res.ResolveTainted(tree)
	// Problems about references are written by secretref: they name the
	// path and the reference, never a value, and taint must not rewrite
	// them (a string may hold a reference that resolved and one that did
	// not).
	var refProblems []Problem
	if err != nil {
		refProblems = secretProblems(err)
	}
	red := NewRedactor(resolution.Values...)
	red.Add(credentialValues(resolved)...)
	taint := newTaint(resolution.Tainted)
	v, err := validator(reg)
	if err != nil {
		return nil, err
	}
	checked, nameProblems := withoutChildNames(resolved)
	problems = append(problems, nameProblems...)
	schemaProblems := v.Validate(checked)
	problems = append(problems, schemaProblems...)
	cfg, err := decode(withDefaults(resolved))
	if err != nil {
		// Only reachable with schema problems, which say more.
		if len(problems)+len(refProblems) == 0 {
			problems = append(problems, Problem{Message: err.Error()})
		}
		problems = append(refProblems, taint.Problems(red.Problems(problems))...)
		SortProblems(problems)
		return nil, &Error{Problems: CapProblems(dedupe(problems))}
	}
	cfg.redactor = red
	cfg.taint = taint
	cfg.Canonicalize()
	problems = append(problems, cfg.Validate(reg)...)
	problems = append(refProblems, taint.Problems(red.Problems(problems))...)
	if len(problems) > 0 {
		SortProblems(problems)
		return cfg, &Error{Problems: CapProblems(dedupe(problems))}
	}
	return cfg, nil
}

// Redact removes from ps every secret value of the configuration: a
// problem about a string holding a reference's value names the path and
// the reference instead (see [Taint]), and every message loses what its
// secret references resolved to and its literal credentials, and pieces
// of them (see [Redactor]). Callers reporting problems found later (the
// deep build) pass them through it.
func (c *Config) Redact(ps []Problem) []Problem {
	if c == nil {
		return ps
	}
	return c.taint.Problems(c.Redactor().Problems(ps))
}

// Redactor returns the redactor of the configuration's secret values (nil
// for a configuration not made by Materialize, which redacts nothing).
func (c *Config) Redactor() *Redactor {
	if c == nil {
		return nil
	}
	return c.redactor
}

// SortProblems orders problems by path, comparing array indices as numbers.
func SortProblems(ps []Problem) {
	slices.SortStableFunc(ps, func(a, b Problem) int { return strings.Compare(pathKey(a.Path), pathKey(b.Path)) })
}

// pathKey pads array indices so that paths sort in document order.
func pathKey(p string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(p, '[')
		j := strings.IndexByte(p, ']')
		if i < 0 || j < i {
			b.WriteString(p)
			return b.String()
		}
		b.WriteString(p[:i+1])
		fmt.Fprintf(&b, "%010s", p[i+1:j])
		p = p[j:]
	}
}

func dedupe(ps []Problem) []Problem {
	seen := make(map[Problem]bool, len(ps))
	out := ps[:0]
	for _, p := range ps {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

func secretProblems(err error) []Problem {
	refs, other := secretref.Errors(err)
	out := make([]Problem, 0, len(refs)+len(other))
	for _, se := range refs {
		out = append(out, Problem{Path: se.Path, Message: strings.TrimPrefix(se.Error(), se.Path+": ")})
	}
	for _, e := range other {
		out = append(out, Problem{Message: e.Error()})
	}
	return out
}

// Canonicalize fills the defaults that depend on position and replaces
// aliases by what they stand for.
func (c *Config) Canonicalize() {
	if c.Logging.Level == "trace" {
		// ArkFlow's finest level; flowplane has nothing finer than debug.
		c.Logging.Level = "debug"
	}
	for i := range c.Streams {
		s := &c.Streams[i]
		if s.ID == "" {
			s.ID = "stream-" + itoa(i)
		}
		if s.Buffer != nil && IsWindow(s.Buffer.Type) && s.State == nil {
			// ArkFlow's windows have no state contract; theirs are not
			// recovered either. The stream warns when it starts.
			s.State = &StreamState{Durability: "ephemeral"}
			s.stateDefaulted = true
		}
	}
	for i := range c.Jobs {
		for j := range c.Jobs[i].Edges {
			e := &c.Jobs[i].Edges[j]
			if e.ID == "" {
				e.ID = e.From + "->" + e.To
			}
		}
	}
}
