package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flowplane/flowplane/internal/wire"
)

// configDocument reads a configuration file; its format comes from its
// extension.
func configDocument(path string) (wire.ConfigDocument, error) {
	if path == "" {
		return wire.ConfigDocument{}, usagef("name the configuration file with -f fleet.yaml")
	}
	var format string
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		format = "yaml"
	case ".json":
		format = "json"
	case ".toml":
		format = "toml"
	default:
		return wire.ConfigDocument{}, usagef("%s: a configuration file ends in .yaml, .yml, .json or .toml", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return wire.ConfigDocument{}, err
	}
	return wire.ConfigDocument{Format: format, Content: string(b)}, nil
}

// configBody is the request of a validate or apply: the raw document for
// YAML and TOML, the {format, content} envelope for JSON.
func configBody(doc wire.ConfigDocument) request {
	switch doc.Format {
	case "yaml":
		return request{body: []byte(doc.Content), contentType: "application/yaml"}
	case "toml":
		return request{body: []byte(doc.Content), contentType: "application/toml"}
	}
	b, _ := json.Marshal(doc)
	return request{body: b, contentType: "application/json"}
}

func (a *app) configCommand() *cobra.Command {
	var file, from, to, version string
	cfg := &cobra.Command{
		Use:   "config",
		Short: "Validate, diff, apply or roll back a node's configuration through the Hub",
		Example: `  flowplane ctl config validate node-a -f fleet.yaml --wait
  flowplane ctl config apply node-a -f fleet.yaml --wait
  flowplane ctl config diff node-a --wait
  flowplane ctl config rollback node-a v1 --wait
  flowplane ctl get rollouts   # several nodes in waves: flowplane ctl rollout create`,
	}
	validate := &cobra.Command{
		Use: "validate NODE -f FILE", Short: "Check a configuration on a node, read-only (with --wait: print the node's answer)", Args: exactArgs(1, "a node id"),
		ValidArgsFunction: a.completeNodes,
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := configDocument(file)
			if err != nil {
				return err
			}
			req := configBody(doc)
			req.method, req.path = http.MethodPost, "/nodes/"+pathEsc(args[0])+"/configuration/validate"
			return a.configCommandOp(cmd.Context(), req, "validate", printValidation)
		},
	}
	validate.Flags().StringVarP(&file, "file", "f", "", "the configuration (.yaml, .yml, .json, .toml)")
	diff := &cobra.Command{
		Use: "diff NODE [--from V] [--to V]", Short: "Diff two Hub versions of a node's configuration, on the node (with --wait: print it)", Args: exactArgs(1, "a node id"),
		ValidArgsFunction: a.completeNodes,
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if from != "" {
				q.Set("from", from)
			}
			if to != "" {
				q.Set("to", to)
			}
			req := request{method: http.MethodGet, path: "/nodes/" + pathEsc(args[0]) + "/configuration/diff", query: q}
			return a.configCommandOp(cmd.Context(), req, "diff", printDiff)
		},
	}
	diff.Flags().StringVar(&from, "from", "", "Hub version (default: the one the node reports)")
	diff.Flags().StringVar(&to, "to", "", "Hub version (default: the desired one)")
	apply := &cobra.Command{
		Use: "apply NODE -f FILE | --version V", Short: "Make a configuration (a new version, or one the Hub keeps) the node's desired one", Args: exactArgs(1, "a node id"),
		ValidArgsFunction: a.completeNodes,
		RunE: func(cmd *cobra.Command, args []string) error {
			var req request
			switch {
			case version != "" && file != "":
				return usagef("give -f FILE or --version V, not both")
			case version != "":
				b, _ := json.Marshal(wire.ConfigApplyRequest{ConfigVersion: version})
				req = request{body: b, contentType: "application/json"}
			default:
				doc, err := configDocument(file)
				if err != nil {
					return err
				}
				req = configBody(doc)
			}
			req.method, req.path = http.MethodPost, "/nodes/"+pathEsc(args[0])+"/configuration/apply"
			return a.write(cmd.Context(), func(ctx context.Context, c *Client) (written, error) {
				return a.configWrite(ctx, c, args[0], req, "apply")
			})
		},
	}
	apply.Flags().StringVarP(&file, "file", "f", "", "the configuration (.yaml, .yml, .json, .toml)")
	apply.Flags().StringVar(&version, "version", "", "a version the Hub keeps for the node")
	rollback := &cobra.Command{
		Use: "rollback NODE VERSION", Short: "Make an earlier version the node's desired configuration again", Args: exactArgs(2, "a node id and a version"),
		ValidArgsFunction: a.completeNodes,
		RunE: func(cmd *cobra.Command, args []string) error {
			req := request{method: http.MethodPost, path: "/nodes/" + pathEsc(args[0]) + "/configuration/rollback/" + pathEsc(args[1])}
			return a.write(cmd.Context(), func(ctx context.Context, c *Client) (written, error) {
				return a.configWrite(ctx, c, args[0], req, "rollback")
			})
		},
	}
	cfg.AddCommand(a.addWait(validate), a.addWait(diff), a.addWait(apply), a.addWait(rollback))
	return cfg
}

// configWrite sends an apply or rollback; its wait is the node's
// configuration converging at the new generation.
func (a *app) configWrite(ctx context.Context, c *Client, node string, req request, what string) (written, error) {
	var op wire.Operation
	rep, err := c.do(ctx, req, &op)
	if err != nil {
		return written{}, err
	}
	gen := rep.generation()
	if gen == 0 {
		gen = op.Generation
	}
	t := Target{Kind: waitConfiguration, NodeID: node, OperationID: rep.operationID(), Generation: gen}
	return written{target: t, out: func() error {
		fmt.Fprintf(a.env.Stdout, "%s configuration: %s accepted (operation %s, generation %d)\n", node, what, op.OperationID, gen)
		return nil
	}}, nil
}

// configCommandOp sends a read-only configuration command (validate,
// diff); with --wait it waits for the node's answer and prints it.
func (a *app) configCommandOp(ctx context.Context, req request, what string, show func(*app, any) error) error {
	var id string
	err := a.write(ctx, func(ctx context.Context, c *Client) (written, error) {
		var op wire.Operation
		rep, err := c.do(ctx, req, &op)
		if err != nil {
			return written{}, err
		}
		id = rep.operationID()
		return written{target: Target{Kind: waitOperation, OperationID: id}, out: func() error {
			if !a.wait {
				fmt.Fprintf(a.env.Stdout, "%s requested (operation %s); flowplane ctl describe operation %s shows the node's answer\n", what, id, id)
			}
			return nil
		}}, nil
	})
	if err != nil || !a.wait {
		return err
	}
	// The wait succeeded: the operation's result is the node's answer.
	c, err := a.client()
	if err != nil {
		return err
	}
	var op wire.Operation
	if err := c.get(ctx, "/operations/"+pathEsc(id), nil, &op); err != nil {
		return err
	}
	return show(a, op.Result)
}

// printValidation prints a node's {valid, errors}; invalid is exit 1.
func printValidation(a *app, result any) error {
	var v struct {
		Valid  bool `json:"valid"`
		Errors []struct {
			Path, Message string
		} `json:"errors"`
	}
	b, _ := json.Marshal(result)
	_ = json.Unmarshal(b, &v)
	fmt.Fprintf(a.env.Stdout, "valid: %t\n", v.Valid)
	for _, e := range v.Errors {
		fmt.Fprintf(a.env.Stdout, "  %s: %s\n", e.Path, e.Message)
	}
	if !v.Valid {
		return &exitError{code: ExitFailed, err: fmt.Errorf("the configuration is not valid")}
	}
	return nil
}

// printDiff prints a node's diff: the unified text and its summary.
func printDiff(a *app, result any) error {
	var d struct {
		From, To string
		Unified  string `json:"unified"`
		Summary  map[string][]string
	}
	b, _ := json.Marshal(result)
	_ = json.Unmarshal(b, &d)
	fmt.Fprint(a.env.Stdout, d.Unified)
	for _, k := range []string{"added", "removed", "changed", "unchanged"} {
		if len(d.Summary[k]) > 0 {
			fmt.Fprintf(a.env.Stdout, "%s: %s\n", k, strings.Join(d.Summary[k], ", "))
		}
	}
	return nil
}
