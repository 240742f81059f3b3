package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/testsuite"
)

const testUsage = `Usage: flowplane test [paths...] [--run REGEX] [--junit FILE] [-v]

Runs the declarative tests of configurations (docs/testing.md): the cases of
each <name>_test.yaml next to a configuration and of a configuration's own
tests: section, with the configuration's inputs, outputs, sources and sinks
replaced by an in-memory harness. A path is a test file, a configuration or
a directory (dir/... also searches its subdirectories); the default is ".".

Flags:
  --run REGEX    run only the cases whose name (<configuration>/<case>) matches
  --junit FILE   also write a JUnit XML report to FILE
  -v             print every case and what it logged, not only failures

Exit status: 0 every case passed, 1 a case failed, 2 a bad test file or
configuration, or a usage error.
`

// runTest is `flowplane test`.
func runTest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("flowplane test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	runExpr := fs.String("run", "", "regular expression selecting cases")
	junit := fs.String("junit", "", "JUnit XML report file")
	verbose := fs.Bool("v", false, "verbose")
	// Flags may follow the paths, as in go test.
	var paths []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, testUsage)
				return exitOK
			}
			fmt.Fprintf(stderr, "flowplane test: %s\n\n%s", usageError(fs, err), testUsage)
			return exitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		paths = append(paths, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	var match *regexp.Regexp
	if *runExpr != "" {
		var err error
		if match, err = regexp.Compile(*runExpr); err != nil {
			fmt.Fprintf(stderr, "flowplane test: --run: %v\n", err)
			return exitUsage
		}
	}
	suites, err := testsuite.Load(paths, component.Default)
	if err != nil {
		fmt.Fprintf(stderr, "%v\n", err)
		return exitUsage
	}
	rep := testsuite.Run(ctx, suites, testsuite.Options{Registry: component.Default, Match: match, Verbose: *verbose, Out: stdout})
	if *junit != "" {
		if err := writeJUnit(*junit, rep); err != nil {
			fmt.Fprintf(stderr, "flowplane test: --junit: %v\n", err)
			return exitFailed
		}
	}
	if rep.Failed() {
		return exitFailed
	}
	return exitOK
}

func writeJUnit(path string, rep testsuite.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := testsuite.WriteJUnit(f, rep); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
