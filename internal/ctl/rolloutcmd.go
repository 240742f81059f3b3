package ctl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowplane/flowplane/internal/wire"
)

func (a *app) rolloutCommand() *cobra.Command {
	var file, version, source string
	var nodes []string
	var waves []int
	var batch, maxFailures int
	var soak, gate, pause time.Duration
	r := &cobra.Command{
		Use:   "rollout",
		Short: "Roll a configuration out to nodes in waves, and steer it",
		Example: `  flowplane ctl rollout create -f fleet.yaml --nodes node-a,node-b --batch-size 1 --soak 2s --wait
  flowplane ctl rollout watch
  flowplane ctl rollout pause ID
  flowplane ctl rollout resume ID --wait
  flowplane ctl rollout cancel --wait
  flowplane ctl rollout rollback ID --wait`,
	}
	create := &cobra.Command{
		Use: "create -f FILE --nodes A,B", Short: "Create a rollout; prints its id", Args: exactArgs(0, "no arguments (the configuration is -f, the nodes --nodes)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := wire.RolloutCreateRequest{NodeIDs: nodes, ConfigVersion: version, SourceNodeID: source, BatchSize: batch,
				WavePercentages: waves, MaxFailures: maxFailures, SoakMS: soak.Milliseconds(), GateTimeoutMS: gate.Milliseconds(), PauseMS: pause.Milliseconds()}
			if len(nodes) == 0 {
				return usagef("name the nodes with --nodes A,B")
			}
			if file != "" {
				doc, err := configDocument(file)
				if err != nil {
					return err
				}
				req.Configuration = &doc
			} else if version == "" {
				return usagef("give the configuration with -f FILE, or --config-version V (with --source-node)")
			}
			return a.write(cmd.Context(), func(ctx context.Context, c *Client) (written, error) {
				var ro wire.Rollout
				if _, err := c.postJSON(ctx, http.MethodPost, "/rollouts", req, &ro); err != nil {
					return written{}, err
				}
				return written{target: Target{Kind: waitRollout, ResourceID: ro.RolloutID, Success: wire.RolloutSucceeded}, out: func() error {
					fmt.Fprintln(a.env.Stdout, ro.RolloutID)
					return nil
				}}, nil
			})
		},
	}
	create.Flags().StringVarP(&file, "file", "f", "", "the configuration (.yaml, .yml, .json, .toml)")
	create.Flags().StringSliceVar(&nodes, "nodes", nil, "the nodes, in rollout order")
	create.Flags().StringVar(&version, "config-version", "", "a version the Hub keeps (instead of -f)")
	create.Flags().StringVar(&source, "source-node", "", "the node whose --config-version it is")
	create.Flags().IntVar(&batch, "batch-size", 0, "nodes per wave")
	create.Flags().IntSliceVar(&waves, "waves", nil, "cumulative percentages of the nodes per wave (25,50,100)")
	create.Flags().IntVar(&maxFailures, "max-failures", 0, "nodes that may fail before the rollout fails")
	create.Flags().DurationVar(&soak, "soak", 0, "how long a wave stays healthy before the next")
	create.Flags().DurationVar(&gate, "gate-timeout", 0, "how long a wave may take to converge")
	create.Flags().DurationVar(&pause, "pause", 0, "pause between waves")
	_ = create.RegisterFlagCompletionFunc("nodes", a.completeNodes)

	watch := &cobra.Command{
		Use: "watch [ID]", Short: "Follow a rollout (default: the newest active one, else the newest) until it ends", Args: rangeArgs(0, 1, "a rollout id or nothing"),
		ValidArgsFunction: a.completeRollouts,
		RunE: func(cmd *cobra.Command, args []string) error {
			a.wait = true
			return a.write(cmd.Context(), func(ctx context.Context, c *Client) (written, error) {
				// A rollout that ended between the command that steered
				// it and this one is still the one meant: its end is
				// reported at once.
				id, err := rolloutID(ctx, c, args, true)
				if errors.Is(err, errNoActiveRollout) {
					id, err = rolloutID(ctx, c, args, false)
				}
				if err != nil {
					return written{}, err
				}
				fmt.Fprintf(a.env.Stderr, "watching rollout %s\n", id)
				return written{target: Target{Kind: waitRollout, ResourceID: id, Success: wire.RolloutSucceeded}}, nil
			})
		},
	}
	watch.Flags().DurationVar(&a.timeout, "timeout", defaultTimeout, "how long to watch")

	action := func(name, success string) *cobra.Command {
		// Without an id: the newest active rollout; a rollback also
		// undoes one that ended.
		which := "the newest active one"
		if name == wire.RolloutActionRollback {
			which = "the newest one"
		}
		return a.addWait(&cobra.Command{
			Use: name + " [ID]", Short: strings.ToUpper(name[:1]) + name[1:] + " a rollout (default: " + which + ")", Args: rangeArgs(0, 1, "a rollout id or nothing"),
			ValidArgsFunction: a.completeRollouts,
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.write(cmd.Context(), func(ctx context.Context, c *Client) (written, error) {
					id, err := rolloutID(ctx, c, args, name != wire.RolloutActionRollback)
					if err != nil {
						return written{}, err
					}
					var ro wire.Rollout
					if _, err := c.postJSON(ctx, http.MethodPost, "/rollouts/"+pathEsc(id)+"/actions", wire.RolloutActionRequest{Action: name}, &ro); err != nil {
						return written{}, err
					}
					return written{target: Target{Kind: waitRollout, ResourceID: ro.RolloutID, Success: success}, out: func() error {
						fmt.Fprintf(a.env.Stdout, "rollout %s: %s accepted (state %s)\n", ro.RolloutID, name, ro.State)
						return nil
					}}, nil
				})
			},
		})
	}
	r.AddCommand(a.addWait(create), watch,
		action(wire.RolloutActionPause, wire.RolloutPaused),
		action(wire.RolloutActionResume, wire.RolloutSucceeded),
		action(wire.RolloutActionCancel, wire.RolloutCancelled),
		action(wire.RolloutActionRollback, wire.RolloutRolledBack))
	return r
}

// errNoActiveRollout is rolloutID's answer when it looks for an active
// rollout and none is.
var errNoActiveRollout = errors.New("no rollout is active (flowplane ctl get rollouts lists them all)")

// rolloutID is the rollout args name, else the newest one (of those still
// active, with active).
func rolloutID(ctx context.Context, c *Client, args []string, active bool) (string, error) {
	if len(args) == 1 {
		return args[0], nil
	}
	all, err := listAll[wire.Rollout](ctx, c, "/rollouts", nil, 0)
	if err != nil {
		return "", err
	}
	var cands []wire.Rollout
	for _, ro := range all {
		if !active || !slices.Contains(rolloutTerminal, ro.State) {
			cands = append(cands, ro)
		}
	}
	if len(cands) == 0 {
		if active {
			return "", errNoActiveRollout
		}
		return "", fmt.Errorf("there is no rollout")
	}
	return slices.MaxFunc(cands, func(x, y wire.Rollout) int { return x.CreatedAt.Compare(y.CreatedAt.Time) }).RolloutID, nil
}
