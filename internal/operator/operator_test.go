package operator_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/operator"
)

func TestMap(t *testing.T) {
	tests := []struct {
		name string
		expr string
		in   []operator.Record
		want []operator.Record
		err  string
	}{
		{
			name: "new value, same time",
			expr: `{"user": this.u, "double": this.v * 2}`,
			in:   []operator.Record{rec(5, obj("u", "a", "v", 2.0))},
			want: []operator.Record{rec(5, obj("user", "a", "double", 4.0))},
		},
		{
			name: "merge over a payload not decoded yet",
			expr: `merge(this, {"w": this.v + 1})`,
			in:   []operator.Record{rec(7, []byte(`{"v": 1}`))},
			want: []operator.Record{rec(7, obj("v", 1.0, "w", 2.0))},
		},
		{
			name: "nil drops the record",
			expr: `this.v > 1 ? this : nil`,
			in:   []operator.Record{rec(1, obj("v", 1.0)), rec(2, obj("v", 2.0))},
			want: []operator.Record{rec(2, obj("v", 2.0))},
		},
		{
			name: "a field read",
			expr: `this.v`,
			in:   []operator.Record{rec(1, obj("v", "x")), rec(2, obj("w", 1.0)), rec(3, []byte(`"s"`))},
			want: []operator.Record{rec(1, "x")},
			err:  "operator m: ",
		},
		{
			name: "evaluation error names the operator",
			expr: `this.v * 2`,
			in:   []operator.Record{rec(1, obj("v", "x"))},
			err:  "operator m: ",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, &job.Operator{ID: "m", Kind: "map", Map: &job.MapConfig{Expression: tt.expr}}, nil, nil)
			err := h.process(tt.in...)
			checkErr(t, err, tt.err)
			if diff := cmp.Diff(tt.want, h.out.out); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("no error, want one containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not contain %q", err, want)
	}
}

func TestMergeOnlyExtendsOwnedValues(t *testing.T) {
	h := start(t, &job.Operator{ID: "m", Kind: "map", Map: &job.MapConfig{Expression: `merge(this, {"w": 1})`}}, nil, nil)
	shared := obj("v", 1.0)
	h.mustProcess(rec(1, shared))
	if _, ok := shared["w"]; ok {
		t.Error("a decoded value another record may share was changed in place")
	}
}

func TestFilter(t *testing.T) {
	tests := []struct {
		name string
		cond string
		in   []operator.Record
		want []operator.Record
		err  string
		is   error
	}{
		{
			name: "keeps the true ones in order",
			cond: `this.v >= 2`,
			in:   []operator.Record{rec(1, obj("v", 1.0)), rec(2, obj("v", 2.0)), rec(3, obj("v", 3.0)), rec(4, []byte(`{"v": 5}`))},
			want: []operator.Record{rec(2, obj("v", 2.0)), rec(3, obj("v", 3.0)), rec(4, obj("v", 5.0))},
		},
		{
			name: "a missing field is not a boolean",
			cond: `this.flag`,
			in:   []operator.Record{rec(1, obj("v", 1.0))},
			err:  "operator f: condition did not return a boolean: got null",
			is:   operator.ErrNotBool,
		},
		{
			name: "default for a missing field",
			cond: `this.flag ?? false`,
			in:   []operator.Record{rec(1, obj("v", 1.0)), rec(2, obj("flag", true))},
			want: []operator.Record{rec(2, obj("flag", true))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, &job.Operator{ID: "f", Kind: "filter", Filter: &job.FilterConfig{Condition: tt.cond}}, nil, nil)
			err := h.process(tt.in...)
			checkErr(t, err, tt.err)
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			if diff := cmp.Diff(tt.want, h.out.out); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	aggs := []job.Aggregation{{Name: "n", Function: "count"}}
	tests := []struct {
		name string
		op   job.Operator
		err  string
	}{
		{"map syntax", job.Operator{ID: "m", Kind: "map", Map: &job.MapConfig{Expression: `this.v +`}}, "operator m: config.expression: "},
		{"filter not boolean", job.Operator{ID: "f", Kind: "filter", Filter: &job.FilterConfig{Condition: `1 + 2`}}, "operator f: config.condition: condition did not return a boolean: it returns int"},
		{"no config", job.Operator{ID: "a", Kind: "aggregate"}, "operator a: aggregate without its config"},
		{"source is not built here", job.Operator{ID: "s", Kind: "source"}, `operator s: kind "source" is not a transforming operator`},
		{"key syntax", job.Operator{ID: "a", Kind: "aggregate", Aggregate: &job.AggregateConfig{Key: `this.`, Aggregations: aggs}}, "operator a: config.key: "},
		{"unknown function", job.Operator{ID: "a", Kind: "aggregate", Aggregate: &job.AggregateConfig{Key: `this.k`,
			Aggregations: []job.Aggregation{{Name: "x", Function: "median", Expression: "this.v"}}}}, `operator a: config.aggregations[0].function: "median" is not one of`},
		{"sum needs an expression", job.Operator{ID: "a", Kind: "aggregate", Aggregate: &job.AggregateConfig{Key: `this.k`,
			Aggregations: []job.Aggregation{{Name: "x", Function: "sum"}}}}, "operator a: config.aggregations[0].expression: required by sum"},
		{"reserved name", job.Operator{ID: "a", Kind: "aggregate", Aggregate: &job.AggregateConfig{Key: `this.k`,
			Aggregations: []job.Aggregation{{Name: "key", Function: "count"}}}}, `config.aggregations[0].name: "key" is a result field of its own`},
		{"duplicate name", job.Operator{ID: "a", Kind: "aggregate", Aggregate: &job.AggregateConfig{Key: `this.k`,
			Aggregations: []job.Aggregation{{Name: "n", Function: "count"}, {Name: "n", Function: "count"}}}}, `config.aggregations[1].name: "n" is used twice`},
		{"window type", job.Operator{ID: "w", Kind: "window", Window: &job.WindowConfig{Key: `this.k`, Aggregations: aggs,
			Window: job.WindowSpec{Type: "hopping", SizeMs: 10}}}, `operator w: config.window.type: "hopping" is not one of`},
		{"tumbling size", job.Operator{ID: "w", Kind: "window", Window: &job.WindowConfig{Key: `this.k`, Aggregations: aggs,
			Window: job.WindowSpec{Type: "tumbling"}}}, "operator w: config.window.size_ms: must be positive"},
		{"sliding slide", job.Operator{ID: "w", Kind: "window", Window: &job.WindowConfig{Key: `this.k`, Aggregations: aggs,
			Window: job.WindowSpec{Type: "sliding", SizeMs: 10}}}, "operator w: config.window.slide_ms: must be positive"},
		{"session gap", job.Operator{ID: "w", Kind: "window", Window: &job.WindowConfig{Key: `this.k`, Aggregations: aggs,
			Window: job.WindowSpec{Type: "session"}}}, "operator w: config.window.gap_ms: must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := operator.New(&tt.op)
			checkErr(t, err, tt.err)
		})
	}
}

func TestKey(t *testing.T) {
	tests := []struct {
		expr  string
		in    operator.Record
		canon string
		value any
		err   string
	}{
		{`this.user`, rec(0, obj("user", "ann")), "ann", "ann", ""},
		{`this.user`, rec(0, []byte(`{"user": 42.0}`)), "42", 42.0, ""},
		{`this.user`, rec(0, obj()), "null", nil, ""},
		{`this.a.b`, rec(0, obj("a", obj("b", true))), "true", true, ""},
		{`[this.a, this.b]`, rec(0, obj("a", 1.0, "b", "x")), `[1,"x"]`, []any{1.0, "x"}, ""},
		{`this.a.b`, rec(0, obj()), "", nil, "key: "},
	}
	for _, tt := range tests {
		k, err := operator.NewKey(tt.expr)
		if err != nil {
			t.Fatal(err)
		}
		canon, v, err := k.Eval(&tt.in, []byte("prefix:"))
		checkErr(t, err, tt.err)
		if err != nil {
			continue
		}
		if got := string(canon); got != "prefix:"+tt.canon {
			t.Errorf("%s: canonical %q, want %q", tt.expr, got, "prefix:"+tt.canon)
		}
		if diff := cmp.Diff(tt.value, v); diff != "" {
			t.Errorf("%s: value (-want +got):\n%s", tt.expr, diff)
		}
	}
	if _, err := operator.NewKey(`this.`); err == nil || !strings.HasPrefix(err.Error(), "key: ") {
		t.Errorf("compile error %v, want one starting with key:", err)
	}
}
