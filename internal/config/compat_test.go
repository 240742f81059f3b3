package config_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/secretref"
)

// TestArkFlowAliases checks the spellings accepted for ArkFlow's sake and
// what they become.
func TestArkFlowAliases(t *testing.T) {
	tests := []struct {
		name, doc string
		want      func(*config.Config) any
		expect    any
	}{
		{"trace is debug", "logging: {level: trace}\nstreams: []",
			func(c *config.Config) any { return c.Logging.Level }, "debug"},
		{"debug stays debug", "logging: {level: debug}\nstreams: []",
			func(c *config.Config) any { return c.Logging.Level }, "debug"},
		{"processors null is an empty list", "streams: [{input: {type: generate, context: '{}'}, pipeline: {processors: null}, output: {type: drop}}]",
			func(c *config.Config) any { return c.Streams[0].Pipeline.Processors }, []config.Component{}},
		{"window without state is ephemeral", "streams: [{input: {type: generate, context: '{}'}, buffer: {type: tumbling_window, interval: 1s}, pipeline: {processors: []}, output: {type: drop}}]",
			func(c *config.Config) any { return windowState{c.Streams[0].State, c.Streams[0].StateDefaulted()} },
			windowState{&config.StreamState{Durability: "ephemeral"}, true}},
		{"window with state keeps it", "streams: [{input: {type: generate, context: '{}'}, buffer: {type: sliding_window, window_size: 2, slide_size: 1, interval: 1s}, pipeline: {processors: []}, output: {type: drop}, state: {durability: ephemeral}}]",
			func(c *config.Config) any { return windowState{c.Streams[0].State, c.Streams[0].StateDefaulted()} },
			windowState{&config.StreamState{Durability: "ephemeral"}, false}},
		{"memory buffer has no state", "streams: [{input: {type: generate, context: '{}'}, buffer: {type: memory, capacity: 10}, pipeline: {processors: []}, output: {type: drop}}]",
			func(c *config.Config) any { return windowState{c.Streams[0].State, c.Streams[0].StateDefaulted()} },
			windowState{nil, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Materialize([]byte(tt.doc), config.YAML, component.Default, secretref.Resolver{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.expect, tt.want(cfg)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

type windowState struct {
	State     *config.StreamState
	Defaulted bool
}

// TestArkFlowAliasesKeepRules checks that the aliases loosen nothing else.
func TestArkFlowAliasesKeepRules(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"processors still required", "streams: [{input: {type: generate, context: '{}'}, pipeline: {}, output: {type: drop}}]",
			"streams[0].pipeline.processors: required field is missing"},
		{"processors not an object", "streams: [{input: {type: generate, context: '{}'}, pipeline: {processors: {}}, output: {type: drop}}]",
			"streams[0].pipeline.processors: got object, want array"},
		{"unknown level", "logging: {level: verbose}\nstreams: []",
			`logging.level: "verbose" is not one of debug, info, warn, error, trace`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Materialize([]byte(tt.doc), config.YAML, component.Default, secretref.Resolver{})
			if diff := cmp.Diff(tt.want, errString(err)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
