package main

import (
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	_ "github.com/flowplane/flowplane/internal/connect/all"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/secretref"
)

// TestRolloutConfigValid checks that every run's configuration is valid as
// a node checks it (--validate's walk), differs from the other runs', and
// holds no node-local section the Hub refuses.
func TestRolloutConfigValid(t *testing.T) {
	seen := map[string]bool{}
	for r := range 3 {
		text := rolloutConfig(r)
		cfg, err := config.Materialize([]byte(text), config.YAML, component.Default, secretref.Resolver{})
		if ps := config.Problems(err); len(ps) > 0 || cfg == nil {
			t.Fatalf("run %d: %v", r, ps)
		}
		if ps := engine.Check(cfg, component.Default); len(ps) > 0 {
			t.Fatalf("run %d: %v", r, ps)
		}
		if len(cfg.Streams) != 1 {
			t.Errorf("run %d: %d streams, want 1", r, len(cfg.Streams))
		}
		for _, local := range []string{"health_check", "logging"} {
			if strings.Contains(text, local) {
				t.Errorf("run %d: has node-local section %s", r, local)
			}
		}
		if seen[text] {
			t.Errorf("run %d: same configuration as an earlier run", r)
		}
		seen[text] = true
	}
}
