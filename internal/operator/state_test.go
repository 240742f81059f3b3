package operator_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-json"
	gocmp "github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/operator"
	"github.com/flowplane/flowplane/internal/state"
)

const maxPar = 128

func openStore(t *testing.T) *state.Store {
	t.Helper()
	s, err := state.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// restored opens a new store holding the key groups r of the checkpoint
// in dir.
func restored(t *testing.T, dir string, r job.Range) *state.Store {
	t.Helper()
	s := openStore(t)
	if err := state.Restore(s, []string{dir}, r); err != nil {
		t.Fatal(err)
	}
	return s
}

// batchOf is one input batch and the watermark after it.
type batchOf struct {
	in []operator.Record
	wm int64
}

// disordered makes n records over keys k0..k29, out of order by up to 20
// ms, in batches of 10 each followed by the bounded_out_of_orderness
// watermark (max seen - 20 - 1).
func disordered(n int) []batchOf {
	r := rand.New(rand.NewPCG(7, 9))
	var out []batchOf
	maxSeen := int64(math.MinInt64)
	var cur []operator.Record
	for i := range n {
		t := int64(i*3) + r.Int64N(21)
		maxSeen = max(maxSeen, t)
		cur = append(cur, rec(t, kv(fmt.Sprintf("k%d", r.IntN(30)), float64(i%7))))
		if len(cur) == 10 || i == n-1 {
			out = append(out, batchOf{cur, maxSeen - 21})
			cur = nil
		}
	}
	return out
}

func (h *harness) feed(bs []batchOf) {
	h.t.Helper()
	for _, b := range bs {
		h.mustProcess(b.in...)
		h.watermark(b.wm)
	}
}

func (h *harness) snapshot(id int64) {
	h.t.Helper()
	if err := h.op.Snapshot(context.Background(), id); err != nil {
		h.t.Fatal(err)
	}
}

var stateful = map[string]*job.Operator{
	"aggregate": aggregateOp(allAggs),
	"tumbling": {ID: "w", Kind: "window", Stateful: true, Window: &job.WindowConfig{Key: "this.k",
		Window: job.WindowSpec{Type: "tumbling", SizeMs: 40}, Aggregations: allAggs}},
	"sliding": {ID: "w", Kind: "window", Stateful: true, Window: &job.WindowConfig{Key: "this.k",
		Window: job.WindowSpec{Type: "sliding", SizeMs: 60, SlideMs: 20}, Aggregations: allAggs}},
	"session update": {ID: "w", Kind: "window", Stateful: true, Window: &job.WindowConfig{Key: "this.k",
		Window: job.WindowSpec{Type: "session", GapMs: 50}, Aggregations: allAggs},
		Time: &job.TimePolicy{LatePolicy: "update", AllowedLatenessMs: 30}},
}

// TestSnapshotRestore: snapshots (a second one holding only what changed
// since the first), a store checkpoint, a new store restored from it and a
// new instance opened on it continue exactly as the instance that never
// stopped; restored into two subtasks by key-group range, the two together
// do too.
func TestSnapshotRestore(t *testing.T) {
	input := disordered(600)
	first, second, rest := input[:20], input[20:40], input[40:]
	final := batchOf{wm: math.MaxInt64}
	for name, op := range stateful {
		t.Run(name, func(t *testing.T) {
			whole := start(t, op, nil, nil)
			whole.feed(input)
			whole.feed([]batchOf{final})
			want := whole.take()

			s := openStore(t)
			before := startWith(t, op, &operator.Context{Store: s, Budget: state.NewBudget(0)})
			before.feed(first)
			before.snapshot(1)
			before.feed(second)
			before.snapshot(2)
			dir := filepath.Join(t.TempDir(), "checkpoint")
			if err := s.Checkpoint(dir); err != nil {
				t.Fatal(err)
			}
			lastWm := second[len(second)-1].wm
			got := before.take()

			after := startWith(t, op, &operator.Context{Store: restored(t, dir, job.Range{Start: 0, End: maxPar - 1}),
				Restored: true, Budget: state.NewBudget(0)})
			after.watermark(lastWm) // as the sources send it again
			after.feed(rest)
			after.feed([]batchOf{final})
			// Keys fire in their own order after a restore; each key's
			// results are in order.
			if diff := gocmp.Diff(byKey(want), byKey(append(got, after.take()...))); diff != "" {
				t.Errorf("restored run (-uninterrupted +restored):\n%s", diff)
			}

			// Rescaled to two subtasks, each given the records of its key groups.
			var parts []operator.Record
			for i := range 2 {
				r := job.RangeOf(i, 2, maxPar)
				sub := startWith(t, op, &operator.Context{Store: restored(t, dir, r), KeyGroups: r, Restored: true})
				sub.watermark(lastWm)
				for _, b := range append(rest, final) {
					var mine []operator.Record
					for _, rc := range b.in {
						k := rc.Value.(map[string]any)["k"].(string)
						if r.Contains(job.KeyGroup(job.CanonicalKey(k), maxPar)) {
							mine = append(mine, rc)
						}
					}
					sub.mustProcess(mine...)
					sub.watermark(b.wm)
				}
				parts = append(parts, sub.take()...)
			}
			if diff := gocmp.Diff(asSet(t, want[len(got):]), asSet(t, parts)); diff != "" {
				t.Errorf("rescaled run (-uninterrupted +rescaled):\n%s", diff)
			}
		})
	}
}

// byKey is each key's results in order.
func byKey(rs []operator.Record) map[any][]operator.Record {
	out := map[any][]operator.Record{}
	for _, r := range rs {
		k := r.Value.(map[string]any)["key"]
		out[k] = append(out[k], r)
	}
	return out
}

// asSet is records as sorted JSON lines.
func asSet(t *testing.T, rs []operator.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		b, err := json.Marshal(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = fmt.Sprintf("%d %s", r.Time, b)
	}
	slices.Sort(out)
	return out
}

func entries(t *testing.T, s *state.Store, table string) []string {
	t.Helper()
	var keys []string
	err := s.Table("w", table).Scan(job.Range{Start: 0, End: maxPar - 1}, func(kg int, key, _ []byte) error {
		if want := job.KeyGroup(key, maxPar); kg != want {
			t.Errorf("key %q in key group %d, want %d", key, kg, want)
		}
		keys = append(keys, string(key))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

// TestSnapshotDeletes: a key whose windows are all gone leaves the table
// at the next snapshot.
func TestSnapshotDeletes(t *testing.T) {
	s := openStore(t)
	h := startWith(t, windowOp(tumble10, "drop", 0), &operator.Context{Store: s})
	h.mustProcess(a(1, 1), b(2, 1), a(15, 1))
	h.snapshot(1)
	if diff := gocmp.Diff([]string{"a", "b"}, entries(t, s, "windows")); diff != "" {
		t.Errorf("after the first snapshot (-want +got):\n%s", diff)
	}
	h.watermark(9) // b has no window left
	h.snapshot(2)
	if diff := gocmp.Diff([]string{"a"}, entries(t, s, "windows")); diff != "" {
		t.Errorf("after the second snapshot (-want +got):\n%s", diff)
	}
	h.watermark(math.MaxInt64)
	h.snapshot(3)
	if got := entries(t, s, "windows"); len(got) != 0 {
		t.Errorf("after the last snapshot: %q left", got)
	}
}

func TestBudgetExceeded(t *testing.T) {
	for name, op := range stateful {
		t.Run(name, func(t *testing.T) {
			budget := state.NewBudget(4000)
			h := startWith(t, op, &operator.Context{Budget: budget})
			var err error
			for i := 0; i < 1000 && err == nil; i++ {
				err = h.process(rec(int64(i), kv(fmt.Sprint(i), 1.0)))
			}
			if !errors.Is(err, state.ErrBudget) {
				t.Fatalf("error %v, want one wrapping state.ErrBudget", err)
			}
			if !strings.HasPrefix(err.Error(), "operator "+op.ID+": ") {
				t.Errorf("error %q does not name the operator", err)
			}
			if budget.Used() > 4000 {
				t.Errorf("%d bytes accounted, over the budget", budget.Used())
			}
		})
	}
}

// TestBudgetBalanced: what is accounted while keys and windows live is
// given back as they go, and at Close.
func TestBudgetBalanced(t *testing.T) {
	for name, op := range stateful {
		t.Run(name, func(t *testing.T) {
			budget := state.NewBudget(0)
			h := startWith(t, op, &operator.Context{Budget: budget})
			h.feed(disordered(300))
			if budget.Used() <= 0 {
				t.Fatalf("%d bytes accounted with live state", budget.Used())
			}
			if op.Kind == "window" {
				h.watermark(math.MaxInt64)
				h.mustProcess() // nothing
				h.watermark(math.MaxInt64)
			}
			if err := h.op.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if budget.Used() != 0 {
				t.Errorf("%d bytes accounted after Close", budget.Used())
			}
		})
	}
}

// TestTTLSweep: a watermark sweeps keys idle for ttl_ms out of the live
// state (the budget sees it) and out of the table at the next snapshot.
func TestTTLSweep(t *testing.T) {
	clk := &clock{now: time.UnixMilli(5_000)}
	s := openStore(t)
	budget := state.NewBudget(0)
	op := aggregateOp([]job.Aggregation{{Name: "n", Function: "count"}})
	op.ID = "w" // entries() reads operator w's tables
	h := startWith(t, op, &operator.Context{
		Plan:  &job.Plan{MaxParallelism: maxPar, State: &config.JobState{TTLMs: 100}},
		Store: s, Budget: budget, Now: clk.Now,
	})
	h.mustProcess(a(1, 1), b(1, 1))
	h.snapshot(1)
	one := budget.Used() / 2
	clk.advance(60 * time.Millisecond)
	h.mustProcess(a(2, 1))
	clk.advance(60 * time.Millisecond) // b idle 120 ms, a 60 ms
	h.watermark(2)
	if got := budget.Used(); got != one {
		t.Errorf("%d bytes accounted after the sweep, want %d (one key)", got, one)
	}
	h.snapshot(2)
	if diff := gocmp.Diff([]string{"a"}, entries(t, s, "aggregate")); diff != "" {
		t.Errorf("table after the sweep (-want +got):\n%s", diff)
	}
}

// TestRestoreRefuses: entries that do not decode, or that hold other
// aggregations than the operator has, fail Open with the operator named.
func TestRestoreRefuses(t *testing.T) {
	open := func(s *state.Store, op *job.Operator) error {
		o, err := operator.New(op)
		if err != nil {
			t.Fatal(err)
		}
		return o.Open(context.Background(), &operator.Context{Plan: &job.Plan{MaxParallelism: maxPar},
			Operator: op, KeyGroups: job.Range{Start: 0, End: maxPar - 1}, Store: s})
	}

	s := openStore(t)
	key := []byte("a")
	if err := s.Table("w", "windows").Put(job.KeyGroup(key, maxPar), key, []byte{1, 0xff}); err != nil {
		t.Fatal(err)
	}
	checkErr(t, open(s, windowOp(tumble10, "drop", 0)), `operator w: restore key "a": corrupt state entry`)

	s = openStore(t)
	h := startWith(t, windowOp(tumble10, "drop", 0), &operator.Context{Store: s})
	h.mustProcess(a(1, 1))
	h.snapshot(1)
	fewer := windowOp(tumble10, "drop", 0)
	fewer.Window.Aggregations = countSum[:1]
	checkErr(t, open(s, fewer), "operator w: restore: state holds 2 aggregations, the operator has 1")
}
