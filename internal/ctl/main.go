package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flowplane/flowplane/internal/component"
)

// Exit codes of flowplane ctl.
const (
	ExitOK       = 0 // done; a wait converged or succeeded
	ExitFailed   = 1 // the call, the operation, the resource or the rollout failed
	ExitUsage    = 2 // unknown command or flag, bad arguments
	ExitTimedOut = 3 // --wait: not done within --timeout
)

// Env is the process around the command: its streams and environment.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

// Environment variables that override the configuration.
const (
	EnvHub   = "FLOWPLANE_HUB"
	EnvToken = "FLOWPLANE_TOKEN"
)

// defaultTimeout bounds a --wait.
const defaultTimeout = 5 * time.Minute

// exitError carries an exit code with its message.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usagef is a usage error (exit 2).
func usagef(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// app is one run of the command: its flags and, once needed, its client.
type app struct {
	env     Env
	hubFlag string
	ctxFlag string
	wait    bool
	timeout time.Duration
	output  string
	limit   int
	c       *Client
}

// Main runs `flowplane ctl` with args as they follow "flowplane" (so
// "ctl", or cobra's "__complete" of a completion script, comes first) and
// returns the exit code.
func Main(ctx context.Context, args []string, env Env) int {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if env.Stdin == nil {
		env.Stdin = strings.NewReader("")
	}
	a := &app{env: env, timeout: defaultTimeout}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code := ExitFailed
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	if code == ExitUsage {
		fmt.Fprintf(env.Stderr, "flowplane ctl: %v\nRun 'flowplane ctl --help' for usage.\n", err)
	} else {
		fmt.Fprintf(env.Stderr, "error: %v\n", err)
	}
	return code
}

// rootCommand is "flowplane" with ctl below it: completion scripts call
// the program by its own name.
func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "flowplane",
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE:          groupRun,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	ctl := &cobra.Command{
		Use:   "ctl",
		Short: "Operate a fleet through the Hub's operator API",
		Long: `flowplane ctl is the operator's client of the Hub: contexts, tables, views
side by side, writes that can --wait for convergence, and shell completion.

The Hub comes from --hub, else FLOWPLANE_HUB, else the context (--context,
else the current one of $XDG_CONFIG_HOME/flowplane/config.yaml, which
flowplane ctl login writes); the token from FLOWPLANE_TOKEN, else the
context's token source. A token is never printed.

Exit status: 0 done (converged), 1 failed, 2 usage error, 3 --wait timed out.`,
		Example: `  flowplane ctl login --hub http://127.0.0.1:8090 --token-env SVC_OPERATOR_TOKEN
  flowplane ctl get nodes
  flowplane ctl get streams --node node-a -o wide
  flowplane ctl stream stop node-a/orders --wait
  flowplane ctl describe stream node-a/orders
  flowplane ctl job run -f spec.json --wait
  flowplane ctl rollout create -f fleet.yaml --nodes node-a,node-b --batch-size 1 --soak 2s --wait
  flowplane ctl events --follow`,
		Args: cobra.ArbitraryArgs,
		RunE: groupRun,
	}
	ctl.PersistentFlags().StringVar(&a.hubFlag, "hub", "", "Hub URL (overrides FLOWPLANE_HUB and the context)")
	ctl.PersistentFlags().StringVar(&a.ctxFlag, "context", "", "context to use instead of the current one")
	ctl.AddCommand(a.loginCommand(), a.contextCommand(), a.getCommand(), a.describeCommand(),
		a.streamCommand(), a.nodeCommand(), a.jobCommand(), a.configCommand(), a.rolloutCommand(),
		a.eventsCommand(), a.tapCommand(), a.completionCommand(root))
	root.AddCommand(ctl)
	root.SetFlagErrorFunc(flagError)
	ctl.SetFlagErrorFunc(flagError)
	setGroupDefaults(ctl)
	return root
}

// setGroupDefaults gives every command below c the flag error function,
// usage-error argument checks, and, where it has none of its own, the
// examples of its group that run it.
func setGroupDefaults(c *cobra.Command) {
	for _, sub := range c.Commands() {
		sub.SetFlagErrorFunc(flagError)
		if sub.Example == "" {
			sub.Example = examplesOf(c.Example, c.Name()+" "+sub.Name())
		}
		if sub.HasSubCommands() && sub.RunE == nil {
			sub.Args = cobra.ArbitraryArgs
			sub.RunE = groupRun
		}
		setGroupDefaults(sub)
	}
}

// examplesOf returns the lines of examples that run the command path
// ("job stop"): a leaf's help shows the group's examples for it.
func examplesOf(examples, path string) string {
	var out []string
	for line := range strings.Lines(examples) {
		if i := strings.Index(line, " "+path); i >= 0 {
			if rest := line[i+1+len(path):]; rest == "" || rest[0] == ' ' || rest[0] == '\n' {
				out = append(out, strings.TrimSuffix(line, "\n"))
			}
		}
	}
	return strings.Join(out, "\n")
}

// groupRun runs a command that only groups others: without arguments it
// shows its help; with one, the argument is no subcommand of it.
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		if cmd.Name() == "flowplane" {
			return usagef("flowplane: this entry point runs only ctl")
		}
		cmd.SetOut(cmd.ErrOrStderr())
		_ = cmd.Help()
		return usagef("missing command: %s <command>", cmd.CommandPath())
	}
	if args[0] == "help" {
		target := cmd
		if len(args) > 1 {
			if sub, rest, err := cmd.Find(args[1:]); err == nil && len(rest) == 0 {
				target = sub
			} else {
				return usagef("help: no command %q in %q", strings.Join(args[1:], " "), cmd.CommandPath())
			}
		}
		return target.Help()
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default, set only on its path
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return usagef("%s", msg)
}

// flagError makes a flag error a usage error, naming the likely flag for
// an unknown one.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if ok {
		var known []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) { known = append(known, f.Name) })
		cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) { known = append(known, f.Name) })
		msg = fmt.Sprintf("unknown flag --%s for %q", name, cmd.CommandPath())
		if s := component.Suggest(name, known); s != "" {
			msg += fmt.Sprintf("; did you mean --%s?", s)
		}
	}
	return usagef("%s", msg)
}

// args checks a command's positional arguments as a usage error.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %s (got %d arguments)", cmd.CommandPath(), what, len(args))
		}
		return nil
	}
}

func rangeArgs(lo, hi int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usagef("%s takes %s (got %d arguments)", cmd.CommandPath(), what, len(args))
		}
		return nil
	}
}

// addWait adds --wait and --timeout to a write.
func (a *app) addWait(c *cobra.Command) *cobra.Command {
	c.Flags().BoolVarP(&a.wait, "wait", "w", false, "wait until the resource converges, the operation finishes or the rollout ends (exit 0), fails (1) or --timeout passes (3)")
	c.Flags().DurationVar(&a.timeout, "timeout", defaultTimeout, "how long --wait waits")
	return c
}

// addOutput adds -o to a read.
func (a *app) addOutput(c *cobra.Command, formats string) *cobra.Command {
	c.Flags().StringVarP(&a.output, "output", "o", "", "output format: "+formats)
	return c
}
