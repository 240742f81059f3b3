package operator_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/operator"
)

// allAggs is one aggregation of each function over this.v.
var allAggs = []job.Aggregation{
	{Name: "n", Function: "count"},
	{Name: "sum", Function: "sum", Expression: "this.v"},
	{Name: "min", Function: "min", Expression: "this.v"},
	{Name: "max", Function: "max", Expression: "this.v"},
	{Name: "avg", Function: "avg", Expression: "this.v"},
	{Name: "first", Function: "first", Expression: "this.v"},
	{Name: "last", Function: "last", Expression: "this.v"},
}

func aggregateOp(aggs []job.Aggregation) *job.Operator {
	return &job.Operator{ID: "agg", Kind: "aggregate", Stateful: true,
		Aggregate: &job.AggregateConfig{Key: "this.k", Aggregations: aggs}}
}

func kv(k string, v any) map[string]any { return obj("k", k, "v", v) }

func TestAggregate(t *testing.T) {
	h := start(t, aggregateOp(allAggs), nil, nil)
	h.mustProcess(rec(10, kv("a", 3.0)), rec(11, kv("b", 1.0)), rec(5, kv("a", 5.0)))
	h.mustProcess(rec(12, kv("a", 1.0)))
	want := []operator.Record{
		rec(10, obj("key", "a", "n", 1.0, "sum", 3.0, "min", 3.0, "max", 3.0, "avg", 3.0, "first", 3.0, "last", 3.0)),
		rec(11, obj("key", "b", "n", 1.0, "sum", 1.0, "min", 1.0, "max", 1.0, "avg", 1.0, "first", 1.0, "last", 1.0)),
		// first and last go by record time: 5 came later but is older.
		rec(5, obj("key", "a", "n", 2.0, "sum", 8.0, "min", 3.0, "max", 5.0, "avg", 4.0, "first", 5.0, "last", 3.0)),
		rec(12, obj("key", "a", "n", 3.0, "sum", 9.0, "min", 1.0, "max", 5.0, "avg", 3.0, "first", 5.0, "last", 1.0)),
	}
	if diff := cmp.Diff(want, h.take()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestAggregateValues(t *testing.T) {
	tests := []struct {
		name string
		agg  job.Aggregation
		in   []any // values of this.v, all for key "a"
		want []any // the aggregation's value after each
		err  string
	}{
		{"first and last keep any value", job.Aggregation{Name: "x", Function: "last", Expression: "this.v"},
			[]any{"s", obj("o", 1.0), nil}, []any{"s", obj("o", 1.0), nil}, ""},
		{"sum of an expression", job.Aggregation{Name: "x", Function: "sum", Expression: "this.v * 2"},
			[]any{1.0, 2.5}, []any{2.0, 7.0}, ""},
		{"integers from expressions count as numbers", job.Aggregation{Name: "x", Function: "max", Expression: "len(this.v)"},
			[]any{"ab", "abcd", "a"}, []any{2.0, 4.0, 4.0}, ""},
		{"sum of a string", job.Aggregation{Name: "x", Function: "sum", Expression: "this.v"},
			[]any{1.0, "2"}, []any{1.0}, "operator agg: aggregation x (sum): the value is a string, not a number"},
		{"avg of a missing field", job.Aggregation{Name: "x", Function: "avg", Expression: "this.w"},
			[]any{1.0}, nil, "operator agg: aggregation x (avg): the value is null, not a number"},
		{"min of an object", job.Aggregation{Name: "x", Function: "min", Expression: "this.v"},
			[]any{obj()}, nil, "operator agg: aggregation x (min): the value is an object, not a number"},
		{"evaluation error", job.Aggregation{Name: "x", Function: "sum", Expression: "this.v.w"},
			[]any{1.0}, nil, "operator agg: aggregation x: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, aggregateOp([]job.Aggregation{tt.agg}), nil, nil)
			var err error
			for i, v := range tt.in {
				if err = h.process(rec(int64(i), kv("a", v))); err != nil {
					break
				}
			}
			checkErr(t, err, tt.err)
			var got []any
			for _, r := range h.take() {
				got = append(got, r.Value.(map[string]any)["x"])
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestAggregateTTL: a key not updated for ttl_ms of processing time
// starts again, whether it is seen again before or after a sweep.
func TestAggregateTTL(t *testing.T) {
	clk := &clock{now: time.UnixMilli(1_000_000)}
	plan := &job.Plan{MaxParallelism: 128, State: &config.JobState{TTLMs: 100}}
	h := start(t, aggregateOp([]job.Aggregation{{Name: "n", Function: "count"}}), plan, clk)
	count := func(k string) float64 {
		t.Helper()
		h.mustProcess(rec(0, kv(k, 1.0)))
		out := h.take()
		return out[len(out)-1].Value.(map[string]any)["n"].(float64)
	}
	for _, k := range []string{"a", "a", "b"} {
		count(k)
	}
	clk.advance(99 * time.Millisecond)
	if got := count("a"); got != 3 { // 99 ms idle: kept
		t.Errorf("a after 99 ms: count %v, want 3", got)
	}
	clk.advance(100 * time.Millisecond)
	if got := count("a"); got != 1 { // 100 ms idle: forgotten when seen
		t.Errorf("a after 100 ms: count %v, want 1", got)
	}
	h.watermark(1) // the sweep forgets b (199 ms idle)
	clk.advance(50 * time.Millisecond)
	if got := count("b"); got != 1 {
		t.Errorf("b after the sweep: count %v, want 1", got)
	}
	if got := count("a"); got != 2 { // 50 ms idle
		t.Errorf("a: count %v, want 2", got)
	}
}
