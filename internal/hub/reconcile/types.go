package reconcile

import (
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// Node liveness (API.md "States").
const (
	StatusOnline      = "online"
	StatusUnavailable = "unavailable"
	StatusUnknown     = "unknown"
)

// Stable failure codes (spec "Errors": the audit record's failure codes).
const (
	CodeNodeUnavailable        = "node_unavailable"
	CodeCapacity               = "capacity"
	CodeIncompatibleCapability = "incompatible_capability"
	CodeExpired                = "expired"
)

// Node is what the reconciler knows of one node. Active is the number of
// its attempts in flight (dispatched or acknowledged, not yet finished); only
// PlanDispatch reads it. Fresh says the Hub has accepted a report from the
// node since the Hub started and since the node last came back online (or
// registered as a new process): only then does the node's stored
// observation describe the present; only Convergence reads it.
type Node struct {
	Status       string
	Mode         string
	Capabilities []string
	Active       int
	Fresh        bool
}

// online reports whether the node holds a live lease.
func (n Node) online() bool { return n.Status == StatusOnline }

// observing reports whether the node's stored observation is current: the
// node is online and has reported since the Hub started and since it last
// came back. Anything else makes its observation stale.
func (n Node) observing() bool { return n.online() && n.Fresh }

// suspended reports whether an administrative mode suppresses new dispatch.
func (n Node) suspended() bool {
	return n.Mode == wire.NodeModeDraining || n.Mode == wire.NodeModeMaintenance
}

// lacks reports whether the node does not advertise one of required.
func (n Node) lacks(required []string) bool {
	for _, r := range required {
		found := false
		for _, c := range n.Capabilities {
			if c == r {
				found = true
				break
			}
		}
		if !found {
			return true
		}
	}
	return false
}

// ArtifactInfo is what the restore choice knows of one completed recovery
// artifact of a job.
type ArtifactInfo struct {
	Kind              string // checkpoint or savepoint
	ID                int64
	JobVersion        int
	FormatVersion     int
	MaxParallelism    int
	StatefulOperators []string
	CompletedAt       time.Time
}
