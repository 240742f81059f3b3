package kernel

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/operator"
)

// BuildError carries every problem Build found, each with its
// configuration path. It unwraps to a *config.Error, so config.Problems
// extracts them.
type BuildError struct {
	Problems []config.Problem
}

func (e *BuildError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems as a *config.Error.
func (e *BuildError) Unwrap() error { return &config.Error{Problems: e.Problems} }

type newOperatorFunc func(op *job.Operator) (operator.Operator, error)

func defaultNewKey(expr string) (keyer, error) {
	k, err := operator.NewKey(expr)
	if err != nil {
		return nil, err
	}
	return k, nil
}

// paths names the configuration entries of the plan's operators.
type paths struct {
	prefix                    string
	operators, sources, sinks map[string]int
}

func newPaths(prefix string, p *job.Plan, spec *config.Job) paths {
	ps := paths{prefix: prefix, operators: map[string]int{}, sources: map[string]int{}, sinks: map[string]int{}}
	if spec != nil {
		for i, o := range spec.Operators {
			ps.operators[o.ID] = i
		}
		for i, s := range spec.Sources {
			ps.sources[s.OperatorID] = i
		}
		for i, s := range spec.Sinks {
			ps.sinks[s.OperatorID] = i
		}
		return ps
	}
	for i, o := range p.Operators {
		ps.operators[o.ID] = i
		switch o.Kind {
		case "source":
			ps.sources[o.ID] = len(ps.sources)
		case "sink":
			ps.sinks[o.ID] = len(ps.sinks)
		}
	}
	return ps
}

func (ps paths) operator(id string) string {
	return ps.prefix + ".operators[" + strconv.Itoa(ps.operators[id]) + "]"
}
func (ps paths) source(id string) string {
	return ps.prefix + ".sources[" + strconv.Itoa(ps.sources[id]) + "]"
}
func (ps paths) sink(id string) string {
	return ps.prefix + ".sinks[" + strconv.Itoa(ps.sinks[id]) + "]"
}

// instances are the components and operators of one attempt, by task
// index. Each attempt builds its own: a closed input cannot be reused.
type instances struct {
	tasks []taskInstances
}

type taskInstances struct {
	ops    []operator.Operator // by position in the chain; nil for a source or sink
	input  component.Input     // the chain's source, if it starts with one
	output []component.Output  // by position in the chain; nil but for sinks
	keys   map[int]keyer       // by edge index, for partitioned edges out of the task
}

// construct builds the components and operators of every task.
func (j *Job) construct() (*instances, error) {
	p := j.plan
	var probs []config.Problem
	seen := map[string]bool{} // one problem per operator, not per subtask
	problem := func(path, format string, args ...any) {
		if !seen[path] {
			seen[path] = true
			probs = append(probs, config.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
		}
	}
	chains := map[string]*job.Chain{}
	for i := range p.Chains {
		chains[p.Chains[i].ID] = &p.Chains[i]
	}
	inst := &instances{tasks: make([]taskInstances, len(p.Tasks))}
	res := component.Resources{StreamID: p.JobID, Logger: j.log, FS: j.opts.FS, Net: j.opts.Net}
	for ti, t := range p.Tasks {
		if !j.local(t.ID) {
			continue // another node builds it
		}
		ch := chains[t.Chain]
		if ch == nil {
			problem(j.prefix, "task %s names no chain of the plan", t.ID)
			continue
		}
		tin := taskInstances{
			ops:    make([]operator.Operator, len(ch.Operators)),
			output: make([]component.Output, len(ch.Operators)),
			keys:   map[int]keyer{},
		}
		for ci, id := range ch.Operators {
			op := p.Operator(id)
			if op == nil {
				problem(j.prefix, "chain %s names no operator %q of the plan", ch.ID, id)
				continue
			}
			for _, ei := range op.Outputs {
				e := &p.Edges[ei]
				if e.Mode != job.Partitioned || e.Chained {
					continue
				}
				k, err := j.opts.newKey(e.Key)
				if err != nil {
					problem(j.paths.operator(e.To)+".config.key", "%v", err)
					continue
				}
				tin.keys[ei] = k
			}
			switch op.Kind {
			case "source":
				path := j.paths.source(id)
				if op.Source == nil {
					problem(j.paths.operator(id), "source operator %q is bound by no sources[] entry", id)
					continue
				}
				in, err := j.opts.Registry.NewInput(op.Source.InputType, op.Source.Config, res)
				if err != nil {
					problem(componentPath(path, "input_type", err), "%v", err)
					continue
				}
				if op.Parallelism > 1 {
					sp, ok := in.(component.Splittable)
					if !ok {
						problem(path, "input %q cannot be split across subtasks; set operator %q's parallelism to 1", op.Source.InputType, id)
						continue
					}
					if err := sp.Split(t.Subtask, op.Parallelism); err != nil {
						problem(path+".config", "%v", err)
						continue
					}
				}
				tin.input = in
			case "sink":
				if op.Sink == nil {
					problem(j.paths.operator(id), "sink operator %q is bound by no sinks[] entry", id)
					continue
				}
				out, err := j.opts.Registry.NewOutput(op.Sink.OutputType, op.Sink.Config, res)
				if err != nil {
					problem(componentPath(j.paths.sink(id), "output_type", err), "%v", err)
					continue
				}
				tin.output[ci] = out
			default:
				o, err := j.opts.newOperator(op)
				if err != nil {
					problem(j.paths.operator(id)+".config", "%v", err)
					continue
				}
				tin.ops[ci] = o
			}
		}
		inst.tasks[ti] = tin
	}
	if len(probs) > 0 {
		return nil, &BuildError{Problems: probs}
	}
	return inst, nil
}

// close closes the components of an attempt that never started; its
// operators were never opened, so they are not closed.
func (in *instances) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, t := range in.tasks {
		if t.input != nil {
			_ = t.input.Close(ctx)
		}
		for _, o := range t.output {
			if o != nil {
				_ = o.Close(ctx)
			}
		}
	}
}

// componentPath is where a component constructor's error belongs: the
// type field for an unknown component, else its config.
func componentPath(path, typeField string, err error) string {
	var ue *component.UnknownError
	if errors.As(err, &ue) {
		return path + "." + typeField
	}
	return path + ".config"
}
