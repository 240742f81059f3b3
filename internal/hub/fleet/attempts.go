package fleet

import (
	"slices"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/hub/reconcile"
	"github.com/flowplane/flowplane/internal/wire"
)

// RedeliverAfter is how long a command delivered to an Agent may stay
// unacknowledged before the next poll gets it again (the Agent died between
// the poll and its acknowledgement, or the answer was lost).
const RedeliverAfter = 10 * time.Second

// Flight is one attempt in flight: its command, its transport state
// (wire.OpDispatched or wire.OpAcknowledged), when it was dispatched and
// when it expires.
type Flight struct {
	Command      wire.Command
	State        string
	DispatchedAt time.Time
	ExpiresAt    time.Time
}

// flight is a Flight in the fleet, with when it was last handed to the
// Agent (zero: not yet).
type flight struct {
	Flight
	deliveredAt time.Time
}

// Enqueue puts attempts the store started in flight, on their nodes'
// queues when not acknowledged yet, and wakes the nodes' long-polls.
func (f *Fleet) Enqueue(fls ...Flight) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range fls {
		f.enqueueLocked(fl)
	}
}

func (f *Fleet) enqueueLocked(v Flight) {
	fl := &flight{Flight: v}
	f.inflight[fl.Command.AttemptID] = fl
	n := f.nodeLocked(fl.Command.NodeID)
	n.active++
	if fl.State == wire.OpDispatched {
		n.queue = append(n.queue, fl)
		if n.wake != nil {
			close(n.wake)
			n.wake = nil
		}
		n.wakeParkedLocked()
	}
}

// Acknowledge takes an attempt off its node's delivery queue; it stays in
// flight. It returns the attempt, when it was in flight.
func (f *Fleet) Acknowledge(attemptID string) (Flight, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl := f.movedLocked(attemptID)
	if fl == nil {
		return Flight{}, false
	}
	fl.State = wire.OpAcknowledged
	if n := f.nodes[fl.Command.NodeID]; n != nil {
		n.queue = slices.DeleteFunc(n.queue, func(q *flight) bool { return q == fl })
	}
	return fl.Flight, true
}

// Finish forgets an attempt that reached an outcome. It returns the
// attempt, when it was in flight.
func (f *Fleet) Finish(attemptID string) (Flight, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl := f.movedLocked(attemptID)
	if fl == nil {
		return Flight{}, false
	}
	delete(f.inflight, attemptID)
	if n := f.nodes[fl.Command.NodeID]; n != nil {
		n.queue = slices.DeleteFunc(n.queue, func(q *flight) bool { return q == fl })
		n.active = max(n.active-1, 0)
	}
	return fl.Flight, true
}

// movedLocked returns the attempt in flight that moved on, or nil. Its
// intent no longer waits for capacity. f.mu is held.
func (f *Fleet) movedLocked(attemptID string) *flight {
	fl := f.inflight[attemptID]
	if fl != nil {
		delete(f.nodeLocked(fl.Command.NodeID).capacityHit, fl.Command.CommandID)
	}
	return fl
}

// Attempts returns the attempts in flight, for reconcile.ExpireAttempts.
func (f *Fleet) Attempts() []reconcile.Attempt {
	f.mu.Lock()
	out := make([]reconcile.Attempt, 0, len(f.inflight))
	for id, fl := range f.inflight {
		out = append(out, reconcile.Attempt{AttemptID: id, IntentID: fl.Command.CommandID, NodeID: fl.Command.NodeID, State: fl.State, ExpiresAt: fl.ExpiresAt})
	}
	f.mu.Unlock()
	slices.SortFunc(out, func(a, b reconcile.Attempt) int { return strings.Compare(a.AttemptID, b.AttemptID) })
	return out
}

// WaitForCapacity notes that an intent waits for room on its node and
// reports whether it is the first time (so it is counted once).
func (f *Fleet) WaitForCapacity(nodeID, intentID string) (first bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodeLocked(nodeID)
	first = !n.capacityHit[intentID]
	n.capacityHit[intentID] = true
	return first
}

// Queue is one node's commands waiting for acknowledgement and attempts
// in flight.
type Queue struct {
	NodeID   string
	Queued   int
	InFlight int
}

// Queues returns the number of attempts in flight and the nodes with
// queued commands or attempts in flight, by id.
func (f *Fleet) Queues() (inFlight int, queues []Queue) {
	f.mu.Lock()
	inFlight = len(f.inflight)
	for id, n := range f.nodes {
		if len(n.queue) > 0 || n.active > 0 {
			queues = append(queues, Queue{NodeID: id, Queued: len(n.queue), InFlight: n.active})
		}
	}
	f.mu.Unlock()
	slices.SortFunc(queues, func(a, b Queue) int { return strings.Compare(a.NodeID, b.NodeID) })
	return inFlight, queues
}

// takeLocked returns the commands of node ready for delivery at now and
// marks them delivered, or a channel closed when one may be. f.mu is held.
func (f *Fleet) takeLocked(nodeID string, now time.Time) ([]wire.Command, <-chan struct{}) {
	n := f.nodeLocked(nodeID)
	var out []wire.Command
	queue := n.queue
	if n.forgotten {
		queue = nil // its commands wait for its next registration
	}
	for _, fl := range queue {
		if fl.deliveredAt.IsZero() || now.Sub(fl.deliveredAt) >= RedeliverAfter {
			fl.deliveredAt = now
			out = append(out, fl.Command)
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

// InFlight is the number of attempts in flight.
func (f *Fleet) InFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.inflight)
}

// DropFlights forgets every attempt in flight, the nodes' command queues
// and the dispatch marks: a Hub that stepped down from leading delivers
// nothing more of its term. The attempts stay in the store, where the next
// leader finds them.
func (f *Fleet) DropFlights() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inflight = map[string]*flight{}
	f.pending = map[string]int64{}
	for _, n := range f.nodes {
		n.queue, n.active = nil, 0
		clear(n.capacityHit)
	}
}
