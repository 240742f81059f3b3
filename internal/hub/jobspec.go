package hub

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/secretref"
	"github.com/flowplane/flowplane/internal/wire"
)

// specPath is the path prefix of a job spec's problems in Hub answers.
const specPath = "spec"

// materialized is a job spec as the Hub checked it: the typed job, its
// plan, the capabilities a node needs to run it, and the secret references
// the node must resolve.
type materialized struct {
	job      config.Job
	plan     *job.Plan
	explain  json.RawMessage
	required []string
	secrets  []string
}

// materializeJob checks a submitted spec exactly as a node's configuration
// loader does (value tree, limits, schema, defaults, semantic rules, then
// the plan), with the Hub's registry. Secret references are the node's to
// resolve: the Hub reads each as a placeholder, lists it, and leaves the
// checks of the values they stand for to the node (problems at a path
// holding a reference are dropped). Problems come back with paths under
// "spec".
func (h *Hub) materializeJob(spec json.RawMessage) (*materialized, []httpapi.FieldProblem) {
	if len(spec) == 0 || string(spec) == "null" {
		return nil, []httpapi.FieldProblem{{Path: specPath, Message: "is required: the job specification"}}
	}
	var tree any
	if err := json.Unmarshal(spec, &tree); err != nil {
		return nil, []httpapi.FieldProblem{{Path: specPath, Message: "must be a JSON object: " + err.Error()}}
	}
	if _, ok := tree.(map[string]any); !ok {
		return nil, []httpapi.FieldProblem{{Path: specPath, Message: "must be a JSON object"}}
	}
	refPaths := referencePaths(tree, "jobs[0]")
	var secrets []string
	res := secretref.Resolver{
		LookupEnv: func(name string) (string, bool) {
			secrets = append(secrets, "env:"+name)
			return "placeholder", true
		},
		ReadFile: func(path string) ([]byte, error) {
			secrets = append(secrets, "file:"+path)
			return []byte("placeholder"), nil
		},
	}
	doc, err := json.Marshal(map[string]any{"streams": []any{}, "jobs": []any{tree}})
	if err != nil {
		return nil, []httpapi.FieldProblem{{Path: specPath, Message: err.Error()}}
	}
	cfg, err := config.Materialize(doc, config.JSON, h.opts.Registry, res)
	var probs []config.Problem
	if err != nil {
		probs = config.Problems(err)
	}
	probs = slices.DeleteFunc(probs, func(p config.Problem) bool { return underAny(p.Path, refPaths) })
	if len(probs) == 0 && (cfg == nil || len(cfg.Jobs) != 1) {
		probs = append(probs, config.Problem{Message: "the specification does not describe one job"})
	}
	m := &materialized{}
	if len(probs) == 0 {
		m.job = cfg.Jobs[0]
		plan, ps := job.Build("jobs[0]", m.job)
		probs = append(probs, slices.DeleteFunc(ps, func(p config.Problem) bool { return underAny(p.Path, refPaths) })...)
		if len(probs) == 0 {
			m.plan = plan
			m.explain, err = json.Marshal(plan.Explain())
			if err != nil {
				probs = append(probs, config.Problem{Message: err.Error()})
			}
		}
	}
	if len(probs) > 0 {
		return nil, specProblems(probs)
	}
	m.required = requiredCapabilities(m.job)
	slices.Sort(secrets)
	m.secrets = slices.Compact(secrets)
	return m, nil
}

// specProblems rewrites configuration problems to paths under "spec",
// at most 100 of them followed by "and N more".
func specProblems(ps []config.Problem) []httpapi.FieldProblem {
	ps = config.CapProblems(ps)
	out := make([]httpapi.FieldProblem, 0, len(ps))
	for _, p := range ps {
		path := p.Path
		switch {
		case path == "jobs[0]", path == "jobs", path == "":
			path = specPath
		case strings.HasPrefix(path, "jobs[0]."):
			path = specPath + "." + strings.TrimPrefix(path, "jobs[0].")
		case strings.HasPrefix(path, "jobs[0]["):
			path = specPath + strings.TrimPrefix(path, "jobs[0]")
		}
		out = append(out, httpapi.FieldProblem{Path: path, Message: p.Message})
	}
	return out
}

// referencePaths returns the paths (as configuration problems write them)
// of every string in tree that holds a secret reference.
func referencePaths(tree any, prefix string) []string {
	var out []string
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch t := v.(type) {
		case map[string]any:
			for k, x := range t {
				walk(x, path+"."+k)
			}
		case []any:
			for i, x := range t {
				walk(x, path+"["+strconv.Itoa(i)+"]")
			}
		case string:
			if secretref.Contains(t) {
				out = append(out, path)
			}
		}
	}
	walk(tree, prefix)
	return out
}

// underAny reports whether path is one of roots or below one.
func underAny(path string, roots []string) bool {
	for _, r := range roots {
		if path == r || strings.HasPrefix(path, r+".") || strings.HasPrefix(path, r+"[") {
			return true
		}
	}
	return false
}

// requiredCapabilities is what a node must advertise to run the job:
// job_control, and the component of each source and sink.
func requiredCapabilities(j config.Job) []string {
	out := []string{wire.CapabilityJobControl}
	for _, s := range j.Sources {
		out = append(out, "input:"+s.InputType)
	}
	for _, s := range j.Sinks {
		out = append(out, "output:"+s.OutputType)
	}
	slices.Sort(out[1:])
	return slices.Compact(out)
}

// statefulOperators lists the operators of a plan that keep state.
func statefulOperators(p *job.Plan) []string {
	var out []string
	for _, op := range p.Operators {
		if op.Stateful {
			out = append(out, op.ID)
		}
	}
	return out
}
