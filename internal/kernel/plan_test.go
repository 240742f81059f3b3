package kernel

import (
	"testing"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/operator"
)

// TestRunsPlanFromJobBuild runs a plan made by job.Build from a job
// configuration: a windowed-style two-stage job with a partitioned edge, a
// late route chained behind the window and a transactional sink.
func TestRunsPlanFromJobBuild(t *testing.T) {
	main, late := newSinkStore(), newSinkStore()
	root, arts := t.TempDir(), t.TempDir()
	max := int64(1 << 30)
	spec := config.Job{
		ID: "built", Version: 1, Parallelism: 2, MaxParallelism: 32,
		Operators: []config.Operator{
			{ID: "src", Kind: "source"},
			{ID: "win", Kind: "window", Config: map[string]any{
				"key": "this.k", "window": map[string]any{"type": "tumbling", "size_ms": 100},
				"aggregations": []any{map[string]any{"name": "n", "function": "count"}},
			}},
			{ID: "route", Kind: "map", Parallelism: 1, Config: map[string]any{"expression": "this"}},
			{ID: "out", Kind: "sink"},
			{ID: "lateout", Kind: "sink", Parallelism: 1},
		},
		Edges: []config.Edge{
			{From: "src", To: "win", Partitioned: true},
			{From: "win", To: "out"},
			{From: "route", To: "lateout"},
		},
		Sources: []config.Source{{OperatorID: "src", InputType: "seq", Config: map[string]any{"n": 2000, "hooks": &seqHooks{}},
			Time: &config.Time{Mode: "event_time", TimestampField: "ts", Watermark: config.Watermark{Strategy: "bounded_out_of_orderness", OutOfOrdernessMs: 5}, LateEventPolicy: "route", LateEventRoute: "route"}}},
		Sinks: []config.Sink{
			{OperatorID: "out", OutputType: "txcollect", Config: map[string]any{"store": main}},
			{OperatorID: "lateout", OutputType: "collect", Config: map[string]any{"store": late}},
		},
		State:      &config.JobState{Backend: "embedded_kv", Durability: "durable", Root: root, FormatVersion: 1, MaxPendingTransactions: 16, MaxBytes: &max},
		Checkpoint: &config.Checkpoint{IntervalMs: 20, Retention: 2, ObjectStoreURI: "file://" + arts},
		Recovery:   "latest_checkpoint",
	}
	p, probs := job.Build("jobs[0]", spec)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	var bad = &atomicErr{}
	var closed = &atomicInt{}
	opts := testOptions(map[string]func() operator.Operator{
		"win": func() operator.Operator {
			return &lateOp{last: operator.NoTime, closed: &closed.Int64, bad: &bad.Value}
		},
		"route": func() operator.Operator { return &pass{} },
	})
	key := opts.newKey
	opts.newKey = func(expr string) (keyer, error) {
		if expr == "this.k" {
			expr = "k"
		}
		return key(expr)
	}
	opts.Spec = &spec
	j, err := Build("jobs[0]", p, opts)
	if err != nil {
		t.Fatal(err)
	}
	wait, _ := runJob(t, j)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if got, want := len(main.values(true)), 1800; got != want {
		t.Errorf("%d records committed, want %d", got, want)
	}
	if got, want := len(late.values(false)), 200; got != want {
		t.Errorf("%d late records, want %d", got, want)
	}
	if err, _ := bad.Load().(error); err != nil {
		t.Error(err)
	}
	if closed.Load() != 2 {
		t.Errorf("%d window subtasks saw the final watermark", closed.Load())
	}
}
