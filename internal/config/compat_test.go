package config_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/secretref"
)

// TestArkFlowAliases checks the spellings accepted for ArkFlow's sake and
// what they become.
func TestArkFlowAliases(t *testing.T) {
	tests := []struct {
		name, doc string
		want      func(*config.Config) any
		expect    any
	}{
		{"trace is debug", "logging: {level: trace}\nstreams: []",
			func(c *config.Config) any { return c.Logging.Level }, "debug"},
		{"debug stays debug", "logging: {level: debug}\nstreams: []",
			func(c *config.Config) any { return c.Logging.Level }, "debug"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Materialize([]byte(tt.doc), config.YAML, component.Default, secretref.Resolver{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.expect, tt.want(cfg)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
