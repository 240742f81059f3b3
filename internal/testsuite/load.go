package testsuite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/secretref"
)

// Suite is one test file with the configuration its cases test.
type Suite struct {
	File   *File
	Config *config.Config
	// Name prefixes its cases' names: the configuration's file name
	// without its extension ("quickstart").
	Name string
}

var extensions = []string{".yaml", ".yml", ".json", ".toml"}

// Load finds the tests under paths: a `*_test.yaml` file, a configuration
// (its `tests:` section and its `<name>_test.yaml`), or a directory of
// them (with "/..." also its subdirectories). The error holds every
// problem, a line each, naming its file and, within it, the path of the
// bad value; nothing runs when there is one.
func Load(paths []string, reg *component.Registry) ([]*Suite, error) {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	var files []string // test files and configurations with tests, in order, once each
	var errs []error
	add := func(p string) {
		if !slices.Contains(files, p) {
			files = append(files, p)
		}
	}
	for _, p := range paths {
		found, err := discover(p)
		if err != nil {
			errs = append(errs, err)
		}
		for _, f := range found {
			add(f)
		}
	}
	var suites []*Suite
	configs := map[string]*config.Config{}
	for _, f := range files {
		s, err := loadSuite(f, reg, configs)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		suites = append(suites, s)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return suites, nil
}

// discover lists the test files and the configurations with tests that p
// names.
func discover(p string) ([]string, error) {
	dir, recursive := strings.CutSuffix(p, "/...")
	if recursive && dir == "" {
		dir = "."
	}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		if isTestFile(p) {
			return []string{p}, nil
		}
		var found []string
		if hasTests(p) {
			found = append(found, p)
		}
		stem := strings.TrimSuffix(p, filepath.Ext(p))
		for _, ext := range extensions {
			if _, err := os.Stat(stem + "_test" + ext); err == nil {
				found = append(found, stem+"_test"+ext)
			}
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no tests: neither a tests: section nor a %s", p, filepath.Base(stem)+"_test.yaml")
		}
		return found, nil
	}
	var found []string
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && (!recursive || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if isTestFile(path) || slices.Contains(extensions, filepath.Ext(path)) && hasTests(path) {
			found = append(found, path)
		}
		return nil
	})
	return found, err
}

func isTestFile(p string) bool {
	ext := filepath.Ext(p)
	return slices.Contains(extensions, ext) && strings.HasSuffix(strings.TrimSuffix(p, ext), "_test")
}

// hasTests reports whether the configuration at p has a tests: section;
// a file that does not parse has none.
func hasTests(p string) bool {
	tree, err := readTree(p)
	if err != nil {
		return false
	}
	m, ok := tree.(map[string]any)
	_, has := m["tests"]
	return ok && has
}

func readTree(p string) (any, error) {
	data, format, err := config.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return config.Tree(data, format)
}

// loadSuite reads one test file (or configuration with tests) and the
// configuration it tests (configs caches them by path).
func loadSuite(p string, reg *component.Registry, configs map[string]*config.Config) (*Suite, error) {
	tree, err := readTree(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	var f *File
	if isTestFile(p) {
		if f, err = parseFile(p, tree); err != nil {
			return nil, err
		}
		if f.Config == "" {
			if f.Config, err = configOf(p); err != nil {
				return nil, err
			}
		} else if !filepath.IsAbs(f.Config) {
			f.Config = filepath.Join(filepath.Dir(p), f.Config)
		}
	} else {
		if f, err = parseSection(p, tree.(map[string]any)["tests"]); err != nil {
			return nil, err
		}
	}
	cfg, ok := configs[f.Config]
	if !ok {
		if cfg, err = loadConfig(f.Config, reg); err != nil {
			return nil, err
		}
		configs[f.Config] = cfg
	}
	name := filepath.Base(f.Config)
	return &Suite{File: f, Config: cfg, Name: strings.TrimSuffix(name, filepath.Ext(name))}, nil
}

// configOf is the configuration next to test file p: x_test.yaml tests
// x.yaml (or x.yml, x.json, x.toml).
func configOf(p string) (string, error) {
	ext := filepath.Ext(p)
	stem := strings.TrimSuffix(strings.TrimSuffix(p, ext), "_test")
	for _, e := range append([]string{ext}, extensions...) {
		if _, err := os.Stat(stem + e); err == nil {
			return stem + e, nil
		}
	}
	return "", fmt.Errorf("%s: no configuration %s next to it; name one with the field config", p, filepath.Base(stem)+ext)
}

// loadConfig materializes a configuration as start-up and --validate do.
func loadConfig(p string, reg *component.Registry) (*config.Config, error) {
	data, format, err := config.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	cfg, err := config.Materialize(data, format, reg, secretref.Resolver{})
	if ps := config.Problems(err); len(ps) > 0 {
		if cfg != nil {
			ps = cfg.Redact(ps)
		}
		lines := make([]string, len(ps))
		for i, pr := range ps {
			lines[i] = "  " + pr.Error()
		}
		return nil, fmt.Errorf("%s: invalid configuration:\n%s", p, strings.Join(lines, "\n"))
	}
	return cfg, nil
}
