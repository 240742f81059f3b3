package config

import (
	"encoding/json"
	"errors"
)

// NodeLocal is the top-level section of a configuration that belongs to
// the node itself (listeners, tokens, hub_urls, node id): a configuration
// given by a Hub must not have it, and the node runs it with the section
// of its own --config file.
const NodeLocal = "health_check"

// RemotePolicySection is the top-level section of the node's policy for
// work the Hub delivers: node-local as NodeLocal is, and never taken from
// a Hub-delivered configuration.
const RemotePolicySection = "remote_policy"

// TracingSection is the top-level section of the node's tracing: node-local
// as NodeLocal is, since the tracer provider lives as long as the process.
const TracingSection = "tracing"

// WithNodeLocal returns doc (format f) as a JSON document whose NodeLocal,
// RemotePolicySection and TracingSection sections are the ones of local (format lf),
// absent when local has none.
// Every other section is doc's, as written (secret references kept), so
// that materializing the result names the same paths as doc would.
func WithNodeLocal(doc []byte, f Format, local []byte, lf Format) ([]byte, error) {
	tree, err := Tree(doc, f)
	if err != nil {
		return nil, err
	}
	m, ok := tree.(map[string]any)
	if !ok {
		if tree != nil {
			return nil, errors.New("the configuration is not a mapping")
		}
		m = map[string]any{}
	}
	lt, err := Tree(local, lf)
	if err != nil {
		return nil, err
	}
	lm, _ := lt.(map[string]any)
	for _, sec := range []string{NodeLocal, RemotePolicySection, TracingSection} {
		delete(m, sec)
		if v, ok := lm[sec]; ok {
			m[sec] = v
		}
	}
	return json.Marshal(m)
}
