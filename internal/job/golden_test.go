package job_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/job"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json")

// decodeJob decodes a YAML job as the configuration loader does: through
// a JSON value tree into config.Job.
func decodeJob(t testing.TB, doc string) config.Job {
	t.Helper()
	var tree any
	if err := yaml.Unmarshal([]byte(doc), &tree); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	var j config.Job
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		t.Fatal(err)
	}
	return j
}

func TestExplainGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no jobs in testdata: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			doc, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			p, ps := job.Build("jobs[0]", decodeJob(t, string(doc)))
			if len(ps) > 0 {
				t.Fatalf("problems: %v", ps)
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(p.Explain()); err != nil {
				t.Fatal(err)
			}
			got := buf.Bytes()
			golden := filepath.Join("testdata", name+".golden.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

// TestPlanOperators checks the plan's operator entries for the two-stage
// job, which the explanation does not show in full.
func TestPlanOperators(t *testing.T) {
	doc, err := os.ReadFile("testdata/two_stage.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j := decodeJob(t, string(doc))
	p, ps := job.Build("jobs[0]", j)
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	type summary struct {
		ID, Kind, Chain string
		Parallelism     int
		Stateful        bool
		Inputs, Outputs []int
	}
	var got []summary
	for _, op := range p.Operators {
		got = append(got, summary{op.ID, op.Kind, op.Chain, op.Parallelism, op.Stateful, op.Inputs, op.Outputs})
	}
	want := []summary{
		{"orders", "source", "orders", 2, false, nil, []int{0}},
		{"normalize", "map", "orders", 2, false, []int{0}, []int{1}},
		{"totals", "aggregate", "totals", 3, true, []int{1}, []int{2}},
		{"out", "sink", "out", 2, false, []int{2}, nil},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operators (-want +got):\n%s", diff)
	}
	if src := p.Operator("orders"); src.Source == nil || src.Source.InputType != "file" || src.Time != nil {
		t.Errorf("orders source binding = %+v", src)
	}
	if out := p.Operator("out"); out.Sink == nil || out.Sink.OutputType != "file" {
		t.Errorf("out sink binding = %+v", out)
	}
	agg := p.Operator("totals").Aggregate
	wantAgg := &job.AggregateConfig{Key: "this.customer", Aggregations: []job.Aggregation{
		{Name: "orders", Function: "count"},
		{Name: "spent", Function: "sum", Expression: "this.amount"},
		{Name: "biggest", Function: "max", Expression: "this.amount"},
	}}
	if diff := cmp.Diff(wantAgg, agg); diff != "" {
		t.Errorf("aggregate config (-want +got):\n%s", diff)
	}
	if p.Operator("normalize").Map == nil || p.Operator("nope") != nil {
		t.Error("Operator lookup")
	}
	if p.FormatVersion != 1 || p.State != j.State || p.Checkpoint != j.Checkpoint || p.Recovery != "latest_checkpoint" || p.MaxParallelism != 64 {
		t.Errorf("plan header = %+v", p)
	}

	// format_version comes from state; without state it is 1.
	j.State.FormatVersion = 2
	if p, _ := job.Build("jobs[0]", j); p.FormatVersion != 2 {
		t.Errorf("format_version = %d, want 2", p.FormatVersion)
	}
	j.State = nil
	if p, _ := job.Build("jobs[0]", j); p.FormatVersion != 1 || p.Explain().State != nil {
		t.Errorf("format_version without state = %d", p.FormatVersion)
	}
}
