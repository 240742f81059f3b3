package kernel

import (
	"fmt"
	"testing"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/google/go-cmp/cmp"
)

// TestRealWindowOperator runs job.Build's plan with the real window
// operator and key (operator.New, operator.NewKey): a keyed tumbling count
// in event time over a partitioned edge, into the transactional sink,
// checkpointing as it goes.
func TestRealWindowOperator(t *testing.T) {
	out := newSinkStore()
	spec := config.Job{
		ID: "window", Version: 1, Parallelism: 2, MaxParallelism: 32,
		Operators: []config.Operator{
			{ID: "src", Kind: "source"},
			{ID: "win", Kind: "window", Parallelism: 3, Config: map[string]any{
				"key": "this.k", "window": map[string]any{"type": "tumbling", "size_ms": 100},
				"aggregations": []any{map[string]any{"name": "n", "function": "count"}},
			}},
			{ID: "out", Kind: "sink", Parallelism: 3},
		},
		Edges: []config.Edge{{From: "src", To: "win", Partitioned: true}, {From: "win", To: "out"}},
		Sources: []config.Source{{OperatorID: "src", InputType: "seq", Config: map[string]any{"n": 2000, "hooks": &seqHooks{}},
			Time: &config.Time{Mode: "event_time", TimestampField: "ts", Watermark: config.Watermark{Strategy: "bounded_out_of_orderness", OutOfOrdernessMs: 10}, LateEventPolicy: "drop"}}},
		Sinks:      []config.Sink{{OperatorID: "out", OutputType: "txcollect", Config: map[string]any{"store": out}}},
		State:      &config.JobState{Backend: "embedded_kv", Durability: "durable", Root: t.TempDir(), FormatVersion: 1, MaxPendingTransactions: 64},
		Checkpoint: &config.Checkpoint{IntervalMs: 10, Retention: 2, ObjectStoreURI: "file://" + t.TempDir()},
		Recovery:   "latest_checkpoint",
	}
	p, probs := job.Build("jobs[0]", spec)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	opts := Options{Registry: testRegistry(), Spec: &spec}
	j, err := Build("jobs[0]", p, opts)
	if err != nil {
		t.Fatal(err)
	}
	wait, _ := runJob(t, j)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, v := range out.values(true) {
		m := v.(map[string]any)
		got[fmt.Sprintf("%v@%v", m["key"], m["window_start"])] += m["n"].(float64)
	}
	want := map[string]float64{}
	for i := 0; i < 2000; i++ {
		want[fmt.Sprintf("k%d@%d", i%10, i/100*100)]++
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("window counts (-want +got):\n%s", diff)
	}
}
