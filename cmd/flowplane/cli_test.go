package main

import (
	"bytes"
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("streams: [{}]"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"no arguments", nil, exitUsage},
		{"unknown flag", []string{"--nope"}, exitUsage},
		{"extra argument", []string{"--config", "x.yaml", "y"}, exitUsage},
		{"schema with argument", []string{"schema", "x"}, exitUsage},
		{"help", []string{"--help"}, exitOK},
		{"version", []string{"version"}, exitOK},
		{"--version", []string{"--version"}, exitOK},
		{"schema", []string{"schema"}, exitOK},
		{"validate good", []string{"--config", "../../examples/quickstart.yaml", "--validate"}, exitOK},
		{"validate bad", []string{"--config", bad, "--validate"}, exitFailed},
		{"run bad", []string{"--config", bad}, exitFailed},
		{"missing file", []string{"--config", filepath.Join(dir, "none.yaml"), "--validate"}, exitFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
		})
	}
}

// TestSchemaAcceptsExamples compiles the printed schema as a draft 2020-12
// schema and checks it against every example configuration and every
// component's own example placed in a stream.
func TestSchemaAcceptsExamples(t *testing.T) {
	code, out, stderr := runCLI(t, "schema")
	if code != 0 {
		t.Fatalf("schema exit %d: %s", code, stderr)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("schema output is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("schema does not compile: %v", err)
	}
	validate := func(name string, tree any) {
		t.Helper()
		b, _ := json.Marshal(tree)
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(inst); err != nil {
			t.Errorf("%s is rejected by the schema: %v", name, err)
		}
	}
	files := exampleConfigs(t, "../../examples")
	if len(files) == 0 {
		t.Fatal("no examples")
	}
	for _, f := range files {
		data, format, err := config.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tree, err := config.Tree(data, format)
		if err != nil {
			t.Fatal(err)
		}
		validate(f, tree)
	}
	specs := component.Default.Specs()
	if len(specs) < 4 {
		t.Fatalf("only %d components registered", len(specs))
	}
	for _, s := range specs {
		var ex map[string]any
		if err := yaml.Unmarshal([]byte(s.Example), &ex); err != nil {
			t.Errorf("%s %s: example is not YAML: %v", s.Kind, s.Name, err)
			continue
		}
		st := map[string]any{
			"input":    map[string]any{"type": "memory", "messages": []any{}},
			"pipeline": map[string]any{"processors": []any{}},
			"output":   map[string]any{"type": "drop"},
		}
		switch s.Kind {
		case component.KindInput:
			st["input"] = ex
		case component.KindOutput:
			st["output"] = ex
		case component.KindProcessor:
			st["pipeline"] = map[string]any{"processors": []any{ex}}
		case component.KindBuffer:
			st["buffer"] = ex
			st["state"] = map[string]any{"durability": "ephemeral"}
		}
		validate(string(s.Kind)+" "+s.Name+" example", map[string]any{"streams": []any{st}})
	}
}

// exampleConfigs lists the configuration files (by extension, regular
// files only) in dir, sorted: not the state, logs or databases a run or a
// README walkthrough may have left beside them.
func exampleConfigs(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range ents {
		switch filepath.Ext(e.Name()) {
		case ".yaml", ".yml", ".json", ".toml":
			// x_test.yaml holds the tests of x.yaml (flowplane test), not a configuration.
			if e.Type().IsRegular() && !strings.HasSuffix(strings.TrimSuffix(e.Name(), filepath.Ext(e.Name())), "_test") {
				files = append(files, filepath.Join(dir, e.Name()))
			}
		}
	}
	return files
}

// TestHubHelpListsEveryVariable: `flowplane hub --help` names every SVC_*
// variable the Hub package declares (read from its source, so that a new
// setting cannot be left out of the help).
func TestHubHelpListsEveryVariable(t *testing.T) {
	files, err := filepath.Glob("../../internal/hub/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no hub sources: %v", err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			gd, ok := n.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				return true
			}
			for _, spec := range gd.Specs {
				for _, v := range spec.(*ast.ValueSpec).Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if s, _ := strconv.Unquote(lit.Value); strings.HasPrefix(s, "SVC_") {
							names = append(names, s)
						}
					}
				}
			}
			return false
		})
	}
	if len(names) < 8 {
		t.Fatalf("found only %v in internal/hub", names)
	}
	code, out, _ := runCLI(t, "hub", "--help")
	if code != exitOK {
		t.Fatalf("hub --help exit %d", code)
	}
	for _, name := range names {
		if !strings.Contains(out, "\n  "+name+" ") {
			t.Errorf("hub --help does not list %s:\n%s", name, out)
		}
	}
}
