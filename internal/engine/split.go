package engine

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/flowplane/flowplane/internal/dataplane"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/kernel"
)

// ErrNoDataPlane is wrapped by StartHubJob's error for a job placed split
// over nodes on a node without a data plane (no health_check.data_port).
var ErrNoDataPlane = errors.New("no data plane")

// ErrSplitPlacement is wrapped by StartHubJob's error for a split placement
// that does not fit the job's plan or this node: a task of the plan not
// placed, a task placed that the plan does not have, a node without a data
// address or a data-plane fingerprint, no task on this node, or no data
// secret.
var ErrSplitPlacement = errors.New("invalid split placement")

// MinDataSecret is the shortest data secret a split job is accepted with,
// in bytes (the Hub sends 32).
const MinDataSecret = 16

// splitError carries a message naming the job and the sentinel callers
// branch on. Its text never holds the data secret.
type splitError struct {
	msg  string
	kind error
}

func (e *splitError) Error() string { return e.msg }
func (e *splitError) Unwrap() error { return e.kind }

// split is the placement of a Hub job whose tasks run on several nodes.
type split struct {
	taskNodes     map[string]string
	dataAddresses map[string]string
	fingerprints  map[string]string
	secret        []byte
}

// splitOf copies h's split placement; nil for a job that runs whole here.
func splitOf(h HubJob) *split {
	if len(h.TaskNodes) == 0 {
		return nil
	}
	return &split{taskNodes: maps.Clone(h.TaskNodes), dataAddresses: maps.Clone(h.DataAddresses),
		fingerprints: maps.Clone(h.DataFingerprints), secret: slices.Clone(h.DataSecret)}
}

// maxNamed bounds the ids one split error lists.
const maxNamed = 5

// check refuses a placement that does not fit plan on node self.
func (s *split) check(jobID string, plan *job.Plan, dp *DataPlane, self string) error {
	fail := func(kind error, format string, args ...any) error {
		return &splitError{msg: fmt.Sprintf("job %q ", jobID) + fmt.Sprintf(format, args...), kind: kind}
	}
	if dp == nil {
		return fail(ErrNoDataPlane, "is placed split over nodes but this node has no data plane (health_check.data_port)")
	}
	if self == "" {
		return fail(ErrSplitPlacement, "is placed split over nodes but the engine was given no node id")
	}
	if len(s.secret) < MinDataSecret {
		return fail(ErrSplitPlacement, "is placed split over nodes without a data secret of at least %d bytes", MinDataSecret)
	}
	inPlan := make(map[string]bool, len(plan.Tasks))
	var missing []string
	mine := 0
	for _, t := range plan.Tasks {
		inPlan[t.ID] = true
		n, ok := s.taskNodes[t.ID]
		switch {
		case !ok || n == "":
			missing = append(missing, t.ID)
		case n == self:
			mine++
		}
	}
	if len(missing) > 0 {
		return fail(ErrSplitPlacement, "is placed split over nodes but task_nodes does not place its tasks %s", named(missing))
	}
	var unknown, unreachable, unpinned []string
	for _, id := range slices.Sorted(maps.Keys(s.taskNodes)) {
		if !inPlan[id] {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		return fail(ErrSplitPlacement, "is placed split over nodes but task_nodes places tasks its plan does not have: %s (another version of the job?)", named(unknown))
	}
	for _, n := range slices.Sorted(maps.Values(s.taskNodes)) {
		if n != self && s.dataAddresses[n] == "" && !slices.Contains(unreachable, n) {
			unreachable = append(unreachable, n)
		}
	}
	if len(unreachable) > 0 {
		return fail(ErrSplitPlacement, "is placed split over nodes but node_data_ports has no data address for nodes %s", named(unreachable))
	}
	// Every node this one would link to: those of the tasks and those
	// with an address.
	linked := slices.Sorted(maps.Keys(s.dataAddresses))
	for _, n := range slices.Sorted(maps.Values(s.taskNodes)) {
		if !slices.Contains(linked, n) {
			linked = append(linked, n)
		}
	}
	slices.Sort(linked)
	for _, n := range linked {
		if n != self && !dataplane.ValidFingerprint(s.fingerprints[n]) && !slices.Contains(unpinned, n) {
			unpinned = append(unpinned, n)
		}
	}
	if len(unpinned) > 0 {
		// Fail closed: a link is never made without TLS.
		return fail(ErrSplitPlacement, "is placed split over nodes but node_data_fingerprints has no data-plane certificate fingerprint for nodes %s: nodes of an earlier release, or a placement made before they advertised one; upgrade them and move the job", named(unpinned))
	}
	if mine == 0 {
		return fail(ErrSplitPlacement, "is placed split over nodes but none of its tasks is placed on this node %q", self)
	}
	return nil
}

// named lists ids, at most maxNamed of them.
func named(ids []string) string {
	if len(ids) > maxNamed {
		return strings.Join(ids[:maxNamed], ", ") + fmt.Sprintf(" and %d more", len(ids)-maxNamed)
	}
	return strings.Join(ids, ", ")
}

// joinSplit checks a split job's placement and joins its mesh: the
// kernel's share of the job on this node. The caller closes the mesh when
// the job's run ends.
func (e *Engine) joinSplit(jobID string, plan *job.Plan, s *split) (*kernel.Split, error) {
	if err := s.check(jobID, plan, e.opts.DataPlane, e.opts.NodeID); err != nil {
		return nil, err
	}
	peers := make(map[string]dataplane.Peer, len(s.dataAddresses))
	for n, addr := range s.dataAddresses {
		peers[n] = dataplane.Peer{Addr: addr, Fingerprint: s.fingerprints[n]}
	}
	mesh, err := e.opts.DataPlane.Join(jobID, s.secret, peers)
	if err != nil {
		return nil, fmt.Errorf("job %q: join the data plane: %w", jobID, err)
	}
	return &kernel.Split{Self: e.opts.NodeID, TaskNodes: maps.Clone(s.taskNodes), Mesh: mesh}, nil
}
