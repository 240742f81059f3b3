package daemon

import (
	"fmt"
	"io"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/node/history"
	"github.com/flowplane/flowplane/internal/secretref"
)

// bootVersion materializes the version Boot chose to run. A version from
// the Hub (source hub) whose ${secret:} references this node cannot
// resolve (the Hub resolved them at dispatch, and they are gone after a
// restart) gives way to the latest file version, marked applied: the
// Agent then reports no Hub version and the Hub sends its configuration
// again. fallback is the Hub version set aside (nil when none was); the
// caller warns naming it, never a value. A Hub version runs with the
// health_check of file (the --config file's text). Any other problem
// fails, as materialize does.
func bootVersion(hist *history.Store, v history.Version, file history.Version, stderr io.Writer) (run history.Version, cfg *config.Config, fallback *history.Version, ok bool) {
	if v.Source == history.SourceHub && !secretsResolvable(v) {
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
