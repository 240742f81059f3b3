package policy

import (
	"path/filepath"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/secretref"
)

// Document checks the value tree of a Hub-delivered document before any
// of it resolves: it must not hold a remote_policy section (the node
// keeps its own), and each reference must be one the policy lets resolve.
// hubSecrets are the ${secret:} values the Hub resolved (a configuration
// command's secrets); a ${secret:NAME} it does not hold is node-local. A
// job spec arrives with the Hub's values substituted: every reference
// left in it is the node's to resolve.
func (p *Policy) Document(tree any, hubSecrets map[string]string) []Denial {
	var ds []Denial
	if m, ok := tree.(map[string]any); ok {
		if _, ok := m[config.RemotePolicySection]; ok {
			ds = append(ds, Denial{Path: config.RemotePolicySection,
				Message: "a configuration from the Hub may not set the node's remote policy; the node keeps the one of its --config file", Rule: RuleSection})
		}
	}
	for _, r := range secretref.References(tree) {
		if d, ok := p.reference(r, hubSecrets); !ok {
			ds = append(ds, d)
		}
	}
	return ds
}

// reference decides one reference of Hub-delivered work.
func (p *Policy) reference(r secretref.Reference, hubSecrets map[string]string) (Denial, bool) {
	d := Denial{Path: r.Path}
	switch r.Scheme {
	case "secret":
		if _, ok := hubSecrets[r.Name]; ok || p.localSecrets || p.secrets[r.Name] {
			return d, true
		}
		d.Message, d.Rule = r.Ref+" is a node-local secret the node does not let the Hub's work read", RuleSecrets
	case "env":
		if p.env[r.Name] {
			return d, true
		}
		d.Message, d.Rule = r.Ref+" reads the node's environment, which the node does not let the Hub's work read", RuleEnv
	case "file":
		if filepath.IsAbs(r.Name) && p.files[filepath.Clean(r.Name)] && filepath.Clean(r.Name) == r.Name {
			return d, true
		}
		d.Message, d.Rule = r.Ref+" reads a node file the node does not let the Hub's work read", RuleFiles
	default:
		d.Message, d.Rule = r.Ref+" is not a reference the Hub's work may use", RuleSection
	}
	return d, false
}
