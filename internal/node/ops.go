package node

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// Operation names on a node.
const (
	OpStart    = "start"
	OpStop     = "stop"
	OpRestart  = "restart"
	OpApply    = "configuration_apply"
	OpRollback = "configuration_rollback"
)

// Retention of finished operation records (spec limits).
const (
	maxTerminalOps = 4096
	terminalOpTTL  = 24 * time.Hour
)

var (
	errOpNotFound       = errors.New("operation not found")
	errOpNotCancellable = errors.New("operation is no longer pending")
)

// op is one accepted operation and the work that carries it out.
type op struct {
	rec wire.Operation
	run func(ctx context.Context) (result any, err error)
	// onCancel undoes what accepting the operation changed; it runs once
	// the operation is cancelled, outside the operations' lock.
	onCancel func()
	// done is closed once rec reached a terminal state.
	done chan struct{}
}

func terminal(state string) bool {
	switch state {
	case wire.OpSucceeded, wire.OpFailed, wire.OpCancelled, wire.OpTimedOut, wire.OpSuperseded:
		return true
	}
	return false
}

// operations records every operation and runs them in order per resource:
// one worker goroutine per resource while its queue is non-empty, so a
// queued operation can still be cancelled.
type operations struct {
	now    func() time.Time
	onDone func(wire.Operation) // called after an operation reached a terminal state

	mu     sync.Mutex // guards the fields below
	byID   map[string]*op
	order  []*op            // creation order
	queues map[string][]*op // resource -> not yet started, FIFO
	busy   map[string]bool  // resource -> a worker runs
}

func newOperations(now func() time.Time, onDone func(wire.Operation)) *operations {
	return &operations{now: now, onDone: onDone, byID: map[string]*op{}, queues: map[string][]*op{}, busy: map[string]bool{}}
}

// submit records o as pending and queues it behind the resource's earlier
// operations.
func (s *operations) submit(o *op) wire.Operation {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := wire.At(s.now())
	o.rec.State, o.rec.CreatedAt, o.rec.UpdatedAt = wire.OpPending, now, now
	o.done = make(chan struct{})
	s.byID[o.rec.OperationID] = o
	s.order = append(s.order, o)
	r := o.rec.ResourceID
	s.queues[r] = append(s.queues[r], o)
	if !s.busy[r] {
		s.busy[r] = true
		go s.work(r)
	}
	s.pruneLocked()
	return o.rec
}

func (s *operations) work(resource string) {
	for {
		s.mu.Lock()
		q := s.queues[resource]
		if len(q) == 0 {
			delete(s.queues, resource)
			delete(s.busy, resource)
			s.mu.Unlock()
			return
		}
		o := q[0]
		s.queues[resource] = q[1:]
		now := wire.At(s.now())
		o.rec.State, o.rec.DispatchedAt, o.rec.UpdatedAt = wire.OpDispatched, now, now
		s.mu.Unlock()

		result, err := o.run(context.Background())

		s.mu.Lock()
		now = wire.At(s.now())
		o.rec.Result, o.rec.UpdatedAt, o.rec.FinishedAt = result, now, now
		if err != nil {
			o.rec.State = wire.OpFailed
			o.rec.Failure = failureOf(err)
		} else {
			o.rec.State = wire.OpSucceeded
		}
		rec := o.rec
		s.mu.Unlock()
		if s.onDone != nil {
			s.onDone(rec)
		}
		close(o.done)
	}
}

// opError lets the work of an operation classify its failure.
type opError struct {
	Class, Code, Message string
}

func (e *opError) Error() string { return e.Message }

func failureOf(err error) *wire.Failure {
	var oe *opError
	if errors.As(err, &oe) {
		return &wire.Failure{Class: oe.Class, Code: oe.Code, Message: oe.Message}
	}
	return &wire.Failure{Class: "engine", Code: "engine_error", Message: err.Error()}
}

// cancel cancels a pending operation. After it started it is not
// cancellable and its outcome stays visible.
func (s *operations) cancel(id string) (wire.Operation, error) {
	s.mu.Lock()
	o, ok := s.byID[id]
	if !ok {
		s.mu.Unlock()
		return wire.Operation{}, errOpNotFound
	}
	if o.rec.State != wire.OpPending {
		rec := o.rec
		s.mu.Unlock()
		return rec, errOpNotCancellable
	}
	q := s.queues[o.rec.ResourceID]
	s.queues[o.rec.ResourceID] = slices.DeleteFunc(q, func(x *op) bool { return x == o })
	now := wire.At(s.now())
	o.rec.State, o.rec.UpdatedAt, o.rec.FinishedAt = wire.OpCancelled, now, now
	rec := o.rec
	s.mu.Unlock()
	if o.onCancel != nil {
		o.onCancel()
	}
	close(o.done)
	return rec, nil
}

// wait returns an operation's record once it reached a terminal state, or
// ctx's error first.
func (s *operations) wait(ctx context.Context, id string) (wire.Operation, error) {
	s.mu.Lock()
	o, ok := s.byID[id]
	s.mu.Unlock()
	if !ok {
		return wire.Operation{}, errOpNotFound
	}
	select {
	case <-o.done:
	case <-ctx.Done():
		return wire.Operation{}, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return o.rec, nil
}

func (s *operations) get(id string) (wire.Operation, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.byID[id]
	if !ok {
		return wire.Operation{}, false
	}
	return o.rec, true
}

// opFilter selects operations by the fields named as in the record.
type opFilter struct {
	NodeID, ResourceID, Operation, State, CorrelationID string
}

func (f opFilter) match(r *wire.Operation) bool {
	return (f.NodeID == "" || r.NodeID == f.NodeID) &&
		(f.ResourceID == "" || r.ResourceID == f.ResourceID) &&
		(f.Operation == "" || r.Operation == f.Operation) &&
		(f.State == "" || r.State == f.State) &&
		(f.CorrelationID == "" || r.CorrelationID == f.CorrelationID)
}

// list returns matching operations, newest first.
func (s *operations) list(f opFilter) []wire.Operation {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []wire.Operation
	for i := len(s.order) - 1; i >= 0; i-- {
		if r := &s.order[i].rec; f.match(r) {
			out = append(out, *r)
		}
	}
	return out
}

// active reports whether the resource has an operation not yet finished.
func (s *operations) active(resource string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy[resource]
}

// latestOf returns the newest operation on a resource for which kind
// holds of its operation name (a stream and a job may share an id).
func (s *operations) latestOf(resource string, kind func(operation string) bool) (wire.Operation, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.order) - 1; i >= 0; i-- {
		if r := s.order[i].rec; r.ResourceID == resource && kind(r.Operation) {
			return s.order[i].rec, true
		}
	}
	return wire.Operation{}, false
}

// pruneLocked drops finished records beyond the retention limits; pending
// and running ones are never dropped.
func (s *operations) pruneLocked() {
	cutoff := s.now().Add(-terminalOpTTL)
	terminalCount := 0
	for _, o := range s.order {
		if terminal(o.rec.State) {
			terminalCount++
		}
	}
	keep := s.order[:0]
	for _, o := range s.order {
		if terminal(o.rec.State) && (terminalCount > maxTerminalOps || o.rec.FinishedAt.Before(cutoff)) {
			terminalCount--
			delete(s.byID, o.rec.OperationID)
			continue
		}
		keep = append(keep, o)
	}
	clear(s.order[len(keep):])
	s.order = keep
}
