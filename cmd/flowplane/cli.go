package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/ctl"
	"github.com/flowplane/flowplane/internal/daemon"
)

// processStart approximates the process start for the ready_ms figure.
var processStart = time.Now()

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

const usage = `flowplane — streaming-data engine, Agent and Hub in one binary.

Usage:
  flowplane --config <file> [--state-dir <dir>]   run an engine node
  flowplane --config <file> --validate             check a configuration as start-up does, then exit
  flowplane hub [--address host:port] [--storage file.db]
                                                   run the Hub (settings and tokens from SVC_*: flowplane hub --help)
  flowplane ctl <command>                          operate the fleet through the Hub (flowplane ctl --help)
  flowplane test [paths...] [--run REGEX] [--junit FILE] [-v]
                                                   run the declarative tests of configurations (flowplane test --help)
  flowplane schema                                 print the configuration's JSON Schema
  flowplane version                                print the version (also --version)
  flowplane --help                                 this help

Configuration files are .yaml, .yml, .json or .toml. Exit status: 0 success,
1 invalid configuration or run-time failure, 2 usage error.
`

// exit codes
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	exitVersion = 0
)

// run is the whole command line; main only supplies the process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "schema":
			if len(args) > 1 {
				fmt.Fprintf(stderr, "flowplane schema takes no arguments\n")
				return exitUsage
			}
			return printSchema(stdout, stderr)
		case "version":
			fmt.Fprintln(stdout, versionLine())
			return exitVersion
		case "test":
			return runTest(ctx, args[1:], stdout, stderr)
		case "hub":
			if len(args) > 1 && args[1] == "token" {
				return runHubToken(args[2:], time.Now(), stdout, stderr)
			}
			if len(args) > 1 && args[1] == "migrate" {
				return runHubMigrate(ctx, args[2:], stdout, stderr)
			}
			return runHub(ctx, args[1:], stdout, stderr)
		case "ctl", "__complete", "__completeNoDesc":
			// The shell completion scripts call the program by its own
			// name: "flowplane __complete ctl ...".
			return ctl.Main(ctx, args, ctl.Env{Stdin: os.Stdin, Stdout: stdout, Stderr: stderr, Getenv: os.Getenv})
		}
	}
	fs := flag.NewFlagSet("flowplane", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	configPath := fs.String("config", "", "configuration file")
	validate := fs.Bool("validate", false, "validate the configuration and exit")
	stateDir := fs.String("state-dir", "", "directory of durable node state")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return exitOK
		}
		fmt.Fprintf(stderr, "flowplane: %s\n\n%s", usageError(fs, err), usage)
		return exitUsage
	}
	if *showVersion {
		fmt.Fprintln(stdout, versionLine())
		return exitVersion
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "flowplane: %s\n\n%s", unexpectedArgument(fs.Arg(0)), usage)
		return exitUsage
	}
	if *configPath == "" {
		fmt.Fprintf(stderr, "flowplane: --config <file> is required\n\n%s", usage)
		return exitUsage
	}
	if *validate {
		if !daemon.Validate(*configPath, stdout, stderr) {
			return exitFailed
		}
		return exitOK
	}
	err := daemon.Run(ctx, daemon.Options{
		ConfigPath: *configPath, StateDir: *stateDir, Version: buildVersion(), Started: processStart,
		Stdout: stdout, Stderr: stderr,
	})
	if err != nil {
		return exitFailed
	}
	return exitOK
}

func printSchema(stdout, stderr io.Writer) int {
	b, err := json.MarshalIndent(config.Schema(component.Default), "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "flowplane: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return exitOK
}

// versionLine is what `flowplane version` prints: the version, then the
// commit and its time when the binary was built from a git checkout (go
// build stamps them in the build info; go run and go test do not).
func versionLine() string {
	line := "flowplane " + buildVersion()
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return line
	}
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return line
	}
	line += " commit " + rev
	if modified == "true" {
		line += " (modified)"
	}
	if at != "" {
		line += " committed " + at
	}
	return line + " " + bi.GoVersion
}

func buildVersion() string {
	if version != "" {
		return version
	}
	// A module version from a release tag; not the pseudo-version go build
	// derives from a commit (v0.0.0-<time>-<commit>), which versionLine
	// shows as the commit instead.
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" && !strings.HasPrefix(bi.Main.Version, "v0.0.0-") {
		return bi.Main.Version
	}
	return "0.6.0-dev"
}
