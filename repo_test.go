package flowplane_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryPackageHasDocComment walks the module and requires exactly one
// package comment per package, in doc.go (command packages may keep it in
// main.go).
func TestEveryPackageHasDocComment(t *testing.T) {
	dirs := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.Dir(path)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 5 {
		t.Fatalf("found only %d packages", len(dirs))
	}
	for dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		var name string
		var with []string
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Fatal(err)
			}
			name = f.Name.Name
			doc := ""
			if f.Doc != nil {
				doc = f.Doc.Text()
			}
			if strings.HasPrefix(doc, "Package "+name+" ") || name == "main" && strings.HasPrefix(doc, "Command ") {
				with = append(with, filepath.Base(file))
			}
		}
		switch {
		case len(with) == 0:
			t.Errorf("package %s (%s) has no package comment", name, dir)
		case len(with) > 1:
			t.Errorf("package %s (%s) has package comments in %v; keep one, in doc.go", name, dir, with)
		case name != "main" && with[0] != "doc.go":
			t.Errorf("package %s (%s) has its package comment in %s; move it to doc.go", name, dir, with[0])
		}
	}
}

// TestDocsReferOnlyToRepositoryFiles: every link and every `*.md` named in
// README.md and docs/ resolves to a file of this repository, so a reader
// with only the repository finds what the documentation points at.
func TestDocsReferOnlyToRepositoryFiles(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "README.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	named := regexp.MustCompile("`([A-Za-z0-9_./-]+\\.md)`")
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	inRepo := func(page, target string) bool {
		for _, base := range []string{filepath.Dir(page), "."} {
			p, err := filepath.Abs(filepath.Join(base, target))
			if err != nil || !strings.HasPrefix(p, root+string(filepath.Separator)) {
				continue
			}
			if _, err := os.Stat(p); err == nil {
				return true
			}
		}
		return false
	}
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		var targets []string
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			targets = append(targets, target)
		}
		for _, m := range named.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if !inRepo(page, target) {
				t.Errorf("%s refers to %s, which is not a file of this repository", page, target)
			}
		}
	}
}

// TestImportRules keeps the import directions of docs/architecture.md: the
// engine is the node's one door, the Hub knows nodes only by the wire, and
// the Hub's store knows no HTTP.
func TestImportRules(t *testing.T) {
	const mod = "github.com/flowplane/flowplane/"
	runtime := []string{"internal/kernel", "internal/state", "internal/stream", "internal/wal", "internal/dataplane"}
	rules := []struct {
		dir       string
		recursive bool
		forbidden []string
		why       string
	}{
		{"internal/agent", false, runtime, "the Agent reaches the runtime through internal/engine"},
		{"internal/node", false, runtime, "the Node API reaches the runtime through internal/engine"},
		{"internal/daemon", false, runtime, "node boot reaches the runtime through internal/engine"},
		{"cmd/flowplane", false, runtime, "the command reaches the runtime through internal/engine"},
		{"internal/hub", true, append([]string{"internal/engine", "internal/node", "internal/agent"}, runtime...), "the Hub knows nodes only by the wire"},
		{"internal/hub/history", false, []string{"internal"}, "the rate history is a leaf: the Hub feeds it counters"},
		{"internal/ctl", true, append([]string{"internal/hub", "internal/engine", "internal/node", "internal/agent", "internal/daemon"}, runtime...), "the client knows the Hub only by HTTP and the wire"},
		{"internal/policy", false, append([]string{"internal/engine", "internal/node", "internal/agent", "internal/hub"}, runtime...), "the remote policy decides over a configuration and runs nothing"},
		{"internal/sandbox", false, []string{"internal"}, "the sandbox is a leaf: components, the kernel and the policy all use it"},
		{"internal/testsuite", false, []string{"internal/hub", "internal/node", "internal/agent", "internal/daemon", "internal/ctl"}, "flowplane test runs a configuration in process and reaches no server"},
		{"internal/tracing", false, []string{"internal"}, "tracing is a leaf: the runtime, the connectors and node boot all use it"},
		{"internal/openapi", false, []string{"internal/hub", "internal/node", "internal/agent", "internal/engine"}, "openapi builds documents of any surface and knows none"},
	}
	for _, rule := range rules {
		err := filepath.WalkDir(rule.dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path != rule.dir && (!rule.recursive || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				p := strings.Trim(imp.Path.Value, `"`)
				for _, bad := range rule.forbidden {
					if p == mod+bad || strings.HasPrefix(p, mod+bad+"/") {
						t.Errorf("%s imports %s: %s", path, p, rule.why)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	bin, err := exec.Command("go", "list", "-deps", "./cmd/flowplane").Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/flowplane: %v", err)
	}
	for dep := range strings.FieldsSeq(string(bin)) {
		if strings.HasPrefix(dep, "github.com/pb33f/") || dep == mod+"internal/openapi/openapitest" || dep == mod+"internal/pgtest" ||
			strings.HasPrefix(dep, "github.com/zitadel/") || dep == mod+"internal/idp/testop" ||
			strings.HasPrefix(dep, "go.opentelemetry.io/collector/") {
			t.Errorf("the binary links %s: the OpenAPI validator, the test PostgreSQL server, the test OpenID Provider and the OpenTelemetry Collector's receiver are for tests only", dep)
		}
	}

	out, err := exec.Command("go", "list", "-deps", "./internal/hub/store").Output()
	if err != nil {
		t.Fatalf("go list -deps ./internal/hub/store: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "net/http" || dep == mod+"internal/httpapi" {
			t.Errorf("internal/hub/store depends on %s: the store knows no HTTP", dep)
		}
	}
}
