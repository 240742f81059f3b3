package main

import (
	"context"
	"os/exec"
	"strings"
	"time"
)

// engine is a stream processor run as a child process with a YAML file.
type engine struct {
	name string
	bin  string
	// args is the command line running the configuration at conf with its
	// durable state (if any) under state.
	args func(conf, state string) []string
	// config renders the engine's configuration of one run of a case.
	config func(sc scenario, p params) string
}

func flowplaneEngine(bin string) engine {
	return engine{
		name: "flowplane",
		bin:  bin,
		args: func(conf, state string) []string {
			return []string{"--config", conf, "--state-dir", state}
		},
		config: func(sc scenario, p params) string { return flowplaneHead + sc.flowplane(p) },
	}
}

func benthosEngine(bin string) engine {
	return engine{
		name: "benthos",
		bin:  bin,
		// Benthos keeps no state of its own: the brokers hold the offsets.
		args: func(conf, _ string) []string {
			return []string{"-c", conf}
		},
		config: func(sc scenario, p params) string { return benthosHead + sc.benthos(p) },
	}
}

// benthosVersion is the first line of `benthos --version`, or a note that
// it could not be read.
func benthosVersion(ctx context.Context, bin string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return bin + " (version unknown: " + err.Error() + ")"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return bin + " (" + line + ")"
}

// flowplaneHead: warnings only, no HTTP listener of the node's own.
const flowplaneHead = `logging: {level: warn}
health_check: {enabled: false, observability: {enabled: false}}
`

// benthosHead: warnings only, no HTTP server (it would listen on 0.0.0.0),
// no metrics, and pipeline threads left at Benthos' default (one per core).
const benthosHead = `logger: {level: warn}
http: {enabled: false}
metrics: {none: {}}
`
