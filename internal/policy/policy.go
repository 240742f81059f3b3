package policy

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/sandbox"
)

// Code is the failure code of every refusal: the operation's failure, a
// job's or stream's last error, and so the Hub's audit.
const Code = "policy_denied"

// ErrDenied is matched (errors.Is) by an [*Error], and by the
// [*sandbox.Error] of a refusal at use (it is sandbox.ErrDenied).
var ErrDenied = sandbox.ErrDenied

// Rule names of the remote_policy fields refusals cite.
const (
	RuleSection       = config.RemotePolicySection
	RuleEnv           = config.RemotePolicySection + ".env"
	RuleFiles         = config.RemotePolicySection + ".files"
	RuleSecrets       = config.RemotePolicySection + ".secrets"
	RuleFileRoots     = config.RemotePolicySection + ".file_roots"
	RuleOutbound      = config.RemotePolicySection + ".outbound_allow"
	RuleJobControl    = config.RemotePolicySection + ".job_control"
	RuleConfigControl = config.RemotePolicySection + ".config_control"
)

// Denial is one refusal: where in the delivered document, what, and the
// rule that refused it. Its text never holds a resolved value: paths and
// hosts come from the document as delivered or as the Hub resolved its
// ${secret:} references.
type Denial struct {
	Path    string
	Message string
	Rule    string
}

// Error returns "<path>: <message> (<rule>)".
func (d Denial) Error() string {
	s := d.Message + " (" + d.Rule + ")"
	if d.Path == "" {
		return s
	}
	return d.Path + ": " + s
}

// Problem is the denial as a configuration problem.
func (d Denial) Problem() config.Problem {
	return config.Problem{Path: d.Path, Message: d.Message + " (" + d.Rule + ")"}
}

// Error carries every denial of one document.
type Error struct{ Denials []Denial }

func (e *Error) Error() string {
	s := make([]string, len(e.Denials))
	for i, d := range e.Denials {
		s[i] = d.Error()
	}
	return strings.Join(s, "; ")
}

// Is makes errors.Is(err, ErrDenied) true.
func (e *Error) Is(target error) bool { return target == ErrDenied }

// Problems returns the denials as configuration problems.
func (e *Error) Problems() []config.Problem {
	ps := make([]config.Problem, len(e.Denials))
	for i, d := range e.Denials {
		ps[i] = d.Problem()
	}
	return ps
}

// Err is nil without denials, else an *Error holding them.
func Err(ds []Denial) error {
	if len(ds) == 0 {
		return nil
	}
	return &Error{Denials: ds}
}

// LookupFunc resolves a host name to its addresses, as
// net.Resolver.LookupNetIP does.
type LookupFunc func(ctx context.Context, host string) ([]netip.Addr, error)

// Policy is a node's remote policy, ready to decide. Its zero value is not
// usable: build it with New.
type Policy struct {
	roots        []string
	env, files   map[string]bool
	secrets      map[string]bool
	localSecrets bool
	allowNets    []netip.Prefix
	allowHosts   []string
	jobControl   bool
	confControl  bool
	// lookup resolves destinations' host names; tests replace it.
	lookup LookupFunc
}

// New returns the policy c describes for a node whose state directory is
// stateDir (the file root when c lists none). c is expected valid
// (config's validation checked it); an invalid outbound_allow entry is
// ignored, which refuses more, never less.
func New(c config.RemotePolicy, stateDir string) *Policy {
	p := &Policy{
		env: set(c.Env), files: set(c.Files), secrets: set(c.Secrets), localSecrets: c.AllowLocalSecrets,
		jobControl: c.JobControl, confControl: c.ConfigControl,
		lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		},
	}
	for _, r := range c.FileRoots {
		p.roots = append(p.roots, filepath.Clean(r))
	}
	if len(p.roots) == 0 && stateDir != "" {
		if abs, err := filepath.Abs(stateDir); err == nil {
			p.roots = []string{abs}
		}
	}
	for _, a := range c.OutboundAllow {
		pre, host, err := config.ParseOutbound(a)
		switch {
		case err != nil:
			p.allowHosts = append(p.allowHosts, "") // an allow-list is set: refuse rather than open
		case host != "":
			p.allowHosts = append(p.allowHosts, host)
		default:
			p.allowNets = append(p.allowNets, pre)
		}
	}
	return p
}

// Default is the policy of a node whose configuration has no
// remote_policy section.
func Default(stateDir string) *Policy {
	return New(config.Default().RemotePolicy, stateDir)
}

// WithLookup returns a copy of p resolving host names with f.
func (p *Policy) WithLookup(f LookupFunc) *Policy {
	q := *p
	q.lookup = f
	return &q
}

// JobControl reports whether the node runs Hub job commands.
func (p *Policy) JobControl() bool { return p.jobControl }

// ConfigControl reports whether the node runs Hub configuration commands.
func (p *Policy) ConfigControl() bool { return p.confControl }

// Roots returns the file roots in force.
func (p *Policy) Roots() []string { return slices.Clone(p.roots) }

func set(list []string) map[string]bool {
	m := make(map[string]bool, len(list))
	for _, s := range list {
		m[s] = true
	}
	return m
}
