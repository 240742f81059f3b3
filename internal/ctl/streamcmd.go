package ctl

import (
	"context"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/flowplane/flowplane/internal/wire"
)

func (a *app) streamCommand() *cobra.Command {
	s := &cobra.Command{
		Use:   "stream",
		Short: "Start, stop or restart a stream on a node",
		Example: `  flowplane ctl stream stop node-a/orders --wait
  flowplane ctl stream start orders --node node-a
  flowplane ctl stream restart node-b/orders --config-version v2 --wait --timeout 30s
  flowplane ctl stream stop orders          # the one node hosting it (409 ambiguous_stream names them otherwise)`,
	}
	for _, action := range []string{"start", "stop", "restart"} {
		var node, version string
		cmd := &cobra.Command{
			Use:               action + " NODE/STREAM | STREAM [--node NODE]",
			Short:             "Ask for a stream to " + action,
			Args:              exactArgs(1, "NODE/STREAM, or STREAM with --node"),
			ValidArgsFunction: a.completeStreams,
			RunE: func(cmd *cobra.Command, args []string) error {
				n, id := node, args[0]
				if n == "" {
					if x, y, err := splitStream(args[0]); err == nil {
						n, id = x, y
					}
				}
				return a.write(cmd.Context(), func(ctx context.Context, c *Client) (written, error) {
					return streamAction(ctx, a, c, n, id, action, version)
				})
			},
		}
		cmd.Flags().StringVar(&node, "node", "", "the node (else NODE/STREAM, or the one node hosting the stream)")
		cmd.Flags().StringVar(&version, "config-version", "", "the configuration version the stream must run")
		_ = cmd.RegisterFlagCompletionFunc("node", a.completeNodes)
		s.AddCommand(a.addWait(cmd))
	}
	return s
}

// streamAction sends one stream action; without a node, the un-targeted
// route, which picks the one node hosting the stream.
func streamAction(ctx context.Context, a *app, c *Client, node, id, action, version string) (written, error) {
	path := "/streams/" + pathEsc(id) + "/" + action
	if node != "" {
		path = "/nodes/" + pathEsc(node) + "/streams/" + pathEsc(id) + "/" + action
	}
	var body any
	if version != "" {
		body = map[string]string{"config_version": version}
	}
	var resp wire.DesiredStateResponse
	rep, err := c.postJSON(ctx, http.MethodPost, path, body, &resp)
	if err != nil {
		return written{}, err
	}
	t := Target{Kind: waitStream, NodeID: resp.NodeID, ResourceID: resp.StreamID, OperationID: rep.operationID(), Generation: resp.Generation}
	return written{target: t, out: func() error {
		fmt.Fprintf(a.env.Stdout, "%s/%s: %s accepted (operation %s, generation %d, desired %s)\n", resp.NodeID, resp.StreamID, action, resp.OperationID, resp.Generation, resp.DesiredState)
		for _, w := range resp.Warnings {
			fmt.Fprintf(a.env.Stderr, "warning: %s/%s: %s\n", resp.NodeID, resp.StreamID, w.Message)
		}
		return nil
	}}, nil
}

func (a *app) nodeCommand() *cobra.Command {
	n := &cobra.Command{
		Use:   "node",
		Short: "Drain a node, put it in or out of maintenance, or forget it",
		Example: `  flowplane ctl node drain node-a
  flowplane ctl node maintenance on node-a
  flowplane ctl node maintenance off node-a
  flowplane ctl node forget node-c`,
	}
	mode := func(use, short, method, suffix string) *cobra.Command {
		return a.addWait(&cobra.Command{
			Use: use + " NODE", Short: short, Args: exactArgs(1, "a node id"), ValidArgsFunction: a.completeNodes,
			RunE: func(cmd *cobra.Command, args []string) error {
				// The mode changes in the request itself: there is nothing
				// to wait for beyond the answer.
				return a.write(cmd.Context(), func(ctx context.Context, c *Client) (written, error) {
					var v wire.NodeView
					if _, err := c.postJSON(ctx, method, "/nodes/"+pathEsc(args[0])+suffix, nil, &v); err != nil {
						return written{}, err
					}
					return written{out: func() error {
						fmt.Fprintf(a.env.Stdout, "%s: mode %s (status %s)\n", v.NodeID, v.Mode, v.Status)
						return nil
					}}, nil
				})
			},
		})
	}
	maint := &cobra.Command{Use: "maintenance", Short: "Put a node in maintenance (on) or make it active again (off)"}
	maint.AddCommand(mode("on", "Suppress new dispatch to the node (maintenance)", http.MethodPost, "/maintenance"),
		mode("off", "Make the node active again (ends a drain too)", http.MethodDelete, "/maintenance"))
	var force bool
	forget := &cobra.Command{
		Use: "forget NODE", Short: "Forget a node: release its id and identity binding (DELETE /api/v1/nodes/{id})", Args: exactArgs(1, "a node id"),
		Long: `Forget a node: its session ends, its identity binding (the node credential
that first registered the id) and registry entry go, its desired state stays.
An online node is refused (409 node_online) unless --force. Run it when a node
lost its state directory and the Hub refuses it with node_identity_mismatch.`,
		ValidArgsFunction: a.completeNodes,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.write(cmd.Context(), func(ctx context.Context, c *Client) (written, error) {
				path := "/nodes/" + pathEsc(args[0])
				if force {
					path += "?force=true"
				}
				if _, err := c.postJSON(ctx, http.MethodDelete, path, nil, nil); err != nil {
					return written{}, err
				}
				return written{out: func() error {
					fmt.Fprintf(a.env.Stdout, "%s: forgotten\n", args[0])
					return nil
				}}, nil
			})
		},
	}
	forget.Flags().BoolVar(&force, "force", false, "forget the node even while it is online")
	n.AddCommand(mode("drain", "Suppress new dispatch to the node (draining)", http.MethodPost, "/drain"), maint, a.addWait(forget))
	return n
}
