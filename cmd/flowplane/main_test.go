package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// childEnv makes the test binary run the real command line instead of the
// tests, so crash tests can start flowplane as a child process and SIGKILL it.
const childEnv = "FLOWPLANE_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	parallelProcessTests()
	dir, err := os.MkdirTemp("", "flowplane-bin")
	if err == nil {
		childBin, err = buildChild(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// scriptPath puts childBin first on a script's PATH: the scripts' flowplane
// command (childEnv makes it the command line when it is the test binary).
func scriptPath(env *testscript.Env) {
	env.Setenv(childEnv, "1")
	env.Setenv("PATH", filepath.Dir(childBin)+string(filepath.ListSeparator)+env.Getenv("PATH"))
}

// parallelProcessTests lets four parallel tests run at once unless
// -test.parallel says otherwise: this package's parallel tests (scripts,
// fleets of child processes) mostly wait on their children, and the
// default (GOMAXPROCS, two on CI) left the CPUs idle.
func parallelProcessTests() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "4")
	}
}

// TestScripts runs the CLI scripts in testdata/script (txtar files).
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			scriptPath(env)
			env.Setenv("EXAMPLES", examplesDir(t))
			// A node run without --state-dir keeps its state under the
			// user's state directory: the script's own.
			env.Setenv("XDG_STATE_HOME", env.WorkDir+"/.state")
			return nil
		},
	})
}

func examplesDir(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd + "/../../examples"
}
