package operator_test

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/operator"
)

var countSum = []job.Aggregation{
	{Name: "n", Function: "count"},
	{Name: "sum", Function: "sum", Expression: "this.v"},
}

func windowOp(spec job.WindowSpec, policy string, lateness int64) *job.Operator {
	return &job.Operator{ID: "w", Kind: "window", Stateful: true,
		Window: &job.WindowConfig{Key: "this.k", Window: spec, Aggregations: countSum},
		Time:   &job.TimePolicy{Mode: "event_time", LatePolicy: policy, AllowedLatenessMs: lateness}}
}

// result is a window result record of countSum.
func result(key string, start, end int64, n, sum float64) operator.Record {
	return rec(end-1, obj("key", key, "window_start", float64(start), "window_end", float64(end), "n", n, "sum", sum))
}

// step is one call of a hand-written scenario and what it must emit.
type step struct {
	in   []operator.Record // Process these, or
	wm   int64             // OnWatermark(wm) when in is nil
	want []operator.Record // emitted by the call
	late []operator.Record // emitted late by the call
	drop int               // late records dropped by the call
}

func runSteps(t *testing.T, op *job.Operator, steps []step) {
	t.Helper()
	h := start(t, op, nil, nil)
	for i, s := range steps {
		h.dropped = 0
		h.out.late = nil
		if s.in != nil {
			h.mustProcess(s.in...)
		} else {
			h.watermark(s.wm)
		}
		if diff := cmp.Diff(s.want, h.take()); diff != "" {
			t.Errorf("step %d: emitted (-want +got):\n%s", i, diff)
		}
		if diff := cmp.Diff(s.late, h.out.late); diff != "" {
			t.Errorf("step %d: emitted late (-want +got):\n%s", i, diff)
		}
		if h.dropped != s.drop {
			t.Errorf("step %d: %d dropped, want %d", i, h.dropped, s.drop)
		}
	}
}

func a(t int64, v float64) operator.Record { return rec(t, kv("a", v)) }
func b(t int64, v float64) operator.Record { return rec(t, kv("b", v)) }

var tumble10 = job.WindowSpec{Type: "tumbling", SizeMs: 10}

// TestLateDrop: with lateness 5 a window [0, 10) fires once, at watermark
// 14; records for it until then count, later ones are dropped and counted.
func TestLateDrop(t *testing.T) {
	runSteps(t, windowOp(tumble10, "drop", 5), []step{
		{in: []operator.Record{a(1, 1), a(5, 2), a(12, 3)}},
		{wm: 9},                          // end-1 reached, lateness not yet: nothing fires
		{in: []operator.Record{a(3, 4)}}, // behind the watermark, within lateness: counts
		{wm: 13},                         // still nothing
		{wm: 14, want: []operator.Record{result("a", 0, 10, 3, 7)}},
		{in: []operator.Record{a(8, 5), b(9, 1)}, drop: 2}, // [0, 10) fired: late
		{in: []operator.Record{a(15, 6)}},
		{wm: 14}, // not an advance
		{wm: math.MaxInt64, want: []operator.Record{result("a", 10, 20, 2, 9)}},
	})
}

// TestLateRoute: without lateness [0, 10) fires at 9; a record for it
// then goes out unchanged on the late route and is not counted.
func TestLateRoute(t *testing.T) {
	late := a(9, 3)
	runSteps(t, windowOp(tumble10, "route", 0), []step{
		{in: []operator.Record{a(1, 1), a(12, 2), b(3, 7)}},
		{wm: 8},
		{wm: 9, want: []operator.Record{result("a", 0, 10, 1, 1), result("b", 0, 10, 1, 7)}},
		{in: []operator.Record{late, a(10, 4)}, late: []operator.Record{late}},
		{wm: math.MaxInt64, want: []operator.Record{result("a", 10, 20, 2, 6)}},
	})
}

// TestLateUpdate: with lateness 5 [0, 10) fires at 9 and is kept until
// 14; a record for it meanwhile fires it again at once with the corrected
// result, even one that opens the window; after 14 records for it are
// dropped and counted.
func TestLateUpdate(t *testing.T) {
	runSteps(t, windowOp(tumble10, "update", 5), []step{
		{in: []operator.Record{a(1, 1), a(12, 2)}},
		{wm: 9, want: []operator.Record{result("a", 0, 10, 1, 1)}},
		{in: []operator.Record{a(3, 4)}, want: []operator.Record{result("a", 0, 10, 2, 5)}},
		{in: []operator.Record{b(7, 10)}, want: []operator.Record{result("b", 0, 10, 1, 10)}},
		{wm: 13},
		{in: []operator.Record{a(0, 1)}, want: []operator.Record{result("a", 0, 10, 3, 6)}},
		{wm: 14}, // [0, 10) dropped without a result
		{in: []operator.Record{a(5, 8), b(9, 1)}, drop: 2},
		{wm: 19, want: []operator.Record{result("a", 10, 20, 1, 2)}},
		{wm: math.MaxInt64},
	})
}

// TestSlidingLateness: a record late for one of its windows goes into the
// others and is late only when it fits none.
func TestSlidingLateness(t *testing.T) {
	runSteps(t, windowOp(job.WindowSpec{Type: "sliding", SizeMs: 10, SlideMs: 5}, "drop", 0), []step{
		{in: []operator.Record{a(7, 1)}}, // [0, 10) and [5, 15)
		{wm: 9, want: []operator.Record{result("a", 0, 10, 1, 1)}},
		{in: []operator.Record{a(8, 2)}},          // [0, 10) fired, [5, 15) open
		{in: []operator.Record{a(3, 4)}, drop: 1}, // [-5, 5) and [0, 10) both fired
		{wm: math.MaxInt64, want: []operator.Record{result("a", 5, 15, 2, 3)}},
	})
}

// TestSessions: records less than gap apart share a session [first,
// last+gap); a record bridging two sessions merges them.
func TestSessions(t *testing.T) {
	runSteps(t, windowOp(job.WindowSpec{Type: "session", GapMs: 10}, "drop", 0), []step{
		{in: []operator.Record{a(1, 1), a(5, 2), a(30, 3), b(2, 9)}}, // a: [1, 15), [30, 40); b: [2, 12)
		{wm: 14, want: []operator.Record{result("b", 2, 12, 1, 9), result("a", 1, 15, 2, 3)}},
		{in: []operator.Record{a(20, 4)}},         // [20, 30): 30 is not less than 10 after 20
		{in: []operator.Record{a(25, 5)}},         // [25, 35) bridges: [20, 40)
		{in: []operator.Record{a(3, 1)}, drop: 1}, // [3, 13) overlaps nothing kept and is due
		{wm: 38},
		{wm: 39, want: []operator.Record{result("a", 20, 40, 3, 12)}},
	})
}

// TestSessionUpdateRefires: under update a session that grows fires again
// when its new end is due, at once if it already is.
func TestSessionUpdateRefires(t *testing.T) {
	runSteps(t, windowOp(job.WindowSpec{Type: "session", GapMs: 10}, "update", 100), []step{
		{in: []operator.Record{a(1, 1)}},
		{wm: 10, want: []operator.Record{result("a", 1, 11, 1, 1)}},
		{in: []operator.Record{a(2, 2)}}, // [1, 12): due at 11
		{wm: 11, want: []operator.Record{result("a", 1, 12, 2, 3)}},
		{in: []operator.Record{a(5, 4), a(1, 1)}}, // [1, 15): due at 14
		{wm: 14, want: []operator.Record{result("a", 1, 15, 4, 8)}},
		{in: []operator.Record{a(3, 1)}, want: []operator.Record{result("a", 1, 15, 5, 9)}}, // same end, due: at once
		{wm: 113}, // kept until 114
		{in: []operator.Record{a(14, 1)}, want: []operator.Record{result("a", 1, 24, 6, 10)}}, // [1, 24) due at once, kept until 123
		{wm: 123},
		{in: []operator.Record{a(14, 1)}, drop: 1},
	})
}

// TestNoAggregations: the results hold the key and window bounds only.
func TestNoAggregations(t *testing.T) {
	op := windowOp(tumble10, "drop", 0)
	op.Window.Aggregations = nil
	h := start(t, op, nil, nil)
	h.mustProcess(a(1, 1), a(2, 1))
	h.watermark(math.MaxInt64)
	want := []operator.Record{rec(9, obj("key", "a", "window_start", 0.0, "window_end", 10.0))}
	if diff := cmp.Diff(want, h.take()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestWindowRecordWithoutTime(t *testing.T) {
	h := start(t, windowOp(tumble10, "drop", 0), nil, nil)
	checkErr(t, h.process(rec(operator.NoTime, kv("a", 1.0))), "operator w: a record without a time")
}
