package hub

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// redeliverAfter is how long a command delivered to an Agent may stay
// unacknowledged before the next poll gets it again (the Agent died between
// the poll and its acknowledgement, or the answer was lost).
const redeliverAfter = 10 * time.Second

// fleet is the Hub's in-memory view of its nodes: liveness (leases are not
// written to disk; after a Hub restart every node is unavailable until its
// next heartbeat), the session cache, the commands waiting for delivery and
// the attempts in flight. The durable truth is the store; fleet is rebuilt
// from it at restore. mu guards everything below it.
type fleet struct {
	mu       sync.Mutex
	nodes    map[string]*nodeState
	sessions map[[sha256.Size]byte]session
	// sessionOf is each node's current session key: a new registration
	// drops the old one without scanning every session.
	sessionOf map[string][sha256.Size]byte
	inflight  map[string]*flight // by attempt id
	// pending holds the nodes that may have unprocessed outbox rows, each
	// with the sequence number of its latest mark, so that a pass that read
	// the outbox before a mark does not clear it.
	pending map[string]int64
	markSeq int64
}

type session struct {
	nodeID    string
	expiresAt time.Time
}

// nodeState is one registered node as the Hub sees it now.
type nodeState struct {
	node       store.Node // as last written (mode, capabilities, version, ...)
	leaseTTL   time.Duration
	leaseUntil time.Time
	online     bool
	reportBoot string
	reportSeq  int64
	observed   []store.ObservedStream         // as last accepted
	counters   map[string]wire.StreamCounters // by stream, from the latest report (not durable)
	cfgVersion string
	// cfg is the configuration object of the last report (nil: none yet).
	cfg         *wire.ReportConfiguration
	metrics     map[string]float64
	reportedAt  time.Time
	fresh       bool          // a report was accepted since the Hub started, and since the node last came back online or registered a new boot
	queue       []*flight     // commands not yet acknowledged, oldest first
	wake        chan struct{} // closed when queue grows; nil while nobody waits
	active      int           // attempts in flight
	pollers     int           // long-polls waiting now
	parked      []*parkedPoll // long-polls waiting without a goroutine (park.go)
	lastPollAt  time.Time
	capacityHit map[string]bool // intents already counted as waiting for capacity
}

// flight is one attempt in flight: its command, when it was dispatched, and
// when it was last handed to the Agent (zero: not yet).
type flight struct {
	cmd          wire.Command
	state        string // dispatched or acknowledged
	dispatchedAt time.Time
	expiresAt    time.Time
	deliveredAt  time.Time
}

func newFleet() *fleet {
	return &fleet{nodes: map[string]*nodeState{}, sessions: map[[sha256.Size]byte]session{}, sessionOf: map[string][sha256.Size]byte{},
		inflight: map[string]*flight{}, pending: map[string]int64{}}
}

// observedStream is a copy of the node's latest accepted observation of a
// stream, as the store holds it, or nil.
func (f *fleet) observedStream(nodeID, streamID string) *store.ObservedStream {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodes[nodeID]
	if n == nil {
		return nil
	}
	// observed is sorted by stream id (postReport, AllObservedStreams).
	i, ok := slices.BinarySearchFunc(n.observed, streamID, func(o store.ObservedStream, id string) int { return cmpString(o.StreamID, id) })
	if !ok {
		return nil
	}
	o := n.observed[i]
	if !o.LastErrorAt.IsZero() {
		o.LastErrorAt = time.UnixMilli(o.LastErrorAt.UnixMilli()).UTC() // stored in milliseconds
	}
	return &o
}

// cacheSessionLocked remembers a live session as its node's current one.
// f.mu is held.
func (f *fleet) cacheSessionLocked(key [sha256.Size]byte, s session) {
	f.sessions[key] = s
	f.sessionOf[s.nodeID] = key
}

// markLocked notes that node id may have outbox rows to dispatch. f.mu is
// held.
func (f *fleet) markLocked(id string) {
	f.markSeq++
	f.pending[id] = f.markSeq
}

// nodeLocked returns the state of id, creating an empty one. f.mu is held.
func (f *fleet) nodeLocked(id string) *nodeState {
	n := f.nodes[id]
	if n == nil {
		n = &nodeState{node: store.Node{NodeID: id, Mode: wire.NodeModeActive}, leaseTTL: defaultLeaseTTL, capacityHit: map[string]bool{}}
		f.nodes[id] = n
	}
	return n
}

// observing reports whether the node's stored observation is current (see
// reconcile.Node.Fresh).
func (n *nodeState) observing() bool { return n != nil && n.online && n.fresh }

// status is the node's liveness as API.md names it.
func (n *nodeState) status() string {
	switch {
	case n == nil, n.node.RegisteredAt.IsZero():
		return reconcile.StatusUnknown
	case n.online:
		return reconcile.StatusOnline
	}
	return reconcile.StatusUnavailable
}

// reconcileNode is what the pure decisions know of a node. f.mu is held.
func (f *fleet) reconcileNodeLocked(id string) reconcile.Node {
	n := f.nodes[id]
	if n == nil {
		return reconcile.Node{Status: reconcile.StatusUnknown, Mode: wire.NodeModeActive}
	}
	return reconcile.Node{Status: n.status(), Mode: n.node.Mode, Capabilities: slices.Clone(n.node.Capabilities), Active: n.active, Fresh: n.fresh}
}

// enqueueLocked puts a dispatched command on its node's queue and wakes the
// node's long-polls. f.mu is held.
func (f *fleet) enqueueLocked(fl *flight) {
	f.inflight[fl.cmd.AttemptID] = fl
	n := f.nodeLocked(fl.cmd.NodeID)
	n.active++
	if fl.state == wire.OpDispatched {
		n.queue = append(n.queue, fl)
		if n.wake != nil {
			close(n.wake)
			n.wake = nil
		}
		n.wakeParkedLocked()
	}
}

// acknowledgedLocked takes an attempt off its node's delivery queue; it
// stays in flight. f.mu is held.
func (f *fleet) acknowledgedLocked(attemptID string) {
	fl := f.inflight[attemptID]
	if fl == nil {
		return
	}
	fl.state = wire.OpAcknowledged
	if n := f.nodes[fl.cmd.NodeID]; n != nil {
		n.queue = slices.DeleteFunc(n.queue, func(q *flight) bool { return q == fl })
	}
}

// finishedLocked forgets an attempt that reached an outcome. f.mu is held.
func (f *fleet) finishedLocked(attemptID string) *flight {
	fl := f.inflight[attemptID]
	if fl == nil {
		return nil
	}
	delete(f.inflight, attemptID)
	if n := f.nodes[fl.cmd.NodeID]; n != nil {
		n.queue = slices.DeleteFunc(n.queue, func(q *flight) bool { return q == fl })
		n.active = max(n.active-1, 0)
	}
	return fl
}

// takeLocked returns the commands of node ready for delivery at now and
// marks them delivered, or a channel closed when one may be. f.mu is held.
func (f *fleet) takeLocked(nodeID string, now time.Time) ([]wire.Command, <-chan struct{}) {
	n := f.nodeLocked(nodeID)
	n.lastPollAt = now
	var out []wire.Command
	for _, fl := range n.queue {
		if fl.deliveredAt.IsZero() || now.Sub(fl.deliveredAt) >= redeliverAfter {
			fl.deliveredAt = now
			out = append(out, fl.cmd)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	if n.wake == nil {
		n.wake = make(chan struct{})
	}
	return nil, n.wake
}

// sessionKey is the cache key of a session token.
func sessionKey(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// commandOf is the command an outbox row turns into (split: the job's
// split placement when the row is a split job's job_start, else nil).
func commandOf(e store.OutboxEntry, split *store.JobSplit, attemptID string, expires time.Time) wire.Command {
	return commandFromIntent(store.Intent{ID: e.IntentID, Operation: e.Operation, NodeID: e.NodeID, Kind: e.Kind,
		ResourceID: e.ResourceID, Generation: e.Generation, DesiredState: e.DesiredState, ConfigVersion: e.ConfigVersion,
		ActionID: e.ActionID, Payload: e.Payload}, split, attemptID, expires)
}

// commandFromIntent is the command of an intent's attempt. A job_start of
// a split job gets the job's split placement (task_nodes, node_data_ports
// and data_secret) here, at dispatch, from the jobs row: the secret is
// never part of the stored intent.
func commandFromIntent(i store.Intent, split *store.JobSplit, attemptID string, expires time.Time) wire.Command {
	if configKind(i.Kind) {
		// The arguments stored with the intent; the Hub adds the text of
		// the version and the secrets at dispatch (Hub.configCommand).
		var p wire.CommandPayload
		_ = json.Unmarshal(i.Payload, &p)
		return wire.Command{CommandID: i.ID, AttemptID: attemptID, Operation: i.Operation, NodeID: i.NodeID, ResourceID: i.ResourceID,
			Generation: i.Generation, ConfigVersion: i.ConfigVersion, ExpiresAt: wire.At(expires), Payload: p}
	}
	if jobKind(i.Kind) {
		var p wire.CommandPayload
		// The Hub wrote the payload itself; one it cannot read is sent empty
		// and the Agent refuses the command.
		_ = json.Unmarshal(i.Payload, &p)
		if split != nil && i.Kind == store.KindJob && i.Operation == wire.CommandJobStart {
			p.TaskNodes, p.NodeDataPorts, p.DataSecret = split.TaskNodes, split.NodeDataPorts, split.DataSecret
		}
		return wire.Command{CommandID: i.ID, AttemptID: attemptID, Operation: i.Operation, NodeID: i.NodeID, ResourceID: i.ResourceID,
			Generation: i.Generation, ActionID: i.ActionID, ExpiresAt: wire.At(expires), Payload: p}
	}
	op := wire.CommandStreamDesiredState
	if i.ActionID != "" {
		op = wire.CommandStreamRestart
	}
	return wire.Command{CommandID: i.ID, AttemptID: attemptID, Operation: op, NodeID: i.NodeID, ResourceID: i.ResourceID,
		Generation: i.Generation, ActionID: i.ActionID, ConfigVersion: i.ConfigVersion, ExpiresAt: wire.At(expires),
		Payload: wire.CommandPayload{State: i.DesiredState}}
}

// splitsOf reads the split placements of the split jobs whose job_start
// intents are among kinds/ops/ids (parallel slices), by job id.
func (h *Hub) splitsOf(ctx context.Context, kinds, ops, jobIDs []string) (map[string]store.JobSplit, error) {
	var ids []string
	for i := range kinds {
		if kinds[i] == store.KindJob && ops[i] == wire.CommandJobStart && !slices.Contains(ids, jobIDs[i]) {
			ids = append(ids, jobIDs[i])
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return h.st.JobSplits(ctx, ids)
}

// splitFor is the split placement of a job among splits, or nil.
func splitFor(splits map[string]store.JobSplit, jobID string) *store.JobSplit {
	if sp, ok := splits[jobID]; ok {
		return &sp
	}
	return nil
}

// jobKind reports whether an intent kind is a job's (desired state or
// one-shot command).
func jobKind(kind string) bool { return kind == store.KindJob || kind == store.KindJobCommand }

// commandCapabilities is what a node must advertise to execute an
// intent's command.
func commandCapabilities(kind string) []string {
	if configKind(kind) {
		return []string{wire.CapabilityConfigControl}
	}
	if jobKind(kind) {
		return []string{wire.CapabilityJobControl}
	}
	return []string{wire.CapabilityStreamControl}
}
