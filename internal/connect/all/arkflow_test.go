package all_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/secretref"
)

// arkflowDir is relative to the repository root, where the test runs:
// paths inside the configurations (proto_inputs) are relative to the
// working directory, as when flowplane runs from a checkout.
const arkflowDir = "testdata/arkflow"

// repoRoot is the repository root seen from this package.
const repoRoot = "../../.."

// Reasons a configuration of ArkFlow's shape does not validate, each a
// substring of the problem --validate reports.
const (
	hubURL = `health_check.hub_url: field hub_url was removed`
	vrl    = `unknown processor "vrl": VRL (Vector Remap Language) is a Rust library and cannot run in flowplane`
	python = `unknown processor "python": Python processors cannot run in flowplane`
)

// arkflowMissing says, for each configuration in testdata/arkflow (one per
// example of ArkFlow's repository, written by us in ArkFlow's shape), why
// it does not validate today. A file not listed must validate. A listed
// file must fail, every reason must occur among its problems, and every
// problem must be one of its reasons: problems --validate reports, plus
// those the deep build finds in components --validate does not reach yet
// because of an earlier problem. When a missing piece lands,
// the test fails until its reasons are removed here (and from
// docs/arkflow.md), so the table stays exact.
var arkflowMissing = map[string][]string{
	"control_plane_node":       {hubURL}, // rejected by design
	"python_processor_example": {python}, // python: rejected by design
	"vrl_example":              {vrl},    // vrl: rejected by design
}

// validateLikeCLI returns the problems `flowplane --config <file>
// --validate` reports for a file (materialize against the built-in
// components, then the deep build), and the deep build's problems in the
// components validation stopped before: those --validate will report once
// the first are fixed. Deep problems that only repeat a validation problem
// (same component, or an unknown type) are left out.
func validateLikeCLI(t *testing.T, path string) (cli, hidden []config.Problem) {
	t.Helper()
	data, format, err := config.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Materialize(data, format, component.Default, secretref.Resolver{})
	cli = config.Problems(err)
	if cfg == nil {
		return cli, nil
	}
	deep := cfg.Redact(engine.Check(cfg, component.Default))
	if len(cli) == 0 {
		return deep, nil
	}
	for _, d := range deep {
		repeats := strings.HasPrefix(d.Message, "unknown ") || slices.ContainsFunc(cli, func(p config.Problem) bool {
			return p.Path == d.Path || strings.HasPrefix(p.Path, d.Path+".")
		})
		if !repeats {
			hidden = append(hidden, d)
		}
	}
	return cli, hidden
}

// TestArkFlowExamples validates each ArkFlow-shaped configuration as
// --validate does and compares the outcome with arkflowMissing.
func TestArkFlowExamples(t *testing.T) {
	t.Chdir(repoRoot)
	files, err := filepath.Glob(filepath.Join(arkflowDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 32 {
		t.Fatalf("%d files in %s, want one per ArkFlow example (32)", len(files), arkflowDir)
	}
	seen := make(map[string]bool)
	valid := 0
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			cli, hidden := validateLikeCLI(t, f)
			if len(cli) == 0 {
				valid++
			}
			reasons, listed := arkflowMissing[name]
			switch {
			case !listed && len(cli) > 0:
				t.Fatalf("want it to validate, --validate says:\n  %s", lines(cli))
			case listed && len(cli) == 0:
				t.Fatalf("validates now: remove its row from arkflowMissing and update docs/arkflow.md")
			}
			all := append(cli, hidden...)
			for _, r := range reasons {
				if !slices.ContainsFunc(all, func(p config.Problem) bool { return strings.Contains(p.Error(), r) }) {
					t.Errorf("no problem mentions %q; got:\n  %s", r, lines(all))
				}
			}
			for _, p := range all {
				if !slices.ContainsFunc(reasons, func(r string) bool { return strings.Contains(p.Error(), r) }) {
					t.Errorf("problem not in the table: %s", p.Error())
				}
			}
		})
	}
	for name := range arkflowMissing {
		if !seen[name] {
			t.Errorf("arkflowMissing lists %s, which has no file in %s", name, arkflowDir)
		}
	}
	t.Logf("%d of %d validate", valid, len(files))
}

func lines(ps []config.Problem) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.Error()
	}
	return strings.Join(s, "\n  ")
}

// TestArkFlowRows checks that every flowplane component the compatibility
// table names is registered under that kind.
func TestArkFlowRows(t *testing.T) {
	rows := component.Default.ArkFlow()
	if len(rows) == 0 {
		t.Fatal("no ArkFlow compatibility table registered")
	}
	for _, r := range rows {
		if r.Flowplane == "" {
			continue
		}
		if _, ok := component.Default.Lookup(r.Kind, r.Flowplane); !ok {
			t.Errorf("ArkFlow %s %q maps to %q, which is not a registered %s", r.Kind, r.ArkFlow, r.Flowplane, r.Kind)
		}
	}
}
