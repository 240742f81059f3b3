package kernel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/operator"
	"github.com/flowplane/flowplane/internal/state"
)

// countJob is src (2 subtasks) -partitioned by k-> count (par) -> a
// transactional sink, with durable state under dirs.
type countJob struct {
	root, arts string
	store      *sinkStore
	n, keys    int
}

func (c *countJob) plan(hooks *seqHooks, par int) *job.Plan {
	return c.planWith(hooks, 2, par)
}

func (c *countJob) planWith(hooks *seqHooks, srcPar, par int) *job.Plan {
	p := makePlan("counts", 16, []opSpec{
		{id: "src", kind: "source", par: srcPar, typ: "seq", conf: map[string]any{"n": c.n, "keys": c.keys, "hooks": hooks}},
		{id: "count", kind: "aggregate", par: par, stateful: true},
		{id: "out", kind: "sink", par: par, typ: "txcollect", conf: map[string]any{"store": c.store}},
	}, []edgeSpec{{from: "src", to: "count", mode: job.Partitioned, key: "k"}, {from: "count", to: "out"}})
	return withState(p, c.root, c.arts, 3600_000)
}

func countOps() map[string]func() operator.Operator {
	return map[string]func() operator.Operator{
		"count": func() operator.Operator { return &countOp{} },
		"map":   func() operator.Operator { return &pass{} },
	}
}

func newCountJob(t *testing.T) *countJob {
	return &countJob{root: t.TempDir(), arts: t.TempDir(), store: newSinkStore(), n: 4000, keys: 13}
}

// sinkRecords is the number of records the sink tasks were given.
func sinkRecords(j *Job) int64 {
	var n int64
	for _, ts := range j.Observe().Tasks {
		if len(ts.ID) > 3 && ts.ID[:3] == "cou" {
			n += ts.RecordsOut
		}
	}
	return n
}

// firstRun reads 2000 records, checkpoints, lets 1000 more through
// uncommitted and is cancelled.
func (c *countJob) firstRun(t *testing.T) *state.Manifest {
	t.Helper()
	hooks := &seqHooks{}
	hooks.pauseAt.Store(2000)
	j, err := Build("jobs[0]", c.plan(hooks, 2), testOptions(countOps()))
	if err != nil {
		t.Fatal(err)
	}
	wait, cancel := runJob(t, j)
	eventually(t, "2000 records at the sink", func() bool { return sinkRecords(j) == 2000 })
	ctx, done := context.WithTimeout(context.Background(), 30*time.Second)
	defer done()
	m, err := j.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "2000 committed records", func() bool { return len(c.store.values(true)) == 2000 })
	hooks.pauseAt.Store(3000)
	eventually(t, "3000 records at the sink", func() bool { return sinkRecords(j) == 3000 })
	cancel()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if got := len(c.store.values(true)); got != 2000 {
		t.Fatalf("%d records committed after the cancel, want 2000", got)
	}
	return m
}

// checkExactlyOnce checks that the committed output holds, per key, the
// counts 1..total exactly once.
func (c *countJob) checkExactlyOnce(t *testing.T) {
	t.Helper()
	seen := map[string]map[int]int{}
	vals := c.store.values(true)
	for _, v := range vals {
		m := v.(map[string]any)
		k := m["k"].(string)
		if seen[k] == nil {
			seen[k] = map[int]int{}
		}
		seen[k][int(m["n"].(float64))]++
	}
	if len(vals) != c.n {
		t.Errorf("%d records committed, want %d", len(vals), c.n)
	}
	for i := 0; i < c.keys; i++ {
		k := fmt.Sprintf("k%d", i)
		want := c.n / c.keys
		if i < c.n%c.keys {
			want++
		}
		for n := 1; n <= want; n++ {
			if seen[k][n] != 1 {
				t.Errorf("key %s count %d committed %d times", k, n, seen[k][n])
			}
		}
		if len(seen[k]) != want {
			t.Errorf("key %s has %d distinct counts, want %d", k, len(seen[k]), want)
		}
	}
}

func TestCheckpointRestoreExactlyOnce(t *testing.T) {
	for _, par := range []int{2, 3} { // 3: rescaling keeps every key's state
		t.Run(fmt.Sprintf("count parallelism 2 to %d", par), func(t *testing.T) {
			c := newCountJob(t)
			m := c.firstRun(t)
			if m.Kind != state.KindCheckpoint || len(m.Tasks) != 2 || len(m.Sources) != 2 {
				t.Fatalf("manifest %+v", m)
			}
			hooks := &seqHooks{}
			j, err := Build("jobs[0]", c.plan(hooks, par), testOptions(countOps()))
			if err != nil {
				t.Fatal(err)
			}
			wait, _ := runJob(t, j)
			if err := wait(); err != nil {
				t.Fatal(err)
			}
			if o := j.Observe(); o.State != Completed || o.RestoredFrom != fmt.Sprintf("checkpoint %d", m.ID) {
				t.Errorf("observation %+v", o)
			}
			c.checkExactlyOnce(t)
		})
	}
}

func TestIncompatibleArtifactRefused(t *testing.T) {
	c := newCountJob(t)
	c.firstRun(t)
	tests := []struct {
		name  string
		field string
		plan  func(*seqHooks) *job.Plan
	}{
		{"max_parallelism", "max_parallelism", func(h *seqHooks) *job.Plan {
			p := c.plan(h, 2)
			p.MaxParallelism = 32
			for i := range p.Tasks {
				p.Tasks[i].KeyGroups = job.RangeOf(p.Tasks[i].Subtask, 2, 32)
			}
			return p
		}},
		{"format_version", "format_version", func(h *seqHooks) *job.Plan {
			p := c.plan(h, 2)
			p.FormatVersion = 2
			return p
		}},
		{"removed stateful operator", "operators", func(h *seqHooks) *job.Plan {
			p := makePlan("counts", 16, []opSpec{
				{id: "src", kind: "source", par: 2, typ: "seq", conf: map[string]any{"n": c.n, "hooks": h}},
				{id: "map", kind: "map", par: 2},
				{id: "out", kind: "sink", par: 2, typ: "txcollect", conf: map[string]any{"store": c.store}},
			}, []edgeSpec{{from: "src", to: "map"}, {from: "map", to: "out"}})
			return withState(p, c.root, c.arts, 3600_000)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hooks := &seqHooks{}
			j, err := Build("jobs[0]", tt.plan(hooks), testOptions(countOps()))
			if err != nil {
				t.Fatal(err)
			}
			wait, _ := runJob(t, j)
			err = wait()
			var ie *state.IncompatibleError
			if !errors.As(err, &ie) || ie.Field != tt.field {
				t.Fatalf("Run = %v, want an incompatible %s", err, tt.field)
			}
			if n := hooks.connects.Load(); n != 0 {
				t.Errorf("%d inputs connected before the artifact was refused", n)
			}
			if o := j.Observe(); o.State != Failed || o.Error == "" {
				t.Errorf("observation %+v", o)
			}
		})
	}
}

func TestSourceRescaleRefused(t *testing.T) {
	c := newCountJob(t)
	c.firstRun(t)
	hooks := &seqHooks{}
	j, err := Build("jobs[0]", c.planWith(hooks, 3, 2), testOptions(countOps()))
	if err != nil {
		t.Fatal(err)
	}
	wait, _ := runJob(t, j)
	err = wait()
	if err == nil || !strings.Contains(err.Error(), "source src ran at parallelism 2 and now has 3") {
		t.Fatalf("Run = %v, want the source parallelism refused", err)
	}
	if hooks.connects.Load() != 0 {
		t.Error("inputs connected before the artifact was refused")
	}
}

// TestSameChainLateEdge routes late records to an operator chained behind
// the window: a direct call, not a channel into its own task.
func TestSameChainLateEdge(t *testing.T) {
	store := newSinkStore()
	p := makePlan("chainlate", 16, []opSpec{
		{id: "src", kind: "source", par: 2, typ: "seq", conf: map[string]any{"n": 1000, "hooks": &seqHooks{}}},
		{id: "win", kind: "window", par: 2},
		{id: "route", kind: "map", par: 2},
		{id: "out", kind: "sink", par: 2, typ: "txcollect", conf: map[string]any{"store": store}},
	}, []edgeSpec{{from: "src", to: "win"}, {from: "win", to: "route"}, {from: "win", to: "route", mode: job.Late}, {from: "route", to: "out"}})
	p = withState(p, t.TempDir(), t.TempDir(), 5)
	if len(p.Chains) != 1 {
		t.Fatalf("chains %+v, want one", p.Chains)
	}
	var closed atomic.Int64
	var bad atomic.Value
	j, err := Build("jobs[0]", p, testOptions(map[string]func() operator.Operator{
		"win":   func() operator.Operator { return &lateOp{last: operator.NoTime, closed: &closed, bad: &bad} },
		"route": func() operator.Operator { return &pass{} },
	}))
	if err != nil {
		t.Fatal(err)
	}
	wait, _ := runJob(t, j)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(upTo(1000), ints(store.values(true), "i")); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
