package fleet

import (
	"crypto/sha256"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// DefaultLeaseTTL is the lease of a node that did not ask for another.
const DefaultLeaseTTL = 15 * time.Second

// Fleet is the Hub's in-memory view of its nodes. The zero value is not
// usable; call New.
type Fleet struct {
	// now is the Hub's clock, read when a parked poll wakes.
	now func() time.Time
	// listener takes the connections of answered parked polls back to the
	// HTTP server; nil: polls are not parked.
	listener atomic.Pointer[Listener]

	mu       sync.Mutex // guards everything below
	nodes    map[string]*node
	sessions map[[sha256.Size]byte]Session
	// sessionOf is each node's current session key: a new registration
	// drops the old one without scanning every session.
	sessionOf map[string][sha256.Size]byte
	inflight  map[string]*flight // by attempt id
	// pending holds the nodes that may have unprocessed outbox rows, each
	// with the sequence number of its latest mark, so that a pass that read
	// the outbox before a mark does not clear it.
	pending map[string]int64
	markSeq int64
	closed  bool          // Shutdown ran: nothing parks, answers close their connection
	done    chan struct{} // closed with closed
}

// node is one node as the Hub sees it now. Fleet.mu guards it.
type node struct {
	node       store.Node // as last written (mode, capabilities, version, ...)
	leaseTTL   time.Duration
	leaseUntil time.Time
	online     bool
	reportBoot string
	reportSeq  int64
	observed   []store.ObservedStream         // as last accepted, by stream id; replaced, never edited
	counters   map[string]wire.StreamCounters // by stream, from the latest report (not durable)
	cfgVersion string
	// cfg is the configuration object of the last report (nil: none yet).
	cfg        *wire.ReportConfiguration
	metrics    map[string]float64
	reportedAt time.Time
	// fresh: a report was accepted since the Hub started, and since the
	// node last came back online or registered a new boot.
	fresh   bool
	queue   []*flight     // commands not yet acknowledged, oldest first
	wake    chan struct{} // closed when queue grows; nil while nobody waits
	active  int           // attempts in flight
	pollers int           // long-polls waiting now
	parked  []*parkedPoll // long-polls waiting without a goroutine (park.go)
	// forgotten: an operator or the node GC forgot the node and it has
	// not registered since; nothing is delivered to it.
	forgotten   bool
	capacityHit map[string]bool
	// changes counts what this Hub wrote of the node's mode and what it
	// advertises (SetMode, Advertise): Sync takes those from a store read
	// only if none was written here since the read began (Changes).
	changes int64
}

// New returns an empty fleet. now is the Hub's clock.
func New(now func() time.Time) *Fleet {
	return &Fleet{now: now, nodes: map[string]*node{}, sessions: map[[sha256.Size]byte]Session{},
		sessionOf: map[string][sha256.Size]byte{}, inflight: map[string]*flight{}, pending: map[string]int64{},
		done: make(chan struct{})}
}

// Restore replaces the nodes, the dispatch marks and the attempts in flight
// with what the store holds: nodes (all unavailable until their next
// heartbeat) with their observed streams by node, the nodes with
// unprocessed outbox rows, and the attempts not finished. The session
// cache stays: sessions are checked against the store when not cached.
func (f *Fleet) Restore(nodes []store.Node, observed map[string][]store.ObservedStream, pending []string, flights []Flight) {
	r := restored(nodes, observed, flights)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes, f.inflight, f.pending = r.nodes, r.inflight, map[string]int64{}
	for _, id := range pending {
		f.markLocked(id)
	}
}

// Reload is Restore for a Hub that is serving already (one that starts
// leading): the nodes it has seen keep their liveness, their latest
// counters and configuration, and their waiting long-polls, which get the
// commands in flight at once.
func (f *Fleet) Reload(nodes []store.Node, observed map[string][]store.ObservedStream, pending []string, flights []Flight) {
	r := restored(nodes, observed, flights)
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, n := range r.nodes {
		old := f.nodes[id]
		if old == nil {
			continue
		}
		n.leaseTTL, n.leaseUntil, n.online, n.fresh = old.leaseTTL, old.leaseUntil, old.online, old.fresh
		n.counters, n.cfg = old.counters, old.cfg
		n.pollers, n.parked, n.wake = old.pollers, old.parked, old.wake
		if len(n.queue) > 0 {
			if n.wake != nil {
				close(n.wake)
				n.wake = nil
			}
			n.wakeParkedLocked()
		}
	}
	f.nodes, f.inflight, f.pending = r.nodes, r.inflight, map[string]int64{}
	for _, id := range pending {
		f.markLocked(id)
	}
}

// restored is a fleet of nodes and flights as the store holds them.
func restored(nodes []store.Node, observed map[string][]store.ObservedStream, flights []Flight) *Fleet {
	r := &Fleet{nodes: map[string]*node{}, inflight: map[string]*flight{}}
	for _, n := range nodes {
		ns := r.nodeLocked(n.NodeID)
		ns.node = n
		if n.LeaseTTL > 0 {
			ns.leaseTTL = n.LeaseTTL
		}
		ns.reportBoot, ns.reportSeq, ns.reportedAt, ns.cfgVersion, ns.metrics = n.ReportBootID, n.ReportSeq, n.ReportedAt, n.ConfigVersion, n.Metrics
		ns.observed = observed[n.NodeID]
	}
	for _, fl := range flights {
		r.enqueueLocked(fl)
	}
	return r
}

// nodeLocked returns the state of id, creating an empty one. f.mu is held.
func (f *Fleet) nodeLocked(id string) *node {
	n := f.nodes[id]
	if n == nil {
		n = &node{node: store.Node{NodeID: id, Mode: wire.NodeModeActive}, leaseTTL: DefaultLeaseTTL, capacityHit: map[string]bool{}}
		f.nodes[id] = n
	}
	return n
}

// observing reports whether the node's stored observation is current (see
// reconcile.Node.Fresh).
func (n *node) observing() bool { return n != nil && n.online && n.fresh }

// status is the node's liveness as API.md names it.
func (n *node) status() string {
	switch {
	case n == nil, n.node.RegisteredAt.IsZero():
		return reconcile.StatusUnknown
	case n.online:
		return reconcile.StatusOnline
	}
	return reconcile.StatusUnavailable
}

// Node is a copy of what the fleet knows of one node now. Observed,
// Counters and Metrics are shared: read them, never modify them.
type Node struct {
	NodeID           string
	BootID           string
	Version          string
	ProtocolVersion  int
	Capabilities     []string // a copy, sorted
	DataAddress      string
	DataFingerprint  string
	Mode             string
	RegisteredAt     time.Time // zero: the node never registered (it only has state the Hub keeps for it)
	SessionExpiresAt time.Time
	Restarts         int64

	Status     string // reconcile.StatusOnline, StatusUnavailable or StatusUnknown
	Online     bool
	Observing  bool // online, and a report was accepted since it came back (reconcile.Node.Fresh)
	LeaseTTL   time.Duration
	LeaseUntil time.Time

	ReportSeq     int64
	ReportedAt    time.Time // the latest report, accepted or saying nothing new
	ConfigVersion string    // of the latest accepted report
	// Configuration is the configuration object of the latest report that
	// carried one, or the stored one until a report came (nil: none known).
	Configuration *wire.ReportConfiguration
	Observed      []store.ObservedStream
	Counters      map[string]wire.StreamCounters
	Metrics       map[string]float64

	Queued  int // commands not acknowledged yet
	Active  int // attempts in flight
	Pollers int // long-polls waiting now
}

// snapshot copies n. f.mu is held.
func (n *node) snapshot() Node {
	return Node{NodeID: n.node.NodeID, BootID: n.node.BootID, Version: n.node.Version, ProtocolVersion: n.node.ProtocolVersion,
		Capabilities: slices.Clone(n.node.Capabilities), DataAddress: n.node.DataAddress, DataFingerprint: n.node.DataFingerprint, Mode: n.node.Mode,
		RegisteredAt: n.node.RegisteredAt, SessionExpiresAt: n.node.SessionExpiresAt, Restarts: n.node.Restarts,
		Status: n.status(), Online: n.online, Observing: n.observing(), LeaseTTL: n.leaseTTL, LeaseUntil: n.leaseUntil,
		ReportSeq: n.reportSeq, ReportedAt: n.reportedAt, ConfigVersion: n.cfgVersion, Observed: n.observed,
		Counters: n.counters, Metrics: n.metrics, Queued: len(n.queue), Active: n.active, Pollers: n.pollers,
		Configuration: n.configuration()}
}

// configuration is n's latest configuration object, a copy. f.mu is held.
func (n *node) configuration() *wire.ReportConfiguration {
	switch {
	case n.cfg != nil:
		c := *n.cfg
		return &c
	case n.node.Config != nil:
		c := n.node.Config.ReportConfiguration
		return &c
	}
	return nil
}

// Node returns a copy of node id, and whether the fleet knows it (a node
// it knows may not have registered: see Node.RegisteredAt).
func (f *Fleet) Node(id string) (Node, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodes[id]
	if n == nil {
		return Node{NodeID: id, Status: reconcile.StatusUnknown, Mode: wire.NodeModeActive}, false
	}
	return n.snapshot(), true
}

// Nodes returns a copy of every node the fleet knows, by id.
func (f *Fleet) Nodes() []Node {
	f.mu.Lock()
	out := make([]Node, 0, len(f.nodes))
	for _, n := range f.nodes {
		out = append(out, n.snapshot())
	}
	f.mu.Unlock()
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.NodeID, b.NodeID) })
	return out
}

// Status is node id's liveness (reconcile.StatusUnknown for a node that
// never registered).
func (f *Fleet) Status(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[id].status()
}

// Observing reports whether node id's stored observations are current:
// it is online and reported since it came back.
func (f *Fleet) Observing(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[id].observing()
}

// ReconcileNode is what the pure decisions know of node id.
func (f *Fleet) ReconcileNode(id string) reconcile.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodes[id]
	if n == nil {
		return reconcile.Node{Status: reconcile.StatusUnknown, Mode: wire.NodeModeActive}
	}
	return reconcile.Node{Status: n.status(), Mode: n.node.Mode, Capabilities: slices.Clone(n.node.Capabilities), Active: n.active, Fresh: n.fresh}
}

// SetMode records node id's mode, which the store changed. A node made
// active is marked for dispatch: what waited for it may go now. It returns
// the node after the change.
func (f *Fleet) SetMode(id, mode string) Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodeLocked(id)
	n.node.Mode = mode
	n.changes++
	if mode == wire.NodeModeActive {
		f.markLocked(id)
	}
	return n.snapshot()
}

// Mark notes that nodes may have outbox rows to dispatch: the next
// dispatch pass reads theirs.
func (f *Fleet) Mark(ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		f.markLocked(id)
	}
}

// markLocked is Mark of one node. f.mu is held.
func (f *Fleet) markLocked(id string) {
	f.markSeq++
	f.pending[id] = f.markSeq
}

// Pending is the marked nodes a dispatch pass reads the outbox of, as
// Fleet.Pending found them.
type Pending struct {
	// Nodes are the marked nodes that can take a command now: online and
	// active (rows of the others wait in the outbox).
	Nodes []string
	marks map[string]int64
}

// Pending returns the marked nodes that can take a command now, by id.
func (f *Fleet) Pending() Pending {
	f.mu.Lock()
	p := Pending{marks: map[string]int64{}}
	for id, mark := range f.pending {
		if n := f.nodes[id]; n != nil && n.online && n.node.Mode == wire.NodeModeActive {
			p.Nodes = append(p.Nodes, id)
			p.marks[id] = mark
		}
	}
	f.mu.Unlock()
	slices.Sort(p.Nodes)
	return p
}

// Settle drops the marks of p's nodes that have no row left (left[id] is
// false), unless a node was marked again since p was read: the write that
// marked it may have come after the pass read the outbox.
func (f *Fleet) Settle(p Pending, left map[string]bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range p.Nodes {
		if !left[id] && f.pending[id] == p.marks[id] {
			delete(f.pending, id)
		}
	}
}

// ObservedView is a stored observation of a stream of node id as the
// operator API shows it: with the counters of the node's latest report
// (kept in memory only), when it last said so, and whether it is stale.
func (f *Fleet) ObservedView(id string, o store.ObservedStream) wire.StreamObserved {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodes[id]
	if n == nil {
		return observedView(o, nil, time.Time{}, false)
	}
	return observedView(o, n.counters, n.reportedAt, n.observing())
}

// ObservedView is o, a stream n reports, as the operator API shows it
// (Fleet.ObservedView).
func (n Node) ObservedView(o store.ObservedStream) wire.StreamObserved {
	return observedView(o, n.Counters, n.ReportedAt, n.Observing)
}

func observedView(o store.ObservedStream, counters map[string]wire.StreamCounters, reportedAt time.Time, observing bool) wire.StreamObserved {
	v := wire.StreamObserved{State: o.State, Generation: o.Generation, ConfigVersion: o.ConfigVersion, ActionID: o.ActionID,
		LastError: o.LastError, LastErrorAt: wire.At(o.LastErrorAt), ReportedAt: wire.At(o.UpdatedAt), Counters: counters[o.StreamID]}
	if reportedAt.After(o.UpdatedAt) {
		v.ReportedAt = wire.At(reportedAt) // a later report said the same
	}
	v.Stale = !observing
	return v
}

// Observed returns a copy of node id's latest accepted observation of a
// stream, as the store holds it, or nil.
func (f *Fleet) Observed(id, streamID string) *store.ObservedStream {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodes[id]
	if n == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(n.observed, streamID, func(o store.ObservedStream, id string) int { return strings.Compare(o.StreamID, id) })
	if !ok {
		return nil
	}
	o := n.observed[i]
	if !o.LastErrorAt.IsZero() {
		o.LastErrorAt = time.UnixMilli(o.LastErrorAt.UnixMilli()).UTC() // stored in milliseconds
	}
	return &o
}
