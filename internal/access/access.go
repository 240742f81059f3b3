package access

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Role is a named set of permissions.
type Role string

// The three roles. Each grants everything the one before it grants.
const (
	// Viewer reads everything: every GET, the event stream, metrics.
	Viewer Role = "viewer"
	// Operator also runs the lifecycle: stream and job desired state and
	// actions, checkpoints and savepoints, drain and maintenance,
	// cancelling operations, the read-only node checks (validate, diff),
	// and live taps of the data.
	Operator Role = "operator"
	// Admin also changes what runs: job create, upgrade and rollback,
	// configuration apply and rollback, rollouts, forgetting nodes, tokens.
	Admin Role = "admin"
)

// Roles are the roles, least powerful first.
var Roles = []Role{Viewer, Operator, Admin}

// maxShown is the longest value an error quotes. Roles, scopes and field
// names are short; a longer value is likely a token or a digest pasted in
// the wrong place, and no part of it is echoed.
const maxShown = 48

// shown is v quoted for an error, or only its length when it is long.
func shown(v string) string {
	if len(v) > maxShown {
		return fmt.Sprintf("(a value of %d characters, not shown)", len(v))
	}
	return strconv.Quote(v)
}

// ParseRole returns the role named s.
func ParseRole(s string) (Role, error) {
	if r := Role(s); slices.Contains(Roles, r) {
		return r, nil
	}
	return "", fmt.Errorf("unknown role %s (viewer, operator or admin)", shown(s))
}

// Permission is what a route needs.
type Permission string

// The permissions, by the role that first grants them.
const (
	Read Permission = "read"

	StreamOperate   Permission = "stream.operate"
	JobOperate      Permission = "job.operate"
	NodeOperate     Permission = "node.operate"
	OperationCancel Permission = "operation.cancel"
	Check           Permission = "check"
	// Tap opens a live tap: it shows the data itself (redacted), so a
	// viewer, who reads only state, does not have it.
	Tap Permission = "tap"

	JobAdmin           Permission = "job.admin"
	ConfigurationAdmin Permission = "configuration.admin"
	RolloutAdmin       Permission = "rollout.admin"
	NodeAdmin          Permission = "node.admin"
	TokenAdmin         Permission = "token.admin"
)

// Permissions are every permission, in the order of the roles that grant
// them.
var Permissions = []Permission{Read, StreamOperate, JobOperate, NodeOperate, OperationCancel, Check, Tap,
	JobAdmin, ConfigurationAdmin, RolloutAdmin, NodeAdmin, TokenAdmin}

// grants is what each role may do, its own grants and those of the roles
// below it.
var grants = map[Role][]Permission{
	Viewer:   {Read},
	Operator: {Read, StreamOperate, JobOperate, NodeOperate, OperationCancel, Check, Tap},
	Admin: {Read, StreamOperate, JobOperate, NodeOperate, OperationCancel, Check, Tap,
		JobAdmin, ConfigurationAdmin, RolloutAdmin, NodeAdmin, TokenAdmin},
}

// Grants reports whether role grants perm.
func (r Role) Grants(perm Permission) bool { return slices.Contains(grants[r], perm) }

// Kind says how a principal authenticated.
type Kind string

// The kinds of principal.
const (
	// KindToken is the bootstrap token (SVC_OPERATOR_TOKEN) or a named
	// token of the tokens file.
	KindToken Kind = "token"
	// KindOIDC is a bearer JWT of the identity provider.
	KindOIDC Kind = "oidc"
	// KindNode is an Agent calling the agent API with its node or session
	// credential; it holds no operator role.
	KindNode Kind = "node"
	// KindHub is the Hub itself, acting for someone (rollout waves).
	KindHub Kind = "hub"
	// KindAnonymous is every caller when no credential is configured
	// (insecure local development).
	KindAnonymous Kind = "anonymous"
)

// Principal is who sent a request. The zero value may do nothing.
type Principal struct {
	// ID is the actor of audit rows, events and operations: a named
	// token's name, an OIDC subject, "operator" for the bootstrap token.
	ID   string
	Kind Kind
	// Roles grant permissions; their union counts.
	Roles []Role
	// Scopes narrow the principal to resources; none means every resource.
	Scopes []Scope
	// Expires is when the credential stops being accepted; zero never.
	Expires time.Time
}

// Expired reports whether p's credential expired at now.
func (p Principal) Expired(now time.Time) bool {
	return !p.Expires.IsZero() && !now.Before(p.Expires)
}

// Resource is what a request touches. Empty fields do not apply; a Resource
// with every field empty is the fleet itself (a list, /status, /schema).
type Resource struct {
	Node, Stream, Job, Rollout string
}

// String is the resource as a scope would name it.
func (r Resource) String() string {
	switch {
	case r.Stream != "":
		return "stream:" + r.Node + "/" + r.Stream
	case r.Job != "":
		return "job:" + r.Job
	case r.Rollout != "":
		return "rollout:" + r.Rollout
	case r.Node != "":
		return "node:" + r.Node
	}
	return "fleet"
}

// Missing says why Allow refused: the permission, and when the role has it
// but no scope covers the resource, the resource that is out of scope.
type Missing struct {
	Permission Permission `json:"permission"`
	Resource   string     `json:"resource,omitempty"`
}

// Allow decides whether p may use perm on res. When it may not, Missing
// names the permission no role of p grants, or the resource no scope of p
// covers. A scoped principal may read the fleet itself (lists are filtered
// item by item by the caller) but changes nothing that no scope covers.
func Allow(p Principal, perm Permission, res Resource) (bool, Missing) {
	if !slices.ContainsFunc(p.Roles, func(r Role) bool { return r.Grants(perm) }) {
		return false, Missing{Permission: perm}
	}
	if len(p.Scopes) == 0 || (perm == Read && res == Resource{}) {
		return true, Missing{}
	}
	for _, s := range p.Scopes {
		if s.covers(res) {
			return true, Missing{}
		}
	}
	return false, Missing{Permission: perm, Resource: res.String()}
}

// Scope narrows a principal to resources, written `node:<id>`,
// `stream:<node>/<id>`, `job:<id>` or `rollout:<id>`, where each id may be a
// glob (path.Match: *, ?, [a-z]).
type Scope struct {
	Type string // node, stream, job or rollout
	// Node is the node glob of node and stream scopes.
	Node string
	// ID is the stream, job or rollout glob.
	ID string
}

// ParseScope reads one scope.
func ParseScope(s string) (Scope, error) {
	typ, glob, ok := strings.Cut(s, ":")
	if !ok || glob == "" {
		return Scope{}, fmt.Errorf("scope %s: want node:<id>, stream:<node>/<id>, job:<id> or rollout:<id>", shown(s))
	}
	sc := Scope{Type: typ}
	switch typ {
	case "node":
		sc.Node = glob
	case "stream":
		n, id, ok := strings.Cut(glob, "/")
		if !ok || n == "" || id == "" {
			return Scope{}, fmt.Errorf("scope %s: a stream scope is stream:<node>/<id>", shown(s))
		}
		sc.Node, sc.ID = n, id
	case "job", "rollout":
		sc.ID = glob
	default:
		return Scope{}, fmt.Errorf("scope %s: unknown type %s (node, stream, job or rollout)", shown(s), shown(typ))
	}
	for _, g := range []string{sc.Node, sc.ID} {
		if _, err := path.Match(g, ""); err != nil {
			return Scope{}, fmt.Errorf("scope %s: bad glob %s", shown(s), shown(g))
		}
	}
	return sc, nil
}

// ParseScopes reads scopes, stopping at the first bad one.
func ParseScopes(ss []string) ([]Scope, error) {
	out := make([]Scope, 0, len(ss))
	for _, s := range ss {
		sc, err := ParseScope(s)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// String is the scope as ParseScope reads it.
func (s Scope) String() string {
	switch s.Type {
	case "node":
		return "node:" + s.Node
	case "stream":
		return "stream:" + s.Node + "/" + s.ID
	}
	return s.Type + ":" + s.ID
}

// MarshalText writes the scope as a string (whoami, JSON).
func (s Scope) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// covers reports whether s reaches res: a node scope covers the node and
// everything on it, a stream scope one stream, a job or rollout scope its
// jobs or rollouts.
func (s Scope) covers(res Resource) bool {
	switch s.Type {
	case "node":
		return res.Node != "" && match(s.Node, res.Node)
	case "stream":
		return res.Stream != "" && match(s.Node, res.Node) && match(s.ID, res.Stream)
	case "job":
		return res.Job != "" && match(s.ID, res.Job)
	case "rollout":
		return res.Rollout != "" && match(s.ID, res.Rollout)
	}
	return false
}

// match is path.Match over ids, which hold no '/'. Globs were checked by
// ParseScope.
func match(glob, id string) bool {
	ok, _ := path.Match(glob, id)
	return ok
}
