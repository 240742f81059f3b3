package ctl

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) eventsCommand() *cobra.Command {
	var follow bool
	vals := make([]string, len(eventFilters))
	e := &cobra.Command{
		Use:   "events",
		Short: "Show the fleet's events; --follow streams them live",
		Long: `events lists the Hub's event log (newest first), or with --follow streams
new events as they happen (Server-Sent Events), reconnecting after the last
event seen when the connection drops. A line "resync" means events were
lost: re-read what you derived from them.`,
		Example: `  flowplane ctl events
  flowplane ctl events --follow
  flowplane ctl events --follow --kind convergence_changed,command_failed --node node-a
  flowplane ctl events --follow -o json`,
		Args: exactArgs(0, "no arguments (filters are flags)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(a.output, true); err != nil {
				return err
			}
			q := url.Values{}
			for i, f := range eventFilters {
				if vals[i] != "" {
					q.Set(f.param, vals[i])
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if !follow {
				return showList("/events", eventsTable)(cmd.Context(), c, q, a.limit, a.output, a)
			}
			ctx := cmd.Context()
			sub, err := c.subscribe(ctx, q)
			if err != nil {
				return err
			}
			defer sub.close()
			for {
				select {
				case ev := <-sub.events:
					switch {
					case a.output == outJSON || a.output == outYAML:
						if err := encode(a.env.Stdout, a.output, ev); err != nil {
							return err
						}
						if a.output == outYAML {
							fmt.Fprintln(a.env.Stdout, "---")
						}
					case ev.Kind == kindResync:
						fmt.Fprintln(a.env.Stdout, "resync: events were lost; re-read the resources")
					default:
						line := fmt.Sprintf("%-6d %s  %-24s %-10s %-16s %s", ev.ID, ev.OccurredAt.Local().Format(time.TimeOnly), ev.Kind, orDash(ev.NodeID), orDash(ev.ResourceID), ev.Message)
						fmt.Fprintln(a.env.Stdout, strings.TrimRight(line, " "))
					}
				case err := <-sub.errc:
					return err
				case <-ctx.Done():
					return nil
				}
			}
		},
	}
	for i, f := range eventFilters {
		e.Flags().StringVar(&vals[i], f.flag, "", f.help)
	}
	e.Flags().BoolVarP(&follow, "follow", "f", false, "stream new events live")
	e.Flags().IntVar(&a.limit, "limit", 0, "at most this many events (0: every page; not with --follow)")
	_ = e.RegisterFlagCompletionFunc("node", a.completeNodes)
	a.addOutput(e, "wide, json or yaml")
	return e
}
