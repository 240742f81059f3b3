package config_test

import (
	"reflect"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/secretref"
	"github.com/flowplane/flowplane/internal/wire"
)

// TestIDPatternsAreWireIDPattern: every id field of the configuration
// carries the one id pattern the Hub and the agent protocol enforce.
func TestIDPatternsAreWireIDPattern(t *testing.T) {
	for _, f := range []struct {
		typ   reflect.Type
		field string
	}{
		{reflect.TypeFor[config.Stream](), "ID"},
		{reflect.TypeFor[config.Job](), "ID"},
		{reflect.TypeFor[config.HealthCheck](), "NodeID"},
	} {
		sf, ok := f.typ.FieldByName(f.field)
		if !ok {
			t.Fatalf("%s has no field %s", f.typ, f.field)
		}
		if got := sf.Tag.Get("pattern"); got != wire.IDPattern {
			t.Errorf("%s.%s pattern %q, want wire.IDPattern %q", f.typ.Name(), f.field, got, wire.IDPattern)
		}
	}
}

func TestNodeIDPattern(t *testing.T) {
	for _, id := range []string{`"node a"`, `"a\u0000b"`, `"a\r\nb"`, `"-a"`, `"a/b"`} {
		doc := "health_check: {node_id: " + id + "}\nstreams: []\n"
		_, err := config.Materialize([]byte(doc), config.YAML, component.Default, secretref.Resolver{})
		ps := config.Problems(err)
		if len(ps) != 1 || ps[0].Path != "health_check.node_id" {
			t.Errorf("node_id %s: problems %v, want one at health_check.node_id", id, ps)
		}
	}
	if _, err := config.Materialize([]byte("health_check: {node_id: node-a.1_x}\nstreams: []\n"), config.YAML, component.Default, secretref.Resolver{}); err != nil {
		t.Errorf("a valid node_id: %v", err)
	}
}
