package history

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func TestRecorder(t *testing.T) {
	tests := []struct {
		name string
		obs  []map[string]Counters // one per 10 s step from t0
		key  string
		want []map[string]float64
	}{
		{"one observation has no rate", []map[string]Counters{{"fleet": {"sent": 10}}}, "fleet", nil},
		{"rates per second", []map[string]Counters{{"fleet": {"sent": 10, "errors": 0}}, {"fleet": {"sent": 110, "errors": 5}}},
			"fleet", []map[string]float64{{"sent": 10, "errors": 0.5}}},
		{"a reset counts zero", []map[string]Counters{{"s": {"sent": 100}}, {"s": {"sent": 20}}, {"s": {"sent": 40}}},
			"s", []map[string]float64{{"sent": 0}, {"sent": 2}}},
		{"a counter seen once has no rate", []map[string]Counters{{"s": {"sent": 1}}, {"s": {"sent": 1, "new": 9}}},
			"s", []map[string]float64{{"sent": 0}}},
		{"ring keeps the newest", []map[string]Counters{{"s": {"n": 0}}, {"s": {"n": 10}}, {"s": {"n": 30}}, {"s": {"n": 60}}, {"s": {"n": 100}}},
			"s", []map[string]float64{{"n": 2}, {"n": 3}, {"n": 4}}},
		{"series beyond the bound are not kept", []map[string]Counters{{"a": {"n": 0}, "b": {"n": 0}, "c": {"n": 0}}, {"a": {"n": 0}, "b": {"n": 0}, "c": {"n": 10}}},
			"c", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := New(3, 2)
			if tc.name == "series beyond the bound are not kept" {
				// Map order decides which two of three are kept: keep a and b.
				r.Observe(t0.Add(-time.Second), map[string]Counters{"a": {}, "b": {}}, time.Hour)
			}
			for i, o := range tc.obs {
				r.Observe(t0.Add(time.Duration(i)*10*time.Second), o, time.Hour)
			}
			var got []map[string]float64
			for _, p := range r.Points(tc.key) {
				got = append(got, p.Rates)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("rates (-want +got):\n%s", diff)
			}
			if r.Len() > 2 {
				t.Errorf("%d series kept, bound 2", r.Len())
			}
		})
	}
}

func TestRecorderDropsGoneSeries(t *testing.T) {
	r := New(10, 10)
	r.Observe(t0, map[string]Counters{"gone": {"n": 1}, "here": {"n": 1}}, time.Minute)
	r.Observe(t0.Add(30*time.Second), map[string]Counters{"here": {"n": 2}}, time.Minute)
	if r.Len() != 2 {
		t.Fatalf("a series missing for less than the span was dropped: %d", r.Len())
	}
	r.Observe(t0.Add(2*time.Minute), map[string]Counters{"here": {"n": 3}}, time.Minute)
	if r.Len() != 1 || len(r.Points("gone")) != 0 || len(r.Points("here")) != 2 {
		t.Fatalf("after the span: %d series, gone %v, here %v", r.Len(), r.Points("gone"), r.Points("here"))
	}
}
