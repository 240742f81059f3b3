package main

import (
	"context"
	"flag"
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
	if filepath.Base(os.Args[0]) != "flowplane" { // not a script's flowplane command
		parallelProcessTests()
	}
	testscript.Main(m, map[string]func(){
		"flowplane": func() {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
			stop()
			os.Exit(code)
		},
	})
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
