package job_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/job"
)

var kinds = []string{"source", "map", "filter", "aggregate", "window", "udf", "sink", "join", ""}

// genJob draws a job that is mostly well formed: operators of every kind
// with good or bad configs, edges mostly forward in configuration order
// (so mostly acyclic), sometimes partitioned, sources and sinks bound or
// not, time declarations that agree or not.
func genJob(t *rapid.T) config.Job {
	n := rapid.IntRange(1, 8).Draw(t, "operators")
	j := config.Job{
		ID:             "j",
		Version:        1,
		Parallelism:    rapid.IntRange(-1, 4).Draw(t, "parallelism"),
		MaxParallelism: rapid.SampledFrom([]int{0, 1, 4, 128, 40000}).Draw(t, "max_parallelism"),
		Recovery:       "latest_checkpoint",
	}
	for i := range n {
		id := fmt.Sprintf("op%d", rapid.IntRange(0, n).Draw(t, "id"))
		kind := rapid.SampledFrom(kinds).Draw(t, "kind")
		op := config.Operator{ID: id, Kind: kind, Parallelism: rapid.IntRange(-1, 5).Draw(t, "op parallelism")}
		if rapid.Bool().Draw(t, "has config") {
			op.Config = genOpConfig(t, kind)
		}
		j.Operators = append(j.Operators, op)
		_ = i
	}
	ne := rapid.IntRange(0, 2*n).Draw(t, "edges")
	for range ne {
		a := rapid.IntRange(0, n-1).Draw(t, "from")
		b := rapid.IntRange(0, n-1).Draw(t, "to")
		if a > b && rapid.IntRange(0, 9).Draw(t, "backwards") > 0 {
			a, b = b, a
		}
		to := j.Operators[b].ID
		if rapid.IntRange(0, 19).Draw(t, "dangling") == 0 {
			to = "nowhere"
		}
		j.Edges = append(j.Edges, config.Edge{From: j.Operators[a].ID, To: to, Partitioned: rapid.Bool().Draw(t, "partitioned")})
	}
	times := []*config.Time{
		nil,
		{Mode: "event_time", TimestampField: "ts", LateEventPolicy: "drop"},
		{Mode: "event_time", TimestampField: "ts", LateEventPolicy: "route", LateEventRoute: fmt.Sprintf("op%d", rapid.IntRange(0, n).Draw(t, "route"))},
		{Mode: "event_time", TimestampField: "ts", LateEventPolicy: "route"},
	}
	for _, op := range j.Operators {
		switch {
		case op.Kind == "source" && rapid.IntRange(0, 9).Draw(t, "bind source") > 0:
			j.Sources = append(j.Sources, config.Source{OperatorID: op.ID, InputType: "memory", Time: rapid.SampledFrom(times).Draw(t, "time")})
		case op.Kind == "sink" && rapid.IntRange(0, 9).Draw(t, "bind sink") > 0:
			j.Sinks = append(j.Sinks, config.Sink{OperatorID: op.ID, OutputType: "drop"})
		}
	}
	if rapid.Bool().Draw(t, "state") {
		j.State = &config.JobState{Backend: "embedded_kv", Durability: "ephemeral", FormatVersion: rapid.IntRange(0, 2).Draw(t, "format_version")}
	}
	return j
}

func genOpConfig(t *rapid.T, kind string) map[string]any {
	expr := rapid.SampledFrom([]any{"this", "this.k", "this.v * 2", "this.(", 3.0, "", nil}).Draw(t, "expression")
	agg := func() []any {
		var out []any
		for i := range rapid.IntRange(0, 3).Draw(t, "aggregations") {
			out = append(out, map[string]any{
				"name":       rapid.SampledFrom([]string{"n", fmt.Sprint("a", i), "key", ""}).Draw(t, "name"),
				"function":   rapid.SampledFrom(append(slices.Clone(job.AggregateFunctions), "median")).Draw(t, "function"),
				"expression": expr,
			})
		}
		return out
	}
	switch rapid.IntRange(0, 2).Draw(t, "config shape") {
	case 0:
		return map[string]any{"stray": true}
	case 1:
		return map[string]any{"expression": expr, "condition": expr, "key": expr, "module": "m.wasm", "function": "f"}
	}
	switch kind {
	case "map":
		return map[string]any{"expression": expr}
	case "filter":
		return map[string]any{"condition": expr}
	case "aggregate":
		return map[string]any{"key": expr, "aggregations": agg()}
	case "window":
		w := map[string]any{"type": rapid.SampledFrom([]string{"tumbling", "sliding", "session", "hopping"}).Draw(t, "window type")}
		for _, f := range []string{"size_ms", "slide_ms", "gap_ms"} {
			if rapid.Bool().Draw(t, "has "+f) {
				w[f] = rapid.SampledFrom([]any{0.0, 1000.0, 500.0, -1.0, 1.5, "1s"}).Draw(t, f)
			}
		}
		return map[string]any{"key": expr, "window": w, "aggregations": agg()}
	case "udf":
		return map[string]any{"module": "m.wasm", "function": expr}
	}
	return map[string]any{"x": 1.0}
}

// genGoodJob draws a valid job: a DAG in configuration order fed by one
// or two sources with the same time declaration, keyed operators fed by
// partitioned edges when they run at parallelism above one, sinks last
// in their branch, and maybe a late route into a sink.
func genGoodJob(t *rapid.T) config.Job {
	maxP := rapid.SampledFrom([]int{1, 3, 128}).Draw(t, "max_parallelism")
	par := func(label string) int { return rapid.IntRange(0, min(maxP, 4)).Draw(t, label) }
	j := config.Job{ID: "j", Version: 1, Parallelism: max(1, par("parallelism")), MaxParallelism: maxP, Recovery: "fail"}
	time := rapid.SampledFrom([]*config.Time{nil, {Mode: "event_time", TimestampField: "ts", LateEventPolicy: "update"}}).Draw(t, "time")
	nSrc := rapid.IntRange(1, 2).Draw(t, "sources")
	n := nSrc + rapid.IntRange(1, 8).Draw(t, "operators")
	var late string
	for i := range n {
		id := fmt.Sprintf("op%d", i)
		kind := "source"
		if i >= nSrc {
			kind = rapid.SampledFrom([]string{"map", "filter", "aggregate", "window", "udf", "sink"}).Draw(t, "kind")
		}
		if i == n-1 {
			kind = "sink"
		}
		op := config.Operator{ID: id, Kind: kind, Parallelism: par("op parallelism")}
		switch kind {
		case "map":
			op.Config = map[string]any{"expression": "merge(this, {\"n\": 1})"}
		case "filter":
			op.Config = map[string]any{"condition": "this.v > 0"}
		case "udf":
			op.Config = map[string]any{"module": "f.wasm", "function": "f"}
		case "aggregate":
			op.Config = map[string]any{"key": "this.k", "aggregations": []any{map[string]any{"name": "n", "function": "count"}}}
		case "window":
			op.Config = map[string]any{"key": "this.k", "window": map[string]any{"type": "sliding", "size_ms": 10.0, "slide_ms": 5.0}}
		case "source":
			j.Sources = append(j.Sources, config.Source{OperatorID: id, InputType: "generate", Time: time})
		case "sink":
			j.Sinks = append(j.Sinks, config.Sink{OperatorID: id, OutputType: "drop"})
			if late == "" && i < n-1 {
				late = id
			}
		}
		j.Operators = append(j.Operators, op)
		if i < nSrc {
			continue
		}
		// Inputs: one or two distinct earlier operators that are not sinks.
		var from []int
		for range rapid.IntRange(1, 2).Draw(t, "inputs") {
			k := rapid.IntRange(0, i-1).Draw(t, "input")
			if j.Operators[k].Kind != "sink" && !slices.Contains(from, k) {
				from = append(from, k)
			}
		}
		if len(from) == 0 {
			from = []int{rapid.IntRange(0, nSrc-1).Draw(t, "source input")}
		}
		p := op.Parallelism
		if p == 0 {
			p = j.Parallelism
		}
		for _, k := range from {
			part := (kind == "aggregate" || kind == "window") && (p > 1 || rapid.Bool().Draw(t, "partitioned"))
			j.Edges = append(j.Edges, config.Edge{From: j.Operators[k].ID, To: id, Partitioned: part})
		}
	}
	if time != nil && late != "" && rapid.Bool().Draw(t, "route") {
		t := *time
		t.LateEventPolicy, t.LateEventRoute = "route", late
		for k := range j.Sources {
			j.Sources[k].Time = &t
		}
	}
	return j
}

// TestBuildGoodJobs builds random valid jobs: each gives a plan, and the
// plan keeps every invariant.
func TestBuildGoodJobs(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, ps := job.Build("jobs[0]", genGoodJob(t))
		if len(ps) > 0 {
			t.Fatalf("problems: %v", ps)
		}
		checkPlan(t, p)
	})
}

// TestBuildProperties builds random jobs: Build never panics, every
// problem is under the prefix, and every plan it returns keeps the plan's
// invariants.
func TestBuildProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		j := genJob(t)
		p, ps := job.Build("jobs[7]", j)
		for _, pr := range ps {
			if !strings.HasPrefix(pr.Path, "jobs[7]") {
				t.Fatalf("problem outside the prefix: %s: %s", pr.Path, pr.Message)
			}
		}
		if (p == nil) == (len(ps) == 0) {
			t.Fatalf("plan %v with problems %v", p != nil, ps)
		}
		if p != nil {
			checkPlan(t, p)
		}
	})
}

// checkPlan asserts a plan's invariants.
func checkPlan(t interface{ Fatalf(string, ...any) }, p *job.Plan) {
	pos := map[string]int{}
	for i, op := range p.Operators {
		pos[op.ID] = i
	}
	for i, e := range p.Edges {
		from, to := p.Operator(e.From), p.Operator(e.To)
		if from == nil || to == nil {
			t.Fatalf("edge %s: unknown end", e.ID)
		}
		if pos[e.From] >= pos[e.To] {
			t.Fatalf("edge %s goes from position %d to %d: not topological", e.ID, pos[e.From], pos[e.To])
		}
		if !slices.Contains(from.Outputs, i) || !slices.Contains(to.Inputs, i) {
			t.Fatalf("edge %d (%s) missing from its operators' outputs/inputs", i, e.ID)
		}
		switch e.Mode {
		case job.Forward:
			if from.Parallelism != to.Parallelism {
				t.Fatalf("forward edge %s between parallelisms %d and %d", e.ID, from.Parallelism, to.Parallelism)
			}
		case job.Rebalance:
			if from.Parallelism == to.Parallelism {
				t.Fatalf("rebalance edge %s between equal parallelisms", e.ID)
			}
		case job.Partitioned:
			if !to.Stateful || e.Key == "" {
				t.Fatalf("partitioned edge %s into %s (key %q)", e.ID, to.Kind, e.Key)
			}
		case job.Late:
			if from.Kind != "window" || e.Chained {
				t.Fatalf("late edge %s from a %s, chained %v", e.ID, from.Kind, e.Chained)
			}
		default:
			t.Fatalf("edge %s mode %q", e.ID, e.Mode)
		}
		if to.Stateful && to.Parallelism > 1 && e.Mode != job.Partitioned && e.Mode != job.Late {
			t.Fatalf("keyed %s at parallelism %d fed by a %s edge", to.ID, to.Parallelism, e.Mode)
		}
		if e.Chained && (e.Mode != job.Forward || countEdges(p, from.Outputs) != 1 || countEdges(p, to.Inputs) != 1) {
			t.Fatalf("edge %s chained: mode %s, %d outputs of %s, %d inputs of %s", e.ID, e.Mode, countEdges(p, from.Outputs), from.ID, countEdges(p, to.Inputs), to.ID)
		}
		if e.Mode == job.Forward && !e.Chained && countEdges(p, from.Outputs) == 1 && countEdges(p, to.Inputs) == 1 {
			t.Fatalf("edge %s could be chained", e.ID)
		}
		// A late edge is never chained, but may join two operators of one
		// chain (a window and a route chained after it).
		if e.Chained != (from.Chain == to.Chain) && e.Mode != job.Late {
			t.Fatalf("edge %s chained=%v but chains %s, %s", e.ID, e.Chained, from.Chain, to.Chain)
		}
	}
	seen := map[string]bool{}
	tasks := 0
	for _, c := range p.Chains {
		if c.ID != c.Operators[0] {
			t.Fatalf("chain %s starts with %s", c.ID, c.Operators[0])
		}
		for k, id := range c.Operators {
			op := p.Operator(id)
			if k > 0 && !slices.ContainsFunc(p.Edges, func(e job.Edge) bool { return e.Chained && e.From == c.Operators[k-1] && e.To == id }) {
				t.Fatalf("chain %s: no chained edge %s -> %s", c.ID, c.Operators[k-1], id)
			}
			if seen[id] || op.Chain != c.ID || op.Parallelism != c.Parallelism {
				t.Fatalf("operator %s in chain %s: %+v", id, c.ID, op)
			}
			seen[id] = true
		}
		for s := range c.Parallelism {
			task := p.Tasks[tasks]
			if task.ID != fmt.Sprintf("%s#%d", c.ID, s) || task.Subtask != s || task.KeyGroups != job.RangeOf(s, c.Parallelism, p.MaxParallelism) {
				t.Fatalf("task %d = %+v", tasks, task)
			}
			tasks++
		}
	}
	if len(seen) != len(p.Operators) || tasks != len(p.Tasks) {
		t.Fatalf("%d of %d operators in chains, %d of %d tasks", len(seen), len(p.Operators), tasks, len(p.Tasks))
	}
	if _, err := json.Marshal(p.Explain()); err != nil {
		t.Fatalf("explain: %v", err)
	}
}

// FuzzBuild feeds job specifications as JSON through the configuration
// decoding into Build: it must not panic, every problem must be under the
// prefix, and a plan must keep its invariants.
func FuzzBuild(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, file := range files {
		doc, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		b, _ := json.Marshal(decodeJob(f, string(doc)))
		f.Add(b)
	}
	f.Add([]byte(`{"id":"j","operators":[{"id":"a","kind":"window","config":{"window":{"type":"sliding","size_ms":1e300}}}],"edges":[{"from":"a","to":"a"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var j config.Job
		if err := json.Unmarshal(b, &j); err != nil {
			return
		}
		p, ps := job.Build("jobs[0]", j)
		for _, pr := range ps {
			if !strings.HasPrefix(pr.Path, "jobs[0]") {
				t.Fatalf("problem outside the prefix: %s: %s", pr.Path, pr.Message)
			}
		}
		if p != nil {
			checkPlan(t, p)
		}
	})
}

// countEdges counts the edges of idx that are not late edges.
func countEdges(p *job.Plan, idx []int) int {
	n := 0
	for _, i := range idx {
		if p.Edges[i].Mode != job.Late {
			n++
		}
	}
	return n
}
