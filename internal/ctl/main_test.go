package ctl

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// run runs Main with an environment of its own.
func run(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	if env == nil {
		env = map[string]string{}
	}
	if _, ok := env["XDG_CONFIG_HOME"]; !ok {
		env["XDG_CONFIG_HOME"] = t.TempDir()
	}
	var out, errb bytes.Buffer
	code := Main(context.Background(), append([]string{"ctl"}, args...), Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }})
	return code, out.String(), errb.String()
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"get", "nodes", "--limt", "3"}, `unknown flag --limt for "flowplane ctl get nodes"; did you mean --limit?`},
		{[]string{"stream", "stop", "node-a/orders", "--wiat"}, "did you mean --wait?"},
		{[]string{"get", "streams", "--nod", "a"}, "did you mean --node?"},
		{[]string{"describ", "node", "a"}, `unknown command "describ" for "flowplane ctl"; did you mean "describe"?`},
		{[]string{"rollout", "creat"}, `did you mean "create"?`},
		{[]string{"get"}, "missing command: flowplane ctl get <command>"},
		{[]string{"help", "gett"}, `help: no command "gett"`},
		{[]string{"stream", "stop"}, "takes NODE/STREAM"},
		{[]string{"describe", "stream", "orders"}, `"orders": want NODE/STREAM`},
		{[]string{"get", "nodes"}, "no Hub: run flowplane ctl login --hub URL, or set FLOWPLANE_HUB"},
		{[]string{"--hub", "ftp://x", "get", "nodes"}, `hub URL "ftp://x"`},
		{[]string{"completion", "tcsh"}, "unknown shell"},
		{[]string{"login"}, "login needs --hub URL"},
		{[]string{"login", "--hub", "http://127.0.0.1:1", "--name", "../x"}, "context name"},
		{[]string{"job", "create"}, "-f spec.json"},
		{[]string{"config", "apply", "node-a", "-f", "fleet.ini"}, "ends in .yaml, .yml, .json or .toml"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, stderr := run(t, map[string]string{"FLOWPLANE_HUB": hubFor(tt.args)}, tt.args...)
			if code != ExitUsage || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want %d with %q", code, stderr, ExitUsage, tt.want)
			}
		})
	}
}

// hubFor is a Hub URL for the cases that must get past the Hub check,
// none for the one about its absence.
func hubFor(args []string) string {
	if len(args) == 2 && args[0] == "get" && args[1] == "nodes" || len(args) == 1 && args[0] == "login" {
		return ""
	}
	return "http://127.0.0.1:1"
}

func TestSplitStream(t *testing.T) {
	tests := []struct {
		in, node, stream string
		ok               bool
	}{
		{"node-a/orders", "node-a", "orders", true},
		{"orders", "", "", false},
		{"/orders", "", "", false},
		{"node-a/", "", "", false},
		{"a/b/c", "", "", false},
	}
	for _, tt := range tests {
		n, s, err := splitStream(tt.in)
		if n != tt.node || s != tt.stream || (err == nil) != tt.ok {
			t.Errorf("splitStream(%q) = %q, %q, %v", tt.in, n, s, err)
		}
	}
}

func TestHelpListsEveryCommandWithExamples(t *testing.T) {
	code, out, _ := run(t, nil, "--help")
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	if code, help, _ := run(t, nil, "help"); code != ExitOK || help != out {
		t.Fatalf("ctl help: exit %d, not the output of ctl --help:\n%s", code, help)
	}
	if code, help, _ := run(t, nil, "help", "rollout", "create"); code != ExitOK || !strings.Contains(help, "--batch-size") {
		t.Fatalf("ctl help rollout create: exit %d:\n%s", code, help)
	}
	for _, want := range []string{"login", "context", "get", "describe", "stream", "node", "job", "config", "rollout", "events", "completion", "Examples:", "--wait"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
}

func TestContextCommandsNeverShowAToken(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"XDG_CONFIG_HOME": dir, "OP": "op-secret-token-123456"}
	cfg := Config{Current: "a", Contexts: []Context{{Name: "a", Hub: "http://127.0.0.1:1", TokenEnv: "OP"}, {Name: "b", Hub: "http://127.0.0.1:2"}}}
	path, _ := ConfigPath(func(k string) string { return env[k] })
	if err := SaveConfig(path, cfg); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"context", "list"}, {"context", "current"}, {"context", "use", "b"}, {"context", "current"}, {"context", "delete", "a"}, {"context", "list"}} {
		code, out, errs := run(t, env, args...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		if strings.Contains(out+errs, "op-secret") {
			t.Fatalf("%v shows the token:\n%s%s", args, out, errs)
		}
	}
	got, err := LoadConfig(path)
	if err != nil || got.Current != "b" || len(got.Contexts) != 1 {
		t.Fatalf("after use b and delete a: %+v, %v", got, err)
	}
	if code, _, errs := run(t, env, "context", "use", "ghost"); code != ExitFailed || !strings.Contains(errs, `no such context "ghost"`) {
		t.Fatalf("use ghost: exit %d: %s", code, errs)
	}
}

// TestFlagDefaultsAgree guards the flags that share one variable across
// commands: each definition sets the variable to its default, so they
// must all have the same one.
func TestFlagDefaultsAgree(t *testing.T) {
	a := &app{env: Env{Getenv: func(string) string { return "" }}}
	root := a.rootCommand()
	if a.timeout != defaultTimeout || a.wait || a.output != "" || a.limit != 0 {
		t.Fatalf("after building the commands: timeout %s, wait %t, output %q, limit %d", a.timeout, a.wait, a.output, a.limit)
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Flags().Lookup("wait") != nil {
			if f := c.Flags().Lookup("timeout"); f == nil || f.DefValue != defaultTimeout.String() {
				t.Errorf("%s: --wait without a --timeout defaulting to %s", c.CommandPath(), defaultTimeout)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// TestEveryCommandHasExamples: --help of every command, leaves included,
// shows how it is run.
func TestEveryCommandHasExamples(t *testing.T) {
	a := &app{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Example == "" {
			t.Errorf("%s: no examples in its help", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	root := a.rootCommand()
	for _, c := range root.Commands() {
		walk(c)
	}
}
