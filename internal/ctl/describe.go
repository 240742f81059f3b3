package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowplane/flowplane/internal/wire"
)

// recentEvents is how many events a describe shows.
const recentEvents = 10

func (a *app) describeCommand() *cobra.Command {
	d := &cobra.Command{
		Use:   "describe",
		Short: "Show one node, stream, job, operation or rollout: desired, observed and convergence side by side",
		Example: `  flowplane ctl describe node node-a
  flowplane ctl describe stream node-a/orders
  flowplane ctl describe job user-counts
  flowplane ctl describe operation 0193...
  flowplane ctl describe rollout 0193... -o yaml`,
	}
	add := func(use, short string, comp cobra.CompletionFunc, run func(ctx context.Context, c *Client, id string) (any, func(io.Writer) error, error)) {
		cmd := &cobra.Command{
			Use: use, Short: short, Args: exactArgs(1, "one id"), ValidArgsFunction: comp,
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := checkOutput(a.output, false); err != nil {
					return err
				}
				c, err := a.client()
				if err != nil {
					return err
				}
				v, text, err := run(cmd.Context(), c, args[0])
				if err != nil {
					return err
				}
				if a.output != outTable {
					return encode(a.env.Stdout, a.output, v)
				}
				return text(a.env.Stdout)
			},
		}
		a.addOutput(cmd, "json or yaml")
		d.AddCommand(cmd)
	}
	add("node NODE", "Show a node, its streams, jobs and configuration", a.completeNodes, describeNode)
	add("stream NODE/STREAM", "Show a stream's desired and observed state and convergence", a.completeStreams, describeStream)
	add("job JOB", "Show a job: placement, desired and observed state, tasks", a.completeJobs, describeJob)
	add("operation ID", "Show an operation: state, failure, result", a.completeOperations, describeOperation)
	add("rollout ID", "Show a rollout: waves and each node's phase", a.completeRollouts, describeRollout)
	return d
}

// kv writes aligned "key: value" lines.
type kv struct{ tw *tabwriter.Writer }

func newKV(w io.Writer) *kv { return &kv{tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)} }

func (k *kv) row(cells ...string) {
	for i, c := range cells {
		if c == "" && i > 0 {
			cells[i] = "-"
		}
	}
	fmt.Fprintln(k.tw, strings.Join(cells, "\t"))
}

func (k *kv) flush() error { return k.tw.Flush() }

// section writes a titled table.
func section(w io.Writer, title string, t *table) error {
	fmt.Fprintf(w, "\n%s:\n", title)
	if len(t.rows) == 0 {
		fmt.Fprintln(w, "  (none)")
		return nil
	}
	return t.render(indent(w), false)
}

// indenter prefixes every non-empty line with two spaces.
type indenter struct {
	w   io.Writer
	mid bool // within a line
}

func indent(w io.Writer) *indenter { return &indenter{w: w} }

func (i *indenter) Write(p []byte) (int, error) {
	b := make([]byte, 0, len(p)+16)
	for _, c := range p {
		if !i.mid && c != '\n' {
			b = append(b, ' ', ' ')
		}
		b = append(b, c)
		i.mid = c != '\n'
	}
	if _, err := i.w.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}

// events lists the newest events matching q.
func events(ctx context.Context, c *Client, q url.Values) ([]wire.Event, error) {
	return listAll[wire.Event](ctx, c, "/events", q, recentEvents)
}

// viewWithEvents reads the view at path and the newest events matching q.
func viewWithEvents[T any](ctx context.Context, c *Client, path string, q url.Values) (T, []wire.Event, error) {
	var v T
	if err := c.get(ctx, path, nil, &v); err != nil {
		return v, nil, err
	}
	evs, err := events(ctx, c, q)
	return v, evs, err
}

// splitStream parses NODE/STREAM.
func splitStream(s string) (node, stream string, err error) {
	node, stream, ok := strings.Cut(s, "/")
	if !ok || node == "" || stream == "" || strings.Contains(stream, "/") {
		return "", "", usagef("%q: want NODE/STREAM", s)
	}
	return node, stream, nil
}

type nodeDescription struct {
	Node          json.RawMessage         `json:"node"`
	Streams       []wire.Stream           `json:"streams"`
	Jobs          []wire.Job              `json:"jobs"`
	Configuration *wire.NodeConfiguration `json:"configuration,omitempty"`
	Events        []wire.Event            `json:"recent_events"`
}

func describeNode(ctx context.Context, c *Client, id string) (any, func(io.Writer) error, error) {
	var d nodeDescription
	if err := c.get(ctx, "/nodes/"+pathEsc(id), nil, &d.Node); err != nil {
		return nil, nil, err
	}
	var n wire.NodeView
	if err := json.Unmarshal(d.Node, &n); err != nil {
		return nil, nil, err
	}
	q := url.Values{"node_id": {id}}
	var err error
	if d.Streams, err = listAll[wire.Stream](ctx, c, "/streams", q, 0); err != nil {
		return nil, nil, err
	}
	if d.Jobs, err = listAll[wire.Job](ctx, c, "/jobs", q, 0); err != nil {
		return nil, nil, err
	}
	var nc wire.NodeConfiguration
	if err := c.get(ctx, "/nodes/"+pathEsc(id)+"/configuration", nil, &nc); err == nil {
		d.Configuration = &nc
	}
	if d.Events, err = events(ctx, c, q); err != nil {
		return nil, nil, err
	}
	text := func(w io.Writer) error {
		now := time.Now()
		k := newKV(w)
		k.row("Node:", n.NodeID)
		k.row("Status:", n.Status)
		k.row("Mode:", n.Mode)
		k.row("Version:", n.Version)
		k.row("Last report:", ago(age(n.LastReportAt, now)))
		k.row("Restarts:", fmt.Sprint(n.Restarts))
		k.row("Commands:", fmt.Sprintf("%d queued, %d in flight", n.QueuedCommands, n.InFlight))
		k.row("Data address:", n.DataAddress)
		k.row("Capabilities:", capabilities(n.Capabilities))
		if err := k.flush(); err != nil {
			return err
		}
		if d.Configuration != nil {
			if err := configurationText(w, d.Configuration, now); err != nil {
				return err
			}
		}
		if err := section(w, "Streams", streamsTable(d.Streams, now)); err != nil {
			return err
		}
		if err := section(w, "Jobs", jobsTable(d.Jobs, now)); err != nil {
			return err
		}
		return section(w, "Recent events", eventsTable(d.Events, now))
	}
	return d, text, nil
}

// configurationText shows a node's configuration, desired and reported side by side.
func configurationText(w io.Writer, nc *wire.NodeConfiguration, now time.Time) error {
	fmt.Fprintln(w, "\nConfiguration:")
	k := newKV(indent(w))
	k.row("", "DESIRED", "REPORTED")
	var dv, dg, rv, rg, rn, rat string
	if nc.Desired != nil {
		dv, dg = nc.Desired.ConfigVersion, itoa(nc.Desired.Generation)
	}
	if nc.Reported != nil {
		rv, rg, rn, rat = nc.Reported.HubVersion, itoa(nc.Reported.Generation), nc.Reported.NodeVersion, ago(age(nc.Reported.ReportedAt, now))
		if nc.Reported.Stale {
			rat += " (stale)"
		}
	}
	k.row("Hub version:", dv, rv)
	k.row("Generation:", dg, rg)
	k.row("Node version:", "", rn)
	k.row("Reported:", "", rat)
	k.row("Convergence:", withReason(nc.Convergence, nc.ConvergenceReason))
	k.row("Operation:", nc.OperationID)
	return k.flush()
}

type streamDescription struct {
	Stream wire.Stream  `json:"stream"`
	Events []wire.Event `json:"recent_events"`
}

func describeStream(ctx context.Context, c *Client, arg string) (any, func(io.Writer) error, error) {
	node, id, err := splitStream(arg)
	if err != nil {
		return nil, nil, err
	}
	var d streamDescription
	if d.Stream, d.Events, err = viewWithEvents[wire.Stream](ctx, c, "/nodes/"+pathEsc(node)+"/streams/"+pathEsc(id), url.Values{"node_id": {node}, "resource_id": {id}}); err != nil {
		return nil, nil, err
	}
	text := func(w io.Writer) error {
		now := time.Now()
		s := d.Stream
		k := newKV(w)
		k.row("Stream:", s.NodeID+"/"+s.ID)
		k.row("Convergence:", s.Convergence)
		k.row("Authority:", s.Authority)
		k.row("", "DESIRED", "OBSERVED")
		k.row("State:", s.Desired.State, s.Observed.State)
		k.row("Generation:", itoa(s.Desired.Generation), itoa(s.Observed.Generation))
		k.row("Config version:", s.Desired.ConfigVersion, s.Observed.ConfigVersion)
		k.row("Action:", s.Desired.ActionID, s.Observed.ActionID)
		rep := ago(age(s.Observed.ReportedAt, now))
		if s.Observed.Stale {
			rep += " (stale)"
		}
		k.row("Reported:", "", rep)
		k.row("Last error:", "", s.Observed.LastError)
		k.row("Counters:", "", fmt.Sprintf("received %d, sent %d, errors %d, dropped %d", s.Observed.Counters.Received, s.Observed.Counters.Sent, s.Observed.Counters.Errors, s.Observed.Counters.Dropped))
		if err := k.flush(); err != nil {
			return err
		}
		if err := latestOperation(w, s.LatestOperation); err != nil {
			return err
		}
		return section(w, "Recent events", eventsTable(d.Events, now))
	}
	return d, text, nil
}

func latestOperation(w io.Writer, op *wire.Operation) error {
	if op == nil {
		return nil
	}
	fmt.Fprintln(w, "\nLatest operation:")
	k := newKV(indent(w))
	k.row("ID:", op.OperationID)
	k.row("Type:", op.Operation)
	k.row("State:", op.State)
	k.row("Generation:", itoa(op.Generation))
	k.row("Actor:", op.Actor)
	if op.Failure != nil {
		k.row("Failure:", failureText(op.Failure))
	}
	return k.flush()
}

type jobDescription struct {
	Job    wire.JobDetail `json:"job"`
	Events []wire.Event   `json:"recent_events"`
}

func describeJob(ctx context.Context, c *Client, id string) (any, func(io.Writer) error, error) {
	var d jobDescription
	var err error
	if d.Job, d.Events, err = viewWithEvents[wire.JobDetail](ctx, c, "/jobs/"+pathEsc(id)+"/detail", url.Values{"resource_id": {id}}); err != nil {
		return nil, nil, err
	}
	text := func(w io.Writer) error {
		now := time.Now()
		j := d.Job
		k := newKV(w)
		k.row("Job:", j.ID)
		k.row("Node:", j.NodeID)
		place := j.Placement.Mode
		if len(j.Placement.Nodes) > 0 {
			place += " on " + strings.Join(j.Placement.Nodes, ", ")
		}
		k.row("Placement:", withReason(place, j.Placement.Strategy))
		k.row("Convergence:", withReason(j.Convergence, j.ConvergenceReason))
		k.row("", "DESIRED", "OBSERVED")
		k.row("State:", j.Desired.State, j.Observed.State)
		k.row("Generation:", itoa(j.Desired.Generation), itoa(j.Observed.Generation))
		k.row("Version:", fmt.Sprint(j.Desired.Version), itoa(int64(j.Observed.Version)))
		rep := ago(age(j.Observed.ReportedAt, now))
		if j.Observed.Stale {
			rep += " (stale)"
		}
		k.row("Reported:", "", rep)
		k.row("Last checkpoint:", "", itoa(j.Observed.LastCheckpoint))
		k.row("Restored from:", "", j.Observed.RestoredFrom)
		k.row("Last error:", "", j.Observed.LastError)
		k.row("Tasks observed:", fmt.Sprintf("%d of %d", j.TasksObserved, j.TasksTotal))
		if err := k.flush(); err != nil {
			return err
		}
		tasks := &table{header: []string{"TASK", "NODE", "STATE", "RECORDS IN", "RECORDS OUT", "OPERATORS"}}
		for _, t := range j.Assignment {
			tasks.add(t.TaskID, t.NodeID, t.State, itoa(t.RecordsIn), itoa(t.RecordsOut), strings.Join(t.Operators, ","))
		}
		if err := section(w, "Tasks", tasks); err != nil {
			return err
		}
		if err := latestOperation(w, j.LatestOperation); err != nil {
			return err
		}
		return section(w, "Recent events", eventsTable(d.Events, now))
	}
	return d, text, nil
}

type operationDescription struct {
	Operation wire.Operation `json:"operation"`
	Events    []wire.Event   `json:"recent_events"`
}

func describeOperation(ctx context.Context, c *Client, id string) (any, func(io.Writer) error, error) {
	var d operationDescription
	var err error
	if d.Operation, d.Events, err = viewWithEvents[wire.Operation](ctx, c, "/operations/"+pathEsc(id), url.Values{"operation_id": {id}}); err != nil {
		return nil, nil, err
	}
	text := func(w io.Writer) error {
		now := time.Now()
		op := d.Operation
		k := newKV(w)
		k.row("Operation:", op.OperationID)
		k.row("Type:", op.Operation)
		k.row("Node:", op.NodeID)
		k.row("Resource:", op.ResourceID)
		k.row("State:", op.State)
		k.row("Convergence:", op.Convergence)
		k.row("Generation:", itoa(op.Generation))
		k.row("Actor:", op.Actor)
		k.row("Correlation:", op.CorrelationID)
		k.row("Created:", ago(age(op.CreatedAt, now)))
		k.row("Finished:", ago(age(op.FinishedAt, now)))
		k.row("Retries:", fmt.Sprint(op.Retry.Count))
		k.row("Failure:", failureText(op.Failure))
		if err := k.flush(); err != nil {
			return err
		}
		if op.Result != nil {
			fmt.Fprintln(w, "\nResult:")
			if err := encode(indent(w), outYAML, op.Result); err != nil {
				return err
			}
		}
		return section(w, "Events", eventsTable(d.Events, now))
	}
	return d, text, nil
}

type rolloutDescription struct {
	Rollout wire.Rollout `json:"rollout"`
	Events  []wire.Event `json:"recent_events"`
}

func describeRollout(ctx context.Context, c *Client, id string) (any, func(io.Writer) error, error) {
	var d rolloutDescription
	var err error
	if d.Rollout, d.Events, err = viewWithEvents[wire.Rollout](ctx, c, "/rollouts/"+pathEsc(id), url.Values{"resource_id": {id}}); err != nil {
		return nil, nil, err
	}
	text := func(w io.Writer) error {
		now := time.Now()
		r := d.Rollout
		k := newKV(w)
		k.row("Rollout:", r.RolloutID)
		k.row("State:", r.State)
		k.row("Wave:", fmt.Sprintf("%d of %d", r.CurrentWave, len(r.Waves)))
		k.row("Failures:", fmt.Sprintf("%d (at most %d)", r.Failures, r.MaxFailures))
		k.row("Gate:", fmt.Sprintf("timeout %s, soak %s, pause %s", ms(r.GateTimeoutMS), ms(r.SoakMS), ms(r.PauseMS)))
		k.row("SHA-256:", r.SHA256)
		k.row("Actor:", r.Actor)
		k.row("Created:", ago(age(r.CreatedAt, now)))
		k.row("Failure:", failureText(r.Failure))
		if err := k.flush(); err != nil {
			return err
		}
		nodes := &table{header: []string{"NODE", "WAVE", "PHASE", "BEFORE", "TARGET", "CONVERGENCE", "FAILURE"}}
		for _, n := range r.Nodes {
			nodes.add(n.NodeID, fmt.Sprint(n.Wave), n.Phase, n.VersionBefore, n.VersionTarget, n.Convergence, failureText(n.Failure))
		}
		if err := section(w, "Nodes", nodes); err != nil {
			return err
		}
		return section(w, "Recent events", eventsTable(d.Events, now))
	}
	return d, text, nil
}

func ago(s string) string {
	if s == "" {
		return ""
	}
	return s + " ago"
}

func ms(n int64) string { return (time.Duration(n) * time.Millisecond).String() }

// withReason is "value (reason)", or value alone.
func withReason(value, reason string) string {
	if reason == "" {
		return value
	}
	return value + " (" + reason + ")"
}

// capabilities lists a node's control capabilities and counts its
// components (kind:name), which are many and shown by -o yaml.
func capabilities(all []string) string {
	var named []string
	components := 0
	for _, c := range all {
		if strings.Contains(c, ":") {
			components++
			continue
		}
		named = append(named, c)
	}
	s := strings.Join(named, ", ")
	if components > 0 {
		s += fmt.Sprintf(" (and %d components)", components)
	}
	return strings.TrimPrefix(s, " ")
}
