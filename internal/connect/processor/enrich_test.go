package processor_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/connect/processor"
	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// table is a temporary held in memory: the enrich processor's own logic
// is tested here; internal/connect/redis tests it against a real Redis.
type table struct {
	data  map[string][]string
	calls [][]string
	err   error
}

func (t *table) Connect(context.Context) error { return nil }
func (t *table) Close(context.Context) error   { return nil }
func (t *table) Get(_ context.Context, keys []string) ([][][]byte, error) {
	t.calls = append(t.calls, keys)
	if t.err != nil {
		return nil, t.err
	}
	out := make([][][]byte, len(keys))
	for i, k := range keys {
		for _, v := range t.data[k] {
			out[i] = append(out[i], []byte(v))
		}
	}
	return out, nil
}

func withTable(name string, t component.Temporary) component.Resources {
	return component.Resources{Temporary: func(n string) (component.Temporary, bool) {
		return t, n == name
	}}
}

func TestEnrich(t *testing.T) {
	tab := &table{data: map[string][]string{
		"u1": {`{"name":"Ada"}`},
		"u2": {`{"name":"Bo"}`, `{"name":"Bo2"}`},
		"u3": {`not json`},
	}}
	in := `{"user":"u1"}|{"user":"u2"}|{"user":"u9"}|{"user":"u1"}`
	for _, tc := range []struct {
		name string
		conf string
		in   string
		want []any
		err  string
	}{
		{name: "example", conf: "", in: in, want: []any{
			map[string]any{"user": "u1", "profile": map[string]any{"name": "Ada"}},
			map[string]any{"user": "u2", "profile": map[string]any{"name": "Bo"}},
			map[string]any{"user": "u9", "profile": nil},
			map[string]any{"user": "u1", "profile": map[string]any{"name": "Ada"}},
		}},
		{name: "keep and all", conf: "key: {type: expr, expr: this.user}\nall: true\n", in: in, want: []any{
			map[string]any{"user": "u1", "profiles": []any{map[string]any{"name": "Ada"}}},
			map[string]any{"user": "u2", "profiles": []any{map[string]any{"name": "Bo"}, map[string]any{"name": "Bo2"}}},
			map[string]any{"user": "u9"},
			map[string]any{"user": "u1", "profiles": []any{map[string]any{"name": "Ada"}}},
		}},
		{name: "drop", conf: "key: {type: expr, expr: this.user}\nmissing: drop\n", in: `{"user":"u9"}|{"user":"u1"}`, want: []any{
			map[string]any{"user": "u1", "profiles": map[string]any{"name": "Ada"}},
		}},
		{name: "constant key", conf: "key: u2\ntarget: p\n", in: `{"a":1}`, want: []any{
			map[string]any{"a": float64(1), "p": map[string]any{"name": "Bo"}},
		}},
		{name: "error", conf: "key: {type: expr, expr: this.user}\nmissing: error\n", in: in, err: `nothing stored under key "u9"`},
		{name: "not json", conf: "key: u3\n", in: `{"a":1}`, err: "stored value is not JSON"},
		{name: "not an object", conf: "key: u1\n", in: `[1]`, err: "not a JSON object"},
		{name: "key fails", conf: "key: {type: expr, expr: this.nope}\n", in: `{"a":1}`, err: "key: the expression gave null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conf map[string]any
			if tc.conf == "" {
				conf = componenttest.Example(t, component.Default, component.KindProcessor, "enrich")
			} else {
				conf = yamlMap(t, "temporary: profiles\n"+tc.conf)
			}
			tab.calls = nil
			p, err := processor.NewEnrich(conf, withTable("profiles", tab))
			if err != nil {
				t.Fatal(err)
			}
			out, err := p.Process(context.Background(), batchOf(strings.Split(tc.in, "|")...))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, values(t, out)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if len(tab.calls) != 1 {
				t.Errorf("%d lookups for one batch, want 1 (keys %v)", len(tab.calls), tab.calls)
			}
		})
	}
}

func TestEnrichErrors(t *testing.T) {
	tab := &table{err: errors.New("connection refused")}
	p, err := processor.NewEnrich(yamlMap(t, "temporary: t\nkey: k\n"), withTable("t", tab))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Process(context.Background(), batchOf(`{}`)); err == nil || !strings.Contains(err.Error(), "lookup: connection refused") {
		t.Errorf("a failed lookup: %v", err)
	}
	for conf, want := range map[string]string{
		"temporary: other\nkey: k\n":           `temporary: the stream has no temporary table named "other"`,
		"temporary: t\nkey: {type: bad}\n":     "key.type: must be value or expr",
		"temporary: t\nkey: k\nmissing: lol\n": "missing: must be keep, null, drop or error",
		"key: k\n":                             "temporary: required",
	} {
		if _, err := processor.NewEnrich(yamlMap(t, conf), withTable("t", tab)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", conf, err, want)
		}
	}
	if _, err := processor.NewEnrich(yamlMap(t, "temporary: t\nkey: k\n"), component.Resources{}); err == nil {
		t.Error("built without any temporary table")
	}
}

func yamlMap(t *testing.T, doc string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	return m
}
