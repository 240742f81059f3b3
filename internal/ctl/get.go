package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowplane/flowplane/internal/wire"
)

// filter is a flag of a get that becomes a query parameter.
type filter struct {
	flag, param, help string
}

// collection is one resource kind of get.
type collection struct {
	name, short string
	aliases     []string
	filters     []filter
	// fetch lists the items (decoded into their type) and renders them.
	show func(ctx context.Context, c *Client, q url.Values, limit int, out string, a *app) error
}

func (a *app) collections() []collection {
	return []collection{
		{name: "nodes", short: "registered nodes: status, mode, streams", aliases: []string{"node", "no"},
			filters: []filter{{"status", "status", "online, unavailable or unknown"}, {"mode", "mode", "active, draining or maintenance"}},
			show:    showList("/nodes", nodesTable)},
		{name: "streams", short: "every desired and reported stream: desired, observed, convergence", aliases: []string{"stream", "st"},
			filters: []filter{{"node", "node_id", "node id"}, {"convergence", "convergence", "in_sync, pending, applying, degraded, blocked, unknown"}, {"state", "state", "observed state (none: not reported)"}},
			show:    showList("/streams", streamsTable)},
		{name: "jobs", short: "jobs: placement, desired, observed, convergence", aliases: []string{"job"},
			filters: []filter{{"node", "node_id", "node id"}, {"convergence", "convergence", "convergence"}, {"desired-state", "desired_state", "running or stopped"}},
			show:    showList("/jobs", jobsTable)},
		{name: "operations", short: "operations (intents), newest first", aliases: []string{"operation", "op", "ops"},
			filters: []filter{{"node", "node_id", "node id"}, {"resource", "resource_id", "stream, job or configuration id"}, {"operation", "operation", "operation type"}, {"state", "state", "pending, dispatched, succeeded, failed, ..."}, {"correlation-id", "correlation_id", "correlation id"}},
			show:    showList("/operations", operationsTable)},
		{name: "rollouts", short: "configuration rollouts", aliases: []string{"rollout", "ro"},
			filters: []filter{{"state", "state", "pending, running, paused, succeeded, failed, cancelled, rolled_back"}},
			show:    showList("/rollouts", rolloutsTable)},
		{name: "events", short: "the fleet's event log, newest first (live: flowplane ctl events --follow)", aliases: []string{"event", "ev"},
			filters: eventFilters,
			show:    showList("/events", eventsTable)},
		{name: "audit", short: "the audit log, newest first",
			filters: []filter{{"resource", "resource_id", "resource id"}, {"node", "node_id", "node id"}, {"actor", "actor", "actor"}, {"action", "action", "action"}, {"outcome", "outcome", "accepted or rejected"}},
			show:    showList("/audit", auditTable)},
	}
}

// eventFilters are the event log's filters (get events, events).
var eventFilters = []filter{{"kind", "kind", "event kinds, comma-separated"}, {"node", "node_id", "node id"}, {"resource", "resource_id", "resource id"}, {"operation", "operation_id", "operation id"}, {"correlation-id", "correlation_id", "correlation id"}, {"since-id", "since_id", "only events after this id (with --follow: replayed first, then live)"}}

// showList lists path with every page and renders the items with tab, or
// as JSON/YAML.
func showList[T any](path string, tab func([]T, time.Time) *table) func(ctx context.Context, c *Client, q url.Values, limit int, out string, a *app) error {
	return func(ctx context.Context, c *Client, q url.Values, limit int, out string, a *app) error {
		items, err := listAll[json.RawMessage](ctx, c, path, q, limit)
		if err != nil {
			return err
		}
		typed := make([]T, 0, len(items))
		for _, raw := range items {
			var v T
			if err := json.Unmarshal(raw, &v); err != nil {
				return fmt.Errorf("%s: an item does not decode: %w", path, err)
			}
			typed = append(typed, v)
		}
		switch out {
		case outJSON, outYAML:
			if items == nil {
				items = []json.RawMessage{}
			}
			return encode(a.env.Stdout, out, items)
		}
		return tab(typed, time.Now()).render(a.env.Stdout, out == outWide)
	}
}

func (a *app) getCommand() *cobra.Command {
	g := &cobra.Command{
		Use:   "get",
		Short: "List nodes, streams, jobs, operations, rollouts, events or audit rows",
		Example: `  flowplane ctl get nodes
  flowplane ctl get streams --node node-a --convergence in_sync
  flowplane ctl get jobs -o wide
  flowplane ctl get operations --state failed --limit 20
  flowplane ctl get rollouts -o yaml
  flowplane ctl get events --kind convergence_changed --resource orders
  flowplane ctl get audit --outcome rejected`,
	}
	for _, col := range a.collections() {
		vals := make([]string, len(col.filters))
		sub := &cobra.Command{
			Use:     col.name,
			Aliases: col.aliases,
			Short:   "List " + col.short,
			Args:    exactArgs(0, "no arguments (filters are flags)"),
			RunE: func(cmd *cobra.Command, _ []string) error {
				if err := checkOutput(a.output, true); err != nil {
					return err
				}
				if a.limit < 0 {
					return usagef("--limit must be 0 (no limit) or more")
				}
				q := url.Values{}
				for i, f := range col.filters {
					if vals[i] != "" {
						q.Set(f.param, vals[i])
					}
				}
				c, err := a.client()
				if err != nil {
					return err
				}
				return col.show(cmd.Context(), c, q, a.limit, a.output, a)
			},
		}
		for i, f := range col.filters {
			sub.Flags().StringVar(&vals[i], f.flag, "", f.help)
			if f.param == "node_id" {
				_ = sub.RegisterFlagCompletionFunc(f.flag, a.completeNodes)
			}
		}
		sub.Flags().IntVar(&a.limit, "limit", 0, "at most this many items (0: every page)")
		a.addOutput(sub, "wide, json or yaml")
		g.AddCommand(sub)
	}
	return g
}

func nodesTable(items []wire.NodeView, now time.Time) *table {
	t := &table{header: []string{"NODE", "STATUS", "MODE", "STREAMS", "VERSION", "LAST REPORT"},
		wide: []string{"CONFIG", "DATA ADDRESS", "QUEUED", "IN FLIGHT", "RESTARTS", "CAPABILITIES"}}
	for _, n := range items {
		t.add(n.NodeID, n.Status, n.Mode, fmt.Sprint(n.Streams), n.Version, age(n.LastReportAt, now),
			n.ConfigVersion, n.DataAddress, fmt.Sprint(n.QueuedCommands), fmt.Sprint(n.InFlight), fmt.Sprint(n.Restarts), strings.Join(n.Capabilities, ","))
	}
	return t
}

func streamsTable(items []wire.Stream, now time.Time) *table {
	t := &table{header: []string{"NODE", "STREAM", "DESIRED", "OBSERVED", "CONVERGENCE", "GENERATION"},
		wide: []string{"CONFIG VERSION", "REPORTED", "STALE", "LATEST OPERATION", "LAST ERROR"}}
	for _, s := range items {
		stale := ""
		if s.Observed.Stale {
			stale = "stale"
		}
		op := ""
		if s.LatestOperation != nil {
			op = s.LatestOperation.Operation + " " + s.LatestOperation.State
		}
		t.add(s.NodeID, s.ID, s.Desired.State, s.Observed.State, s.Convergence, itoa(s.Desired.Generation),
			s.Desired.ConfigVersion, age(s.Observed.ReportedAt, now), stale, op, s.Observed.LastError)
	}
	return t
}

func jobsTable(items []wire.Job, now time.Time) *table {
	t := &table{header: []string{"JOB", "NODE", "VERSION", "DESIRED", "OBSERVED", "CONVERGENCE"},
		wide: []string{"PLACEMENT", "GENERATION", "REASON", "LAST CHECKPOINT", "LAST ERROR"}}
	for _, j := range items {
		t.add(j.ID, j.NodeID, fmt.Sprint(j.Version), j.Desired.State, j.Observed.State, j.Convergence,
			j.Placement.Mode, itoa(j.Desired.Generation), j.ConvergenceReason, itoa(j.Observed.LastCheckpoint), j.Observed.LastError)
	}
	return t
}

func operationsTable(items []wire.Operation, now time.Time) *table {
	t := &table{header: []string{"OPERATION", "TYPE", "NODE", "RESOURCE", "STATE", "CONVERGENCE", "AGE"},
		wide: []string{"GENERATION", "ACTOR", "CORRELATION", "FAILURE"}}
	for _, o := range items {
		t.add(o.OperationID, o.Operation, o.NodeID, o.ResourceID, o.State, o.Convergence, age(o.CreatedAt, now),
			itoa(o.Generation), o.Actor, o.CorrelationID, failureText(o.Failure))
	}
	return t
}

func rolloutsTable(items []wire.Rollout, now time.Time) *table {
	t := &table{header: []string{"ROLLOUT", "STATE", "WAVE", "NODES", "FAILURES", "AGE"},
		wide: []string{"VERSION", "SHA256", "ACTOR", "FAILURE"}}
	for _, r := range items {
		t.add(r.RolloutID, r.State, fmt.Sprintf("%d/%d", r.CurrentWave, len(r.Waves)), strings.Join(r.NodeIDs, ","), fmt.Sprint(r.Failures), age(r.CreatedAt, now),
			r.ConfigVersion, shortSHA(r.SHA256), r.Actor, failureText(r.Failure))
	}
	return t
}

func eventsTable(items []wire.Event, now time.Time) *table {
	t := &table{header: []string{"ID", "AGE", "KIND", "NODE", "RESOURCE", "MESSAGE"},
		wide: []string{"OPERATION", "ACTOR", "OUTCOME"}}
	for _, e := range items {
		t.add(fmt.Sprint(e.ID), age(e.OccurredAt, now), e.Kind, e.NodeID, e.ResourceID, e.Message, e.OperationID, e.Actor, e.Outcome)
	}
	return t
}

func auditTable(items []wire.AuditRecord, now time.Time) *table {
	t := &table{header: []string{"ID", "AGE", "ACTOR", "ACTION", "RESOURCE", "NODE", "OUTCOME"},
		wide: []string{"TYPE", "FAILURE", "CORRELATION"}}
	for _, r := range items {
		t.add(fmt.Sprint(r.ID), age(r.OccurredAt, now), r.Actor, r.Action, r.ResourceID, r.NodeID, r.Outcome, r.ResourceType, r.FailureCode, r.CorrelationID)
	}
	return t
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
