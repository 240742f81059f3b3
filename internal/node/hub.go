package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/node/history"
	"github.com/flowplane/flowplane/internal/policy"
	"github.com/flowplane/flowplane/internal/secretref"
	"github.com/flowplane/flowplane/internal/wire"
)

// Configuration commands from the Hub (wire.CommandConfigValidate,
// CommandConfigDiff, CommandConfigApply), carried out for the Agent. They
// run the node's one materialization path and its diff-apply, like the
// Node API; the apply calls wait for the apply to finish.

// secretEnvPrefix is the environment variable prefix of ${secret:NAME}.
const secretEnvPrefix = "SVC_SECRET_"

// hubResolver resolves ${secret:NAME} from secrets (the values the Hub
// resolved) first, then as res does; ${env:} and ${file:} resolve as res
// does, on the node.
func hubResolver(res secretref.Resolver, secrets map[string]string) secretref.Resolver {
	if len(secrets) == 0 {
		return res
	}
	base := res.LookupEnv
	return secretref.Resolver{
		ReadFile: res.ReadFile,
		LookupEnv: func(name string) (string, bool) {
			if s, ok := strings.CutPrefix(name, secretEnvPrefix); ok {
				if v, ok := secrets[s]; ok {
					return v, true
				}
			}
			if base == nil {
				return os.LookupEnv(name) // the zero Resolver's environment
			}
			return base(name)
		},
	}
}

// addSecrets makes the Hub's secret values secret to the node's redactor
// before anything that may quote them runs.
func (n *Node) addSecrets(secrets map[string]string) {
	for _, v := range secrets {
		n.opts.Secrets.Add(v)
	}
}

// hubResolverFor is the node's resolver with the Hub's secrets in front.
func (n *Node) hubResolverFor(secrets map[string]string) secretref.Resolver {
	n.mu.Lock()
	res := n.conf.resolver
	n.mu.Unlock()
	return hubResolver(res, secrets)
}

// ValidateHub validates doc as the node would apply it, its ${secret:}
// references resolved from secrets first (the values the Hub resolved),
// then from the node's environment. It changes nothing. A document the
// node's remote policy refuses is a *policy.Error, its references
// checked before any resolves; the report then lists the refusals.
func (n *Node) ValidateHub(doc Document, secrets map[string]string) (Report, error) {
	n.addSecrets(secrets)
	if err := n.policyDocument(doc, secrets); err != nil {
		return policyReport(err), err
	}
	rep, _, err := n.validateWith(doc, n.hubResolverFor(secrets), n.policyConfig)
	return rep, err
}

// policyDocument checks the text of work from the Hub against the node's
// remote policy before any of its references resolves: the remote_policy
// section, and which references it may use. A text that does not parse
// passes: validation reports it.
func (n *Node) policyDocument(doc Document, secrets map[string]string) error {
	if n.opts.Policy == nil {
		return nil
	}
	tree, err := config.Tree(doc.Content, doc.Format)
	if err != nil {
		return nil
	}
	return n.policyErr(n.opts.Policy.Document(tree, secrets))
}

// policyConfig checks the files and destinations of a valid configuration
// from the Hub, its references resolved.
func (n *Node) policyConfig(cfg *config.Config) error {
	if n.opts.Policy == nil || cfg == nil {
		return nil
	}
	return n.policyErr(n.opts.Policy.Config(context.Background(), cfg))
}

// policyErr is the *policy.Error of ds (nil without), its messages
// redacted: a path may hold a value the Hub resolved.
func (n *Node) policyErr(ds []policy.Denial) error {
	for i := range ds {
		ds[i].Message = n.redact(ds[i].Message)
	}
	return policy.Err(ds)
}

// policyReport is the validation report of a refused document.
func policyReport(err error) Report {
	rep := Report{Errors: []config.Problem{}}
	var pe *policy.Error
	if errors.As(err, &pe) {
		rep.Errors = pe.Problems()
	}
	return rep
}

// ApplyHub validates doc (secrets resolving its ${secret:} references, as
// in ValidateHub; the remote policy refusing it is a *policy.Error before
// anything is kept or runs), appends it to the history as a version of source hub
// recording hubVersion (the text as given: references kept, never the
// values), applies it by the diff-apply (only changed streams restart)
// and waits for the apply to finish. An invalid doc is a
// *ValidationError. A version that was applied but a stream of which
// failed to start is applied: no error, the stream shows failed. ctx
// bounds the wait only; the apply goes on once queued.
func (n *Node) ApplyHub(ctx context.Context, doc Document, secrets map[string]string, hubVersion string, req Request) (wire.ConfigApplyResult, error) {
	n.addSecrets(secrets)
	if err := n.policyDocument(doc, secrets); err != nil {
		return wire.ConfigApplyResult{}, err
	}
	rec, err := n.applyWith(doc, n.hubResolverFor(secrets), history.SourceHub, history.Meta{HubVersion: hubVersion}, OpApply, req, n.policyConfig)
	if err != nil {
		return wire.ConfigApplyResult{}, err
	}
	res, err := n.waitApply(ctx, rec)
	res.ConfigVersion = hubVersion
	return res, err
}

// ReapplyVersion applies the text of the node's own version versionID as
// ApplyVersion does (a new version of source rollback) and waits for the
// apply to finish: the Hub's rollback to a configuration it never gave.
// An unknown id is ErrVersionNotFound.
func (n *Node) ReapplyVersion(ctx context.Context, versionID string, req Request) (wire.ConfigApplyResult, error) {
	rec, err := n.reapply(versionID, OpApply, req, true)
	if err != nil {
		return wire.ConfigApplyResult{}, err
	}
	return n.waitApply(ctx, rec)
}

// waitApply waits for the apply operation rec and returns what it did.
func (n *Node) waitApply(ctx context.Context, rec wire.Operation) (wire.ConfigApplyResult, error) {
	rec, err := n.ops.wait(ctx, rec.OperationID)
	if err != nil {
		return wire.ConfigApplyResult{}, err
	}
	ar, _ := rec.Result.(ApplyResult)
	res := wire.ConfigApplyResult{NodeVersion: ar.ConfigVersion, Added: ar.Added, Removed: ar.Removed, Changed: ar.Changed, Unchanged: ar.Unchanged}
	switch {
	case rec.State == wire.OpSucceeded:
		return res, nil
	case rec.State == wire.OpFailed && rec.Failure != nil && rec.Failure.Code == codeStreamStartFailed:
		n.log.Warn("configuration applied, but a stream failed to start", "config_version", ar.ConfigVersion, "correlation_id", rec.CorrelationID)
		return res, nil
	case rec.Failure != nil:
		return res, &ApplyError{Failure: *rec.Failure}
	default:
		return res, &ApplyError{Failure: wire.Failure{Class: "engine", Code: "engine_error", Message: "the apply ended " + rec.State}}
	}
}

// ApplyError is an apply that did not make its version the applied one
// (its operation's failure, secret values redacted).
type ApplyError struct{ Failure wire.Failure }

func (e *ApplyError) Error() string { return e.Failure.Message }

// DiffTexts compares two texts given with their version names, with the
// masking and summary of Diff: a literal credential's value never shows.
// A side whose format is not yaml, json or toml is an error.
func (n *Node) DiffTexts(from, to wire.ConfigDiffSide) (DiffReport, error) {
	side := func(s wire.ConfigDiffSide, def string) (Document, string, error) {
		f, err := config.ParseFormat(s.Format)
		if err != nil {
			return Document{}, "", fmt.Errorf("%s: %w", def, err)
		}
		name := s.Version
		if name == "" {
			name = def
		}
		return Document{Format: f, Content: []byte(s.Content)}, name, nil
	}
	a, aName, errA := side(from, "from")
	b, bName, errB := side(to, "to")
	if err := errors.Join(errA, errB); err != nil {
		return DiffReport{}, err
	}
	return DiffReport{
		From: aName, To: bName,
		Unified: history.Diff(n.masked.mask(a.Content, a.Format), n.masked.mask(b.Content, b.Format), aName, bName),
		Summary: summarize(a, b),
	}, nil
}
