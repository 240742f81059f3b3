package operator_test

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/operator"
)

// event is one generated input record.
type event struct {
	key string
	t   int64
}

// value is an event's this.v: a function of its time, so that records
// of equal time agree and first/last do not depend on arrival order.
func (e event) value() float64 { return float64(e.t%97 - 40) }

// windowResult is one window result, comparable.
type windowResult struct {
	Key                   string
	Start, End            int64
	N, Sum, Min, Max, Avg float64
	First, Last           float64
	Time                  int64
}

var propAggs = []job.Aggregation{
	{Name: "n", Function: "count"},
	{Name: "sum", Function: "sum", Expression: "this.v"},
	{Name: "min", Function: "min", Expression: "this.v"},
	{Name: "max", Function: "max", Expression: "this.v"},
	{Name: "avg", Function: "avg", Expression: "this.v"},
	{Name: "first", Function: "first", Expression: "this.v"},
	{Name: "last", Function: "last", Expression: "this.v"},
}

// reference groups sorted events directly: window assignment by
// definition, sessions by splitting each key's times where they are gap or
// more apart.
func reference(spec job.WindowSpec, sorted []event) []windowResult {
	type id struct {
		key        string
		start, end int64
	}
	groups := map[id][]event{}
	switch spec.Type {
	case "tumbling", "sliding":
		slide := spec.SlideMs
		if spec.Type == "tumbling" {
			slide = spec.SizeMs
		}
		for _, e := range sorted {
			// every multiple of slide in (t-size, t]
			first := int64(math.Floor(float64(e.t-spec.SizeMs)/float64(slide)))*slide + slide
			for s := first; s <= e.t; s += slide {
				if s > e.t-spec.SizeMs {
					groups[id{e.key, s, s + spec.SizeMs}] = append(groups[id{e.key, s, s + spec.SizeMs}], e)
				}
			}
		}
	case "session":
		byKey := map[string][]event{}
		for _, e := range sorted {
			byKey[e.key] = append(byKey[e.key], e)
		}
		for key, es := range byKey {
			from := 0
			for i := 1; i <= len(es); i++ {
				if i == len(es) || es[i].t-es[i-1].t >= spec.GapMs {
					w := id{key, es[from].t, es[i-1].t + spec.GapMs}
					groups[w] = es[from:i]
					from = i
				}
			}
		}
	}
	var out []windowResult
	for w, es := range groups {
		r := windowResult{Key: w.key, Start: w.start, End: w.end, Time: w.end - 1,
			Min: math.Inf(1), Max: math.Inf(-1), First: es[0].value(), Last: es[len(es)-1].value()}
		for _, e := range es {
			v := e.value()
			r.N++
			r.Sum += v
			r.Min = min(r.Min, v)
			r.Max = max(r.Max, v)
		}
		r.Avg = r.Sum / r.N
		out = append(out, r)
	}
	return sortResults(out)
}

func sortResults(rs []windowResult) []windowResult {
	slices.SortFunc(rs, func(a, b windowResult) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Start, b.Start), cmp.Compare(a.End, b.End))
	})
	return rs
}

func toResult(t *rapid.T, r operator.Record) windowResult {
	m, ok := r.Value.(map[string]any)
	if !ok {
		t.Fatalf("result %v is not an object", r.Value)
	}
	f := func(name string) float64 {
		v, ok := m[name].(float64)
		if !ok {
			t.Fatalf("result %v: %s is not a number", m, name)
		}
		return v
	}
	return windowResult{Key: m["key"].(string), Start: int64(f("window_start")), End: int64(f("window_end")),
		N: f("n"), Sum: f("sum"), Min: f("min"), Max: f("max"), Avg: f("avg"), First: f("first"), Last: f("last"),
		Time: r.Time}
}

// TestWindowsMatchReference: any arrival order within the
// out-of-orderness bound B, watermarks as a bounded_out_of_orderness
// source computes them (max seen - B - 1, after each batch) and a final
// MaxInt64 give exactly the windows of the sorted input. No record is late,
// so the lateness policy and allowed lateness change nothing.
func TestWindowsMatchReference(t *testing.T) {
	specs := map[string]*rapid.Generator[job.WindowSpec]{
		"tumbling": rapid.Custom(func(t *rapid.T) job.WindowSpec {
			return job.WindowSpec{Type: "tumbling", SizeMs: rapid.Int64Range(1, 50).Draw(t, "size")}
		}),
		"sliding": rapid.Custom(func(t *rapid.T) job.WindowSpec {
			slide := rapid.Int64Range(1, 30).Draw(t, "slide")
			return job.WindowSpec{Type: "sliding", SlideMs: slide, SizeMs: rapid.Int64Range(1, 60).Draw(t, "size")}
		}),
		"session": rapid.Custom(func(t *rapid.T) job.WindowSpec {
			return job.WindowSpec{Type: "session", GapMs: rapid.Int64Range(1, 40).Draw(t, "gap")}
		}),
	}
	for name, gen := range specs {
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				spec := gen.Draw(t, "spec")
				bound := rapid.Int64Range(0, 40).Draw(t, "out_of_orderness")
				policy := rapid.SampledFrom([]string{"drop", "route", "update"}).Draw(t, "policy")
				lateness := rapid.Int64Range(0, 30).Draw(t, "lateness")

				// A sorted input, from a negative start so that window
				// alignment below zero is covered.
				n := rapid.IntRange(0, 150).Draw(t, "n")
				keys := rapid.IntRange(1, 4).Draw(t, "keys")
				sorted := make([]event, n)
				tm := rapid.Int64Range(-100, 100).Draw(t, "t0")
				for i := range sorted {
					tm += rapid.Int64Range(0, 25).Draw(t, "dt")
					sorted[i] = event{key: fmt.Sprintf("k%d", rapid.IntRange(0, keys-1).Draw(t, "key")), t: tm}
				}
				// Arrival order: sorted by t + a delay in [0, B], so no
				// event arrives after one more than B newer.
				type arrival struct {
					e  event
					at int64
				}
				arrivals := make([]arrival, n)
				for i, e := range sorted {
					arrivals[i] = arrival{e, e.t + rapid.Int64Range(0, bound).Draw(t, "delay")}
				}
				slices.SortStableFunc(arrivals, func(a, b arrival) int { return cmp.Compare(a.at, b.at) })

				op := &job.Operator{ID: "w", Kind: "window", Stateful: true,
					Window: &job.WindowConfig{Key: "this.k", Window: spec, Aggregations: propAggs},
					Time:   &job.TimePolicy{Mode: "event_time", LatePolicy: policy, AllowedLatenessMs: lateness}}
				h := start(t, op, nil, nil)
				maxSeen := int64(math.MinInt64)
				for i := 0; i < n; {
					size := rapid.IntRange(1, 10).Draw(t, "batch")
					var batch []operator.Record
					for ; i < n && size > 0; i, size = i+1, size-1 {
						e := arrivals[i].e
						batch = append(batch, rec(e.t, map[string]any{"k": e.key, "v": e.value()}))
						maxSeen = max(maxSeen, e.t)
					}
					h.mustProcess(batch...)
					h.watermark(maxSeen - bound - 1)
				}
				h.watermark(math.MaxInt64)

				if h.dropped != 0 || len(h.out.late) != 0 {
					t.Fatalf("%d dropped and %d routed late, want none", h.dropped, len(h.out.late))
				}
				var got []windowResult
				for _, r := range h.take() {
					got = append(got, toResult(t, r))
				}
				if diff := gocmp.Diff(reference(spec, sorted), sortResults(got)); diff != "" {
					t.Fatalf("windows (-reference +operator):\n%s", diff)
				}
			})
		})
	}
}
