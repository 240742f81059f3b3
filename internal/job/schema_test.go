package job_test

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/schema"
)

// TestSchemaMatchesConfigs: the configuration schema's operator configs
// (written out in package schema) have exactly the fields of the typed
// configs Build decodes, and each kind's example builds.
func TestSchemaMatchesConfigs(t *testing.T) {
	defs := schema.Generate(reflect.TypeFor[config.Config](), component.NewRegistry())["$defs"].(map[string]any)
	for def, typ := range map[string]reflect.Type{
		"operator.map":         reflect.TypeFor[job.MapConfig](),
		"operator.filter":      reflect.TypeFor[job.FilterConfig](),
		"operator.aggregate":   reflect.TypeFor[job.AggregateConfig](),
		"operator.window":      reflect.TypeFor[job.WindowConfig](),
		"operator.udf":         reflect.TypeFor[job.UDFConfig](),
		"operator.aggregation": reflect.TypeFor[job.Aggregation](),
		"operator.window_spec": reflect.TypeFor[job.WindowSpec](),
	} {
		d, ok := defs[def].(map[string]any)
		if !ok {
			t.Errorf("schema has no %s", def)
			continue
		}
		props := slices.Sorted(maps.Keys(d["properties"].(map[string]any)))
		var fields []string
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			fields = append(fields, name)
		}
		slices.Sort(fields)
		if diff := cmp.Diff(fields, props); diff != "" {
			t.Errorf("%s properties (-%s +schema):\n%s", def, typ.Name(), diff)
		}
		ex, _ := d["examples"].([]any)
		if len(ex) == 0 {
			continue
		}
		kind := strings.TrimPrefix(def, "operator.")
		j := config.Job{
			ID: "j", Version: 1, Parallelism: 1, MaxParallelism: 128,
			Operators: []config.Operator{{ID: "src", Kind: "source"}, {ID: "x", Kind: kind, Config: ex[0].(map[string]any)}},
			Edges:     []config.Edge{{From: "src", To: "x", Partitioned: kind == "aggregate" || kind == "window"}},
			Sources:   []config.Source{{OperatorID: "src", InputType: "memory"}},
		}
		if _, ps := job.Build("jobs[0]", j); len(ps) > 0 {
			t.Errorf("%s example: %v", def, ps)
		}
	}
}
