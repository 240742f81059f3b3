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

// standIns are the values the Hub puts in place of the references of a
// spec, one set at a time, to check and plan it: the values are the
// node's, and a reference may stand for a number in an expression ("this.n
// * ${env:F}"), a duration, a field name or text. The spec is accepted
// with the first stand-in under which it is valid; the node checks the
// real values (job_validate, job_start).
var standIns = []string{"placeholder", "1", "1s"}

// materializeJob checks a submitted spec exactly as a node's configuration
// loader does (value tree, limits, schema, defaults, semantic rules, then
// the plan), with the Hub's registry. Secret references are the node's to
// resolve: the Hub reads each as a stand-in value (see [standIns]), lists
// it, and leaves the checks of the values they stand for to the node. A
// problem at a path holding a reference is the Hub's to report only when
// no stand-in makes the spec valid: the node would reject the spec too,
// unless the value is of a kind no stand-in imitates, and the 422 says so.
// Problems come back with paths under "spec".
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
	doc, err := json.Marshal(map[string]any{"streams": []any{}, "jobs": []any{tree}})
	if err != nil {
		return nil, []httpapi.FieldProblem{{Path: specPath, Message: err.Error()}}
	}
	refPaths := referencePaths(tree, "jobs[0]")
	var first []config.Problem // at reference paths, with the first stand-in
	for _, standIn := range standIns {
		m, probs, atRefs := h.materializeWith(doc, refPaths, standIn)
		switch {
		case m != nil:
			return m, nil
		case len(probs) > 0:
			return nil, specProblems(probs)
		case first == nil:
			first = atRefs
		}
		if len(refPaths) == 0 {
			break
		}
	}
	for i, p := range first {
		first[i].Message = "holds a reference, and is not valid whatever the Hub puts in its place (" +
			strings.Join(standIns, ", ") + "; the node resolves it): " + p.Message
	}
	return nil, specProblems(first)
}

// materializeWith is one check of a spec, its references read as
// standIn. It returns the spec, or the problems found at paths holding no
// reference (the spec is invalid whatever the references hold), or else
// those at paths holding one.
func (h *Hub) materializeWith(doc []byte, refPaths []string, standIn string) (*materialized, []config.Problem, []config.Problem) {
	var secrets []string
	res := secretref.Resolver{
		LookupEnv: func(name string) (string, bool) {
			secrets = append(secrets, "env:"+name)
			return standIn, true
		},
		ReadFile: func(path string) ([]byte, error) {
			secrets = append(secrets, "file:"+path)
			return []byte(standIn), nil
		},
	}
	cfg, err := config.Materialize(doc, config.JSON, h.opts.Registry, res)
	var probs, atRefs []config.Problem
	split := func(ps []config.Problem) {
		for _, p := range ps {
			if underAny(p.Path, refPaths) {
				atRefs = append(atRefs, p)
			} else {
				probs = append(probs, p)
			}
		}
	}
	if err != nil {
		split(config.Problems(err))
	}
	if len(probs) == 0 && len(atRefs) == 0 && (cfg == nil || len(cfg.Jobs) != 1) {
		probs = append(probs, config.Problem{Message: "the specification does not describe one job"})
	}
	if len(probs) > 0 || len(atRefs) > 0 {
		return nil, probs, atRefs
	}
	m := &materialized{job: cfg.Jobs[0]}
	plan, ps := job.Build("jobs[0]", m.job)
	split(ps)
	if len(probs) > 0 || len(atRefs) > 0 {
		return nil, probs, atRefs
	}
	m.plan = plan
	x := plan.Explain()
	asWritten(&x, keysAsWritten(doc, res))
	if m.explain, err = json.Marshal(x); err != nil {
		return nil, []config.Problem{{Message: err.Error()}}, nil
	}
	m.required = requiredCapabilities(m.job)
	slices.Sort(secrets)
	m.secrets = slices.Compact(secrets)
	return m, nil, nil
}

// keysAsWritten maps the keys of a spec's operators as res resolves them
// to the keys as written, for the explained plan to show the references
// rather than the stand-ins.
func keysAsWritten(doc []byte, res secretref.Resolver) map[string]string {
	var spec struct {
		Jobs []struct {
			Operators []struct {
				Config struct {
					Key string `json:"key"` // aggregate, window
				} `json:"config"`
			} `json:"operators"`
		} `json:"jobs"`
	}
	out := map[string]string{}
	if json.Unmarshal(doc, &spec) != nil || len(spec.Jobs) != 1 {
		return out
	}
	for _, op := range spec.Jobs[0].Operators {
		if k := op.Config.Key; secretref.Contains(k) {
			if v, err := res.String("", k); err == nil {
				out[v] = k
			}
		}
	}
	return out
}

// asWritten puts the keys of x back as written (see keysAsWritten).
func asWritten(x *job.Explanation, keys map[string]string) {
	if len(keys) == 0 {
		return
	}
	swap := func(k *string) {
		if w, ok := keys[*k]; ok {
			*k = w
		}
	}
	for i := range x.Edges {
		swap(&x.Edges[i].Key)
	}
	for i := range x.StatefulOperators {
		swap(&x.StatefulOperators[i].Key)
	}
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
