package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/flowplane/flowplane/internal/wire"
)

// readSpec reads a job spec file (JSON or YAML) as JSON.
func readSpec(path string) (json.RawMessage, error) {
	if path == "" {
		return nil, usagef("name the spec file with -f spec.json (or .yaml)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		if !json.Valid(b) {
			return nil, fmt.Errorf("%s: not valid JSON", path)
		}
		return b, nil
	case ".yaml", ".yml":
		var v any
		if err := yaml.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return json.Marshal(v)
	}
	return nil, usagef("%s: a spec file ends in .json, .yaml or .yml", path)
}

// specID is the id a spec names.
func specID(spec json.RawMessage) string {
	var s struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(spec, &s)
	return s.ID
}

// jobFlags are the flags the job verbs share.
type jobFlags struct {
	file, placement, mode, node, recovery string
	createState, afterState               string
	nodes                                 []string
	savepoint, strict                     bool
	savepointID, version                  int64
}

func (a *app) jobCommand() *cobra.Command {
	var f jobFlags
	j := &cobra.Command{
		Use:   "job",
		Short: "Validate, create, run, stop, checkpoint, upgrade, roll back, move or plan a job",
		Example: `  flowplane ctl job validate -f spec.json --nodes node-a,node-b --wait
  flowplane ctl job create -f spec.json
  flowplane ctl job plan user-counts
  flowplane ctl job run user-counts --wait
  flowplane ctl job checkpoint user-counts --wait
  flowplane ctl job savepoint user-counts --wait
  flowplane ctl job stop user-counts --savepoint --wait
  flowplane ctl job upgrade user-counts -f spec-v2.json --mode savepoint --strict --wait
  flowplane ctl job rollback user-counts --wait
  flowplane ctl job move user-counts --node node-b --wait`,
	}
	jobArg := func(cmd *cobra.Command) *cobra.Command {
		cmd.ValidArgsFunction = a.completeJobs
		return cmd
	}
	fileFlag := func(cmd *cobra.Command) {
		cmd.Flags().StringVarP(&f.file, "file", "f", "", "the job spec (.json, .yaml)")
	}
	nodesFlag := func(cmd *cobra.Command, help string) {
		cmd.Flags().StringSliceVar(&f.nodes, "nodes", nil, help)
		_ = cmd.RegisterFlagCompletionFunc("nodes", a.completeNodes)
	}

	validate := &cobra.Command{
		Use: "validate -f SPEC", Short: "Check a spec on the Hub and, read-only, on the nodes (creates nothing)",
		Args: exactArgs(0, "no arguments (the spec is -f)"),
		RunE: func(cmd *cobra.Command, _ []string) error { return a.jobValidate(cmd.Context(), f) },
	}
	fileFlag(validate)
	nodesFlag(validate, "nodes to check on (default: every online node)")
	validate.Flags().StringVar(&f.placement, "placement", "", "colocated or split")

	create := &cobra.Command{
		Use: "create -f SPEC", Short: "Create a job (stopped unless --state running)",
		Args: exactArgs(0, "no arguments (the spec is -f)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.write(cmd.Context(), func(ctx context.Context, c *Client) (written, error) {
				return a.jobCreate(ctx, c, f, f.createState)
			})
		},
	}
	fileFlag(create)
	nodesFlag(create, "candidate nodes (default: the Hub places it on the least-loaded)")
	create.Flags().StringVar(&f.placement, "placement", "", "colocated or split")
	create.Flags().StringVar(&f.createState, "state", wire.JobStopped, "desired state: stopped or running")

	run := &cobra.Command{
		Use: "run JOB | run -f SPEC", Short: "Run a job: create it running, or set an existing one's desired state to running",
		Args: rangeArgs(0, 1, "a job id, or -f SPEC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.write(cmd.Context(), func(ctx context.Context, c *Client) (written, error) {
				id := ""
				if len(args) == 1 {
					id = args[0]
				}
				if f.file != "" {
					w, err := a.jobCreate(ctx, c, f, wire.JobRunning)
					var ae *APIError
					if !errors.As(err, &ae) || ae.Code() != "conflict" {
						return w, err
					}
					spec, _ := readSpec(f.file)
					id = specID(spec) // it exists: run it
				}
				if id == "" {
					return written{}, usagef("name the job, or its spec with -f")
				}
				return a.jobDesired(ctx, c, id, wire.JobDesiredRequest{State: wire.JobRunning, Recovery: f.recovery})
			})
		},
	}
	fileFlag(run)
	nodesFlag(run, "candidate nodes when it is created")
	run.Flags().StringVar(&f.placement, "placement", "", "colocated or split, when it is created")
	run.Flags().StringVar(&f.recovery, "recovery", "", "this start's recovery: latest_checkpoint, latest_savepoint, fail or none")

	stop := &cobra.Command{
		Use: "stop JOB", Short: "Stop a job (with --savepoint: take a savepoint first)", Args: exactArgs(1, "a job id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.write(cmd.Context(), func(ctx context.Context, c *Client) (written, error) {
				return a.jobDesired(ctx, c, args[0], wire.JobDesiredRequest{State: wire.JobStopped, Savepoint: f.savepoint})
			})
		},
	}
	stop.Flags().BoolVar(&f.savepoint, "savepoint", false, "take a savepoint before stopping")

	artifact := func(kind string) *cobra.Command {
		return &cobra.Command{
			Use: kind + " JOB", Short: "Trigger a " + kind + " of a running job", Args: exactArgs(1, "a job id"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.write(cmd.Context(), func(ctx context.Context, c *Client) (written, error) {
					var resp wire.JobCommandResponse
					rep, err := c.postJSON(ctx, http.MethodPost, "/jobs/"+pathEsc(args[0])+"/"+kind+"s", nil, &resp)
					if err != nil {
						return written{}, err
					}
					return written{target: Target{Kind: waitOperation, OperationID: rep.operationID()}, out: func() error {
						fmt.Fprintf(a.env.Stdout, "%s: %s requested (operation %s on %s)\n", resp.JobID, kind, resp.OperationID, resp.NodeID)
						return nil
					}}, nil
				})
			},
		}
	}

	upgrade := &cobra.Command{
		Use: "upgrade JOB -f SPEC --mode MODE", Short: "Upgrade a stopped job to a new spec version", Args: exactArgs(1, "a job id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := readSpec(f.file)
			if err != nil {
				return err
			}
			req := wire.JobUpgradeRequest{Spec: spec, Mode: f.mode, Strict: f.strict, DesiredState: f.afterState}
			if f.savepointID > 0 {
				req.Savepoint = &f.savepointID
			}
			return a.write(cmd.Context(), func(ctx context.Context, c *Client) (written, error) {
				return a.jobWrite(ctx, c, "/jobs/"+pathEsc(args[0])+"/upgrades", req, "upgrade")
			})
		},
	}
	fileFlag(upgrade)
	upgrade.Flags().StringVar(&f.mode, "mode", wire.UpgradeSavepoint, "stateless, savepoint or last_state")
	upgrade.Flags().BoolVar(&f.strict, "strict", false, "refuse a state format the new version cannot read")
	upgrade.Flags().Int64Var(&f.savepointID, "savepoint-id", 0, "restore this savepoint (default: the newest)")
	upgrade.Flags().StringVar(&f.afterState, "state", "", "desired state after the upgrade: stopped or running")

	rollback := &cobra.Command{
		Use: "rollback JOB [UPGRADE_ID]", Short: "Roll a job back from an upgrade (default: its newest)", Args: rangeArgs(1, 2, "a job id and optionally an upgrade id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.write(cmd.Context(), func(ctx context.Context, c *Client) (written, error) {
				uid := ""
				if len(args) == 2 {
					uid = args[1]
				} else {
					ups, err := listAll[wire.JobUpgrade](ctx, c, "/jobs/"+pathEsc(args[0])+"/upgrades", nil, 0)
					if err != nil {
						return written{}, err
					}
					i := slices.IndexFunc(ups, func(u wire.JobUpgrade) bool { return u.State == wire.UpgradeApplied })
					if i < 0 {
						return written{}, fmt.Errorf("%s has no upgrade to roll back", args[0])
					}
					uid = ups[i].UpgradeID
				}
				var body any
				if f.afterState != "" {
					body = map[string]string{"desired_state": f.afterState}
				}
				return a.jobWrite(ctx, c, "/jobs/"+pathEsc(args[0])+"/upgrades/"+pathEsc(uid)+"/rollback", body, "rollback")
			})
		},
	}
	rollback.Flags().StringVar(&f.afterState, "state", "", "desired state after the rollback: stopped or running")

	move := &cobra.Command{
		Use: "move JOB [--node NODE | --nodes A,B]", Short: "Move a job to another node (a split job: to other nodes), from its newest checkpoint", Args: exactArgs(1, "a job id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var body any
			switch {
			case f.node != "":
				body = wire.JobMoveRequest{NodeID: f.node}
			case len(f.nodes) > 0:
				body = wire.JobMoveRequest{NodeIDs: f.nodes}
			}
			return a.write(cmd.Context(), func(ctx context.Context, c *Client) (written, error) {
				return a.jobWrite(ctx, c, "/jobs/"+pathEsc(args[0])+"/actions/move", body, "move")
			})
		},
	}
	move.Flags().StringVar(&f.node, "node", "", "the node to move to (default: the Hub picks)")
	nodesFlag(move, "the nodes of a split job")
	_ = move.RegisterFlagCompletionFunc("node", a.completeNodes)

	plan := &cobra.Command{
		Use: "plan JOB", Short: "Show the kernel's plan explanation of a job", Args: exactArgs(1, "a job id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := a.output
			if out == outTable {
				out = outYAML
			}
			if err := checkOutput(out, false); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if f.version > 0 {
				q.Set("version", fmt.Sprint(f.version))
			}
			var plan any
			if err := c.get(cmd.Context(), "/jobs/"+pathEsc(args[0])+"/plan", q, &plan); err != nil {
				return err
			}
			return encode(a.env.Stdout, out, plan)
		},
	}
	plan.Flags().Int64Var(&f.version, "version", 0, "the plan of this spec version (default: the current)")
	a.addOutput(plan, "yaml (default) or json")

	j.AddCommand(validate, a.addWait(create), a.addWait(run), jobArg(a.addWait(stop)),
		jobArg(a.addWait(artifact(wire.ArtifactCheckpoint))), jobArg(a.addWait(artifact(wire.ArtifactSavepoint))),
		jobArg(a.addWait(upgrade)), jobArg(a.addWait(rollback)), jobArg(a.addWait(move)), jobArg(plan))
	run.ValidArgsFunction = a.completeJobs
	a.addWait(validate)
	return j
}

// jobCreate creates a job from f's spec with the desired state.
func (a *app) jobCreate(ctx context.Context, c *Client, f jobFlags, state string) (written, error) {
	spec, err := readSpec(f.file)
	if err != nil {
		return written{}, err
	}
	req := wire.JobCreateRequest{Spec: spec, DesiredState: state, NodeIDs: f.nodes, Placement: f.placement}
	return a.jobWrite(ctx, c, "/jobs", req, "create")
}

// jobDesired sets a job's desired state.
func (a *app) jobDesired(ctx context.Context, c *Client, id string, req wire.JobDesiredRequest) (written, error) {
	what := "run"
	if req.State == wire.JobStopped {
		what = "stop"
	}
	return a.jobWriteMethod(ctx, c, http.MethodPut, "/jobs/"+pathEsc(id)+"/desired-state", req, what)
}

func (a *app) jobWrite(ctx context.Context, c *Client, path string, body any, what string) (written, error) {
	return a.jobWriteMethod(ctx, c, http.MethodPost, path, body, what)
}

// jobWriteMethod sends a job write whose answer is a JobDesiredResponse;
// its wait is the job converging at the new generation.
func (a *app) jobWriteMethod(ctx context.Context, c *Client, method, path string, body any, what string) (written, error) {
	var resp wire.JobDesiredResponse
	rep, err := c.postJSON(ctx, method, path, body, &resp)
	if err != nil {
		return written{}, err
	}
	gen := resp.Generation
	if gen == 0 {
		gen = rep.generation()
	}
	t := Target{Kind: waitJob, ResourceID: resp.JobID, OperationID: rep.operationID(), Generation: gen}
	return written{target: t, out: func() error {
		fmt.Fprintf(a.env.Stdout, "%s: %s accepted (operation %s, generation %d, desired %s on %s)\n", resp.JobID, what, resp.OperationID, resp.Generation, resp.DesiredState, orDash(resp.NodeID))
		for _, w := range resp.Warnings {
			fmt.Fprintf(a.env.Stderr, "warning: %s: %s\n", resp.JobID, w.Message)
		}
		return nil
	}}, nil
}

// jobValidate checks a spec; with --wait it waits for each node's own
// checks (a read-only job_validate operation per node) and shows them.
func (a *app) jobValidate(ctx context.Context, f jobFlags) error {
	spec, err := readSpec(f.file)
	if err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	nodes := f.nodes
	if len(nodes) == 0 {
		all, err := listAll[wire.NodeView](ctx, c, "/nodes", url.Values{"status": {"online"}}, 0)
		if err != nil {
			return err
		}
		for _, n := range all {
			nodes = append(nodes, n.NodeID)
		}
		if len(nodes) == 0 {
			return fmt.Errorf("no node is online to validate on: name them with --nodes")
		}
	}
	var resp wire.JobValidateResponse
	if _, err := c.postJSON(ctx, http.MethodPost, "/jobs/validate", wire.JobValidateRequest{Spec: spec, NodeIDs: nodes, Placement: f.placement}, &resp); err != nil {
		return err
	}
	for _, p := range resp.Problems {
		fmt.Fprintf(a.env.Stdout, "problem: %s: %s\n", p.Path, p.Message)
	}
	valid := resp.Valid
	t := &table{header: []string{"NODE", "VALID", "CHECK", "STATUS", "MESSAGE"}}
	results := map[string]wire.JobValidation{}
	for _, n := range resp.Nodes {
		results[n.NodeID] = n
	}
	if a.wait && valid {
		// Each node's own checks: the result of its job_validate operation.
		for _, node := range slices.Sorted(maps.Keys(resp.Operations)) {
			op, err := a.waitOperation(ctx, c, resp.Operations[node])
			if err != nil {
				return err
			}
			var v wire.JobValidation
			if b, err := json.Marshal(op.Result); err == nil && json.Unmarshal(b, &v) == nil && len(v.Checks) > 0 {
				v.NodeID = node
				results[node] = v
			}
		}
	}
	for _, node := range slices.Sorted(maps.Keys(results)) {
		v := results[node]
		if !v.Valid && !v.Pending {
			valid = false
		}
		for _, ch := range v.Checks {
			t.add(node, fmt.Sprint(v.Valid), ch.Check, ch.Status, joinNonEmpty(ch.Path, ch.Message))
		}
	}
	fmt.Fprintf(a.env.Stdout, "valid: %t\n", valid)
	if err := t.render(a.env.Stdout, false); err != nil {
		return err
	}
	if !valid {
		return &exitError{code: ExitFailed, err: errors.New("the spec is not valid")}
	}
	return nil
}

// waitOperation waits (within --timeout) for an operation to finish and
// returns it; a failed operation is an error.
func (a *app) waitOperation(ctx context.Context, c *Client, id string) (wire.Operation, error) {
	var op wire.Operation
	ctx, cancel := context.WithTimeoutCause(ctx, a.timeout, errTimedOut)
	defer cancel()
	sub, err := c.subscribe(ctx, url.Values{"operation_id": {id}}, live)
	if err != nil {
		return op, a.timedOut(ctx, err)
	}
	defer sub.close()
	if err := a.follow(ctx, c, sub, Target{Kind: waitOperation, OperationID: id}); err != nil {
		return op, err
	}
	err = c.get(ctx, "/operations/"+pathEsc(id), nil, &op)
	return op, err
}
