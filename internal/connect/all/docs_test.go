package all_test

import (
	"flag"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	_ "github.com/flowplane/flowplane/internal/connect/all"
)

var update = flag.Bool("update", false, "rewrite docs/components.md")

const docPath = "../../../docs/components.md"

// TestComponentsDoc keeps docs/components.md equal to what the registry
// says; run with -update after changing a component.
func TestComponentsDoc(t *testing.T) {
	got := component.Default.Markdown()
	if *update {
		if err := os.WriteFile(docPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("docs/components.md is stale; run go test ./internal/connect/all -update (-file +registry):\n%s", diff)
	}
}

// TestEverySpecComplete requires a summary, a schema with described
// properties and an example for every built-in component.
func TestEverySpecComplete(t *testing.T) {
	for _, s := range component.Default.Specs() {
		if s.Summary == "" || s.Example == "" {
			t.Errorf("%s %s: summary and example are required", s.Kind, s.Name)
		}
		props, _ := s.Schema["properties"].(map[string]any)
		for name, p := range props {
			pm, _ := p.(map[string]any)
			if pm["description"] == nil {
				t.Errorf("%s %s: property %s has no description", s.Kind, s.Name, name)
			}
		}
	}
}
