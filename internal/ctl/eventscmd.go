package ctl

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) eventsCommand() *cobra.Command {
	var follow bool
	var followFor time.Duration // not a.timeout: its default differs
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
  flowplane ctl events --follow -o json
  flowplane ctl events --follow --kind rollout_changed --limit 1 --timeout 1m   # the next one, or exit 3`,
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
			if followFor > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeoutCause(ctx, followFor, errTimedOut)
				defer cancel()
			}
			// A stream's start is the Last-Event-ID, which replays even
			// from 0 (since_id 0 would mean "only new events").
			from := int64(live)
			if v := q.Get("since_id"); v != "" {
				if from, err = strconv.ParseInt(v, 10, 64); err != nil || from < 0 {
					return usagef("--since-id %q: want an event id (0: every retained event)", v)
				}
				q.Del("since_id")
			}
			sub, err := c.subscribeRetrying(ctx, q, from, true)
			if err != nil {
				return err
			}
			defer sub.close()
			seen := 0
			for {
				select {
				case ev := <-sub.events:
					if ev.Kind != kindResync {
						seen++
					}
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
					if a.limit > 0 && seen >= a.limit {
						return nil
					}
				case err := <-sub.errc:
					return err
				case <-ctx.Done():
					if context.Cause(ctx) == errTimedOut {
						return &exitError{code: ExitTimedOut, err: fmt.Errorf("events: %d events in %s", seen, followFor)}
					}
					return nil
				}
			}
		},
	}
	for i, f := range eventFilters {
		e.Flags().StringVar(&vals[i], f.flag, "", f.help)
	}
	e.Flags().BoolVarP(&follow, "follow", "f", false, "stream new events live")
	e.Flags().IntVar(&a.limit, "limit", 0, "at most this many events (0: every page; with --follow: until interrupted)")
	e.Flags().DurationVar(&followFor, "timeout", 0, "with --follow: stop after this long (exit 3 when --limit events did not come); 0: until interrupted")
	_ = e.RegisterFlagCompletionFunc("node", a.completeNodes)
	a.addOutput(e, "wide, json or yaml")
	return e
}
