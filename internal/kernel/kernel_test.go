package kernel

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/operator"
	"github.com/google/go-cmp/cmp"
)

func ints(vals []any, field string) []int {
	out := make([]int, 0, len(vals))
	for _, v := range vals {
		out = append(out, int(v.(map[string]any)[field].(float64)))
	}
	slices.Sort(out)
	return out
}

func upTo(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestPassThrough(t *testing.T) {
	for _, par := range []int{1, 2} {
		t.Run("parallelism "+string(rune('0'+par)), func(t *testing.T) {
			store := newSinkStore()
			hooks := &seqHooks{}
			p := makePlan("pass", 128, []opSpec{
				{id: "src", kind: "source", par: par, typ: "seq", conf: map[string]any{"n": 5000, "hooks": hooks}},
				{id: "map", kind: "map", par: par},
				{id: "out", kind: "sink", par: par, typ: "collect", conf: map[string]any{"store": store}},
			}, []edgeSpec{{from: "src", to: "map"}, {from: "map", to: "out"}})
			var states []State
			opts := testOptions(map[string]func() operator.Operator{"map": func() operator.Operator { return &pass{} }})
			statec := make(chan State, 16)
			opts.OnState = func(s State) { statec <- s }
			j, err := Build("jobs[0]", p, opts)
			if err != nil {
				t.Fatal(err)
			}
			wait, _ := runJob(t, j)
			if err := wait(); err != nil {
				t.Fatal(err)
			}
			close(statec)
			for s := range statec {
				states = append(states, s)
			}
			if diff := cmp.Diff([]State{Running, Completed}, states); diff != "" {
				t.Errorf("states (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(upTo(5000), ints(store.values(false), "i")); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			o := j.Observe()
			if o.State != Completed || len(o.Tasks) != par {
				t.Errorf("observation %+v", o)
			}
			var in int64
			for _, ts := range o.Tasks {
				in += ts.RecordsIn
				if ts.State != "finished" {
					t.Errorf("task %s is %s", ts.ID, ts.State)
				}
			}
			if in != 5000 {
				t.Errorf("records in = %d, want 5000", in)
			}
		})
	}
}

// TestPartitionedRouting sends keys from two source subtasks to three
// counters: every record must reach the subtask owning its key group (the
// counter fails otherwise) and the counts must be complete.
func TestPartitionedRouting(t *testing.T) {
	store := newSinkStore()
	p := makePlan("route", 16, []opSpec{
		{id: "src", kind: "source", par: 2, typ: "seq", conf: map[string]any{"n": 3000, "keys": 37, "hooks": &seqHooks{}}},
		{id: "count", kind: "aggregate", par: 3},
		{id: "out", kind: "sink", par: 3, typ: "collect", conf: map[string]any{"store": store}},
	}, []edgeSpec{{from: "src", to: "count", mode: job.Partitioned, key: "k"}, {from: "count", to: "out"}})
	j, err := Build("jobs[0]", p, testOptions(map[string]func() operator.Operator{"count": func() operator.Operator { return &countOp{} }}))
	if err != nil {
		t.Fatal(err)
	}
	wait, _ := runJob(t, j)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	final := map[string]float64{}
	for _, v := range store.values(false) {
		m := v.(map[string]any)
		k := m["k"].(string)
		if want := job.SubtaskOf(job.KeyGroup([]byte(k), 16), 3, 16); int(m["sub"].(float64)) != want {
			t.Errorf("key %s counted on subtask %v, want %d", k, m["sub"], want)
		}
		final[k] = max(final[k], m["n"].(float64))
	}
	if len(final) != 37 {
		t.Fatalf("%d keys, want 37", len(final))
	}
	var total float64
	for _, n := range final {
		total += n
	}
	if total != 3000 {
		t.Errorf("counted %v records, want 3000", total)
	}
}

func TestBuildProblems(t *testing.T) {
	p := makePlan("bad", 128, []opSpec{
		{id: "src", kind: "source", par: 2, typ: "plain"},
		{id: "map", kind: "map", par: 2},
		{id: "agg", kind: "aggregate", par: 2},
		{id: "out", kind: "sink", par: 2, typ: "nope"},
	}, []edgeSpec{{from: "src", to: "map"}, {from: "map", to: "agg", mode: job.Partitioned, key: "bad key"}, {from: "agg", to: "out"}})
	spec := &config.Job{
		Operators: []config.Operator{{ID: "out"}, {ID: "agg"}, {ID: "map"}, {ID: "src"}},
		Sources:   []config.Source{{OperatorID: "other"}, {OperatorID: "src"}},
		Sinks:     []config.Sink{{OperatorID: "out"}},
	}
	opts := testOptions(map[string]func() operator.Operator{"agg": func() operator.Operator { return &countOp{} }})
	opts.Spec = spec
	_, err := Build("jobs[3]", p, opts)
	var be *BuildError
	if !errors.As(err, &be) {
		t.Fatalf("Build error %v, want a *BuildError", err)
	}
	var got []string
	for _, pr := range config.Problems(err) {
		got = append(got, pr.Path)
	}
	want := []string{"jobs[3].sources[1]", "jobs[3].operators[1].config.key", "jobs[3].operators[2].config", "jobs[3].sinks[0].output_type"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problem paths (-want +got):\n%s\n%v", diff, err)
	}
	if !strings.Contains(err.Error(), "cannot be split") || !strings.Contains(err.Error(), `set operator "src"'s parallelism to 1`) {
		t.Errorf("error %q does not say the input cannot be split", err)
	}
}

// TestBackPressure blocks the sink: the unbounded source must stop reading
// once the channels are full.
func TestBackPressure(t *testing.T) {
	store := newSinkStore()
	store.block = make(chan struct{})
	hooks := &seqHooks{}
	p := makePlan("bp", 128, []opSpec{
		{id: "src", kind: "source", par: 1, typ: "seq", conf: map[string]any{"n": 0, "batch": 100, "hooks": hooks}},
		{id: "out", kind: "sink", par: 2, typ: "collect", conf: map[string]any{"store": store}},
	}, []edgeSpec{{from: "src", to: "out", mode: job.Rebalance}})
	j, err := Build("jobs[0]", p, testOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, cancel := runJob(t, j)
	defer cancel()
	// Wait for the reads to stop growing.
	last, stable := int64(-1), 0
	deadline := time.Now().Add(20 * time.Second)
	for stable < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("the source kept reading: %d batches", hooks.reads.Load())
		}
		time.Sleep(20 * time.Millisecond)
		if n := hooks.reads.Load(); n == last {
			stable++
		} else {
			last, stable = n, 0
		}
	}
	// In flight at most: per channel 16 elements of up to 1024 records, a
	// partial batch per channel, a batch per sink being written, the batch in
	// the reader's hand and the one it handed over.
	bound := int64(2*(channelCapacity+2)*batchSize/100 + 4)
	if n := hooks.reads.Load(); n > bound {
		t.Errorf("source read %d batches with the sink blocked; bound %d", n, bound)
	}
	if store.writes.Load() != 0 {
		t.Errorf("blocked sink wrote")
	}
	close(store.block)
	eventually(t, "the sink to write after unblocking", func() bool { return store.writes.Load() > 0 })
}
