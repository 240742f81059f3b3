package daemon

import (
	"context"
	"fmt"
	"io"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/node/history"
	"github.com/flowplane/flowplane/internal/policy"
	"github.com/flowplane/flowplane/internal/secretref"
)

// bootVersion materializes the version Boot chose to run. A version from
// the Hub (source hub) whose ${secret:} references this node cannot
// resolve (the Hub resolved them at dispatch, and they are gone after a
// restart) gives way to the latest file version, marked applied: the
// Agent then reports no Hub version and the Hub sends its configuration
// again. fallback is the Hub version set aside (nil when none was); the
// caller warns naming it, never a value. A Hub version runs with the
// health_check and remote_policy of file (the --config file's text), and
// gives way to the latest file version as well when pol refuses it (the
// node's policy may have changed since it was applied). Any other problem
// fails, as materialize does.
func bootVersion(hist *history.Store, v history.Version, file history.Version, pol *policy.Policy, stderr io.Writer) (run history.Version, cfg *config.Config, fallback *history.Version, ok bool) {
	if v.Source == history.SourceHub && (!secretsResolvable(v) || !allowed(v, file, pol)) {
		file, found := latestFile(hist)
		if found {
			if err := hist.MarkApplied(file.ID); err != nil {
				fmt.Fprintf(stderr, "flowplane: configuration history: %v\n", err)
				return v, nil, nil, false
			}
			hub := v
			hub.Content = nil
			fallback, v = &hub, file
		}
	}
	content, format := v.Content, v.Format
	if v.Source == history.SourceHub {
		// A Hub configuration has no health_check: the node runs it with
		// the one of its --config file (config.NodeLocal).
		var err error
		if content, err = config.WithNodeLocal(v.Content, v.Format, file.Content, file.Format); err != nil {
			fmt.Fprintf(stderr, "flowplane: %s (applied configuration): %v\n", v.ID, err)
			return v, nil, nil, false
		}
		format = config.JSON
	}
	cfg, ok = materialize(v.ID+" (applied configuration)", content, format, stderr)
	return v, cfg, fallback, ok
}

// allowed reports whether the remote policy lets the Hub version v run:
// configuration control on, its ${env:} and ${file:} references and, materialized, its files and
// destinations. A text that does not materialize counts as allowed:
// materialize reports it.
func allowed(v, file history.Version, pol *policy.Policy) bool {
	if !pol.ConfigControl() {
		return false // the node no longer takes configurations from the Hub
	}
	tree, err := config.Tree(v.Content, v.Format)
	if err != nil {
		return true
	}
	// Whether the Hub held a ${secret:} was decided when the version
	// came; only env and file references are decided again.
	held := map[string]string{}
	for _, r := range secretref.References(tree) {
		if r.Scheme == "secret" {
			held[r.Name] = ""
		}
	}
	if len(pol.Document(tree, held)) > 0 {
		return false
	}
	content, err := config.WithNodeLocal(v.Content, v.Format, file.Content, file.Format)
	if err != nil {
		return true
	}
	cfg, err := config.Materialize(content, config.JSON, component.Default, secretref.Resolver{})
	if err != nil {
		return true
	}
	return len(pol.Config(context.Background(), cfg)) == 0
}

// secretsResolvable reports whether every ${secret:} reference of v
// resolves from this process's environment. A text that does not parse
// counts as resolvable: materialize reports it.
func secretsResolvable(v history.Version) bool {
	tree, err := config.Tree(v.Content, v.Format)
	if err != nil {
		return true
	}
	_, err = secretref.Resolver{}.Secrets(tree)
	return err == nil
}

// latestFile returns the newest version of source file, with its text.
func latestFile(hist *history.Store) (history.Version, bool) {
	vs := hist.List()
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].Source != history.SourceFile {
			continue
		}
		v, err := hist.Get(vs[i].ID)
		return v, err == nil
	}
	return history.Version{}, false
}
