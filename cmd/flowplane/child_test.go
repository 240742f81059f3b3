package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// raceChildrenEnv set to 1 makes the child processes the race-built test
// binary itself instead of a plain build of this package.
const raceChildrenEnv = "FLOWPLANE_TEST_RACE_CHILDREN"

// childBin is the flowplane every test starts as a child process (Hubs,
// Agents, nodes, the scripts' flowplane command): a plain build of this
// package, made once by TestMain. `make test` runs go vet first, which
// leaves every package compiled in the build cache, so this costs a link
// (about 12 CPU-seconds).
// The children are not race-instrumented: under -race they ran several
// times slower and took most of the suite's CPU, while every package's own
// tests run its code under the race detector in process. With
// FLOWPLANE_TEST_RACE_CHILDREN=1 the children are the test binary
// re-executed through childEnv, race detector and all.
var childBin string

// buildChild builds this package into dir and returns the binary's path,
// or a link to the test binary itself when raceChildrenEnv asks for it.
func buildChild(dir string) (string, error) {
	bin := filepath.Join(dir, "flowplane")
	if os.Getenv(raceChildrenEnv) == "1" {
		self, err := os.Executable()
		if err != nil {
			return "", err
		}
		return bin, os.Symlink(self, bin)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the tests build flowplane for their child processes: %w", err)
	}
	// No symbol table, debug information or VCS stamp: a child needs none
	// (stack traces still name every frame), and the link is half as long.
	args := []string{"build", "-buildvcs=false", "-ldflags=-s -w", "-o", bin, "."}
	cmd := exec.Command(goTool, args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // as make test's go vet compiled the packages
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// childCommand is flowplane with args as a child process; its environment
// is the test's plus childEnv, which makes the test binary (when it is the
// child) run the command line instead of the tests.
func childCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(childBin, args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	return cmd
}
