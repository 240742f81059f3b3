package ctl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowplane/flowplane/internal/wire"
)

// completionTimeout bounds a completion's calls: a shell waits for it.
const completionTimeout = 3 * time.Second

func (a *app) completionCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print the shell completion script",
		Long: `completion prints a script that completes flowplane ctl's commands, flags
and the ids of nodes, streams (NODE/STREAM), jobs, operations and rollouts,
read from the Hub (nothing is completed when the Hub cannot be reached).`,
		Example: `  source <(flowplane ctl completion bash)                                  # bash, this shell
  flowplane ctl completion bash > ~/.local/share/bash-completion/completions/flowplane
  flowplane ctl completion zsh > "${fpath[1]}/_flowplane"                  # zsh
  flowplane ctl completion fish > ~/.config/fish/completions/flowplane.fish`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("completion takes one shell: bash, zsh or fish")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			w := a.env.Stdout
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(w, true)
			case "zsh":
				return root.GenZshCompletion(w)
			case "fish":
				return root.GenFishCompletion(w, true)
			}
			return usagef("completion: unknown shell %q (bash, zsh or fish)", args[0])
		},
	}
}

// completeWith lists ids from the Hub, quietly nothing on any error.
func (a *app) completeWith(cmd *cobra.Command, list func(ctx context.Context, c *Client) ([]string, error)) ([]string, cobra.ShellCompDirective) {
	c, err := a.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	ids, err := list(ctx, c)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return ids, cobra.ShellCompDirectiveNoFileComp
}

func (a *app) completeNodes(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	return a.completeWith(cmd, func(ctx context.Context, c *Client) ([]string, error) {
		ns, err := listAll[wire.NodeView](ctx, c, "/nodes", nil, 0)
		var ids []string
		for _, n := range ns {
			ids = append(ids, n.NodeID)
		}
		return ids, err
	})
}

func (a *app) completeStreams(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.completeWith(cmd, func(ctx context.Context, c *Client) ([]string, error) {
		ss, err := listAll[wire.Stream](ctx, c, "/streams", nil, 0)
		var ids []string
		for _, s := range ss {
			ids = append(ids, s.NodeID+"/"+s.ID)
		}
		return ids, err
	})
}

func (a *app) completeJobs(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.completeWith(cmd, func(ctx context.Context, c *Client) ([]string, error) {
		js, err := listAll[wire.Job](ctx, c, "/jobs", nil, 0)
		var ids []string
		for _, j := range js {
			ids = append(ids, fmt.Sprintf("%s\t%s on %s", j.ID, orDash(j.Desired.State), orDash(j.NodeID)))
		}
		return ids, err
	})
}

func (a *app) completeRollouts(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.completeWith(cmd, func(ctx context.Context, c *Client) ([]string, error) {
		rs, err := listAll[wire.Rollout](ctx, c, "/rollouts", nil, 100)
		var ids []string
		for _, r := range rs {
			ids = append(ids, r.RolloutID+"\t"+r.State+" "+strings.Join(r.NodeIDs, ","))
		}
		return ids, err
	})
}

func (a *app) completeOperations(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.completeWith(cmd, func(ctx context.Context, c *Client) ([]string, error) {
		ops, err := listAll[wire.Operation](ctx, c, "/operations", nil, 100)
		var ids []string
		for _, o := range ops {
			ids = append(ids, o.OperationID+"\t"+o.Operation+" "+o.NodeID+"/"+o.ResourceID+" "+o.State)
		}
		return ids, err
	})
}
