package schema_test

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	_ "github.com/flowplane/flowplane/internal/connect/all"
	"github.com/flowplane/flowplane/internal/schema"
)

type splitItem struct {
	N    int    `json:"n" required:"true" min:"1"`
	Mode string `json:"mode" enum:"a|b"`
}

type splitGroup struct {
	Name  string      `json:"name" required:"true"`
	Items []splitItem `json:"items" maxItems:"3"`
	Procs []struct {
		X string `json:"x"`
	} `json:"procs" component:"processor"`
}

type splitRoot struct {
	Groups []splitGroup `json:"groups" required:"true" maxItems:"4"`
	Inner  struct {
		Items []splitItem `json:"items"`
	} `json:"inner"`
	Tags []string `json:"tags"`
}

// TestValidateItemByItem: checking array items one at a time finds exactly
// the problems one pass over the whole document finds, maxItems included.
func TestValidateItemByItem(t *testing.T) {
	v, err := schema.Compile(schema.Generate(reflect.TypeFor[splitRoot](), testRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{
		`{"groups": []}`,
		`{}`,
		`{"groups": "x", "inner": 3}`,
		`{"groups": [{}, 3, {"name": "g", "items": [{}, {"n": 0, "mode": "c"}, 5], "procs": [{}, {"type": "jsno"}, {"type": "json", "operation": "x"}]}]}`,
		`{"groups": [{"name": "g", "items": [{"n": 1}, {"n": 1}, {"n": 1}, {"n": "x"}]}, {}, {}, {}, {"zz": 1}], "inner": {"items": [{"n": 2, "extra": true}]}, "tags": [1, "a"]}`,
		`{"groups": [{"name": "g", "items": null, "procs": {}}], "inner": {"items": [[]]}, "extra": 1}`,
	} {
		var tree any
		if err := json.Unmarshal([]byte(doc), &tree); err != nil {
			t.Fatal(err)
		}
		want := v.ValidateWhole(tree)
		got := v.Validate(tree)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: problems (-whole +item by item):\n%s", doc, diff)
		}
		if len(want) == 0 && doc != `{"groups": []}` {
			t.Errorf("%s: no problems", doc)
		}
	}
}

// TestValidateItemByItemConfigurations: the same on the configuration
// schema, over the bad and good configurations of internal/config.
func TestValidateItemByItemConfigurations(t *testing.T) {
	v, err := schema.Compile(config.Schema(component.Default))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../config/testdata/*")
	if len(files) < 5 {
		t.Fatalf("configurations: %v", files)
	}
	for _, f := range files {
		data, format, err := config.ReadFile(f)
		if err != nil {
			continue // not a configuration (extension)
		}
		tree, err := config.Tree(data, format)
		if err != nil {
			continue
		}
		if diff := cmp.Diff(v.ValidateWhole(tree), v.Validate(tree)); diff != "" {
			t.Errorf("%s: problems (-whole +item by item):\n%s", f, diff)
		}
	}
}
