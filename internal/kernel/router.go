package kernel

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/operator"
)

// keyer is a compiled key expression (operator.Key).
type keyer interface {
	Eval(r *operator.Record, dst []byte) (canonical []byte, value any, err error)
}

// outlet is where a router sends the elements for one downstream subtask:
// a channel to a task of this node, or a data-plane stream to another node
// (netOutlet). Same code path, different writer.
type outlet interface {
	send(ctx context.Context, e element) error
}

// chanOutlet is a channel to a task of this node.
type chanOutlet chan element

func (c chanOutlet) send(ctx context.Context, e element) error { return send(ctx, c, e) }

// router writes what one operator of a task emits on one edge to the
// outlets of the downstream subtasks this sender is connected to. It
// gathers records per downstream subtask into batches of batchSize. It is
// owned by the task's goroutine.
type router struct {
	edge    *job.Edge
	outs    []outlet            // by downstream subtask; nil where not connected
	targets []int               // downstream subtasks connected, for broadcasts
	bufs    [][]operator.Record // the partial batch of each downstream subtask
	subtask int                 // the sending subtask
	next    int                 // rebalance: the downstream subtask of the next record, mod len(outs)
	key     keyer               // partitioned: the edge's key
	maxPar  int                 // partitioned: the plan's max parallelism (key groups)
	kbuf    []byte
	// traced: record in tcs, for each partial batch, the span context
	// current when its first record came (trace.go).
	traced bool
	tcs    []*trace.SpanContext
}

// connected reports whether sender subtask i of an edge at parallelism up
// has a channel to receiver j at parallelism down. Rebalanced and
// partitioned edges connect every pair; forward and late edges connect i to
// i mod down, and every receiver to sender j mod up, so nobody is left
// without an input when the parallelisms differ.
func connected(mode string, i, j, up, down int) bool {
	if mode == job.Rebalance || mode == job.Partitioned {
		return true
	}
	return i%down == j || j%up == i
}

// route buffers recs for the downstream subtasks the edge's mode chooses,
// sending each batch that fills up.
func (r *router) route(ctx context.Context, recs []operator.Record) error {
	switch r.edge.Mode {
	case job.Rebalance:
		return r.roundRobin(ctx, recs)
	case job.Partitioned:
		return r.byKey(ctx, recs)
	default: // forward, late
		return r.toSubtask(ctx, r.subtask%len(r.outs), recs)
	}
}

// roundRobin hands the records one by one to the connected downstream
// subtasks in turn.
func (r *router) roundRobin(ctx context.Context, recs []operator.Record) error {
	n := len(r.outs)
	for i := range recs {
		for r.outs[r.next%n] == nil {
			r.next++
		}
		if err := r.buffer(ctx, r.next%n, recs[i]); err != nil {
			return err
		}
		r.next++
	}
	return nil
}

// byKey hands each record to the downstream subtask that owns the key
// group of its key.
func (r *router) byKey(ctx context.Context, recs []operator.Record) error {
	for i := range recs {
		k, _, err := r.key.Eval(&recs[i], r.kbuf[:0])
		if err != nil {
			// As the keyed operator would: a key that cannot be
			// computed fails the task rather than losing records.
			return fmt.Errorf("edge %s: key %s: %w", r.edge.ID, r.edge.Key, err)
		}
		r.kbuf = k
		sub := job.SubtaskOf(job.KeyGroup(k, r.maxPar), len(r.outs), r.maxPar)
		if err := r.buffer(ctx, sub, recs[i]); err != nil {
			return err
		}
	}
	return nil
}

// toSubtask hands every record to downstream subtask sub.
func (r *router) toSubtask(ctx context.Context, sub int, recs []operator.Record) error {
	for i := range recs {
		if err := r.buffer(ctx, sub, recs[i]); err != nil {
			return err
		}
	}
	return nil
}

// buffer adds rec to the partial batch of downstream subtask sub and sends
// the batch once it is full.
func (r *router) buffer(ctx context.Context, sub int, rec operator.Record) error {
	if r.bufs[sub] == nil {
		r.bufs[sub] = make([]operator.Record, 0, batchSize)
	}
	if r.traced && len(r.bufs[sub]) == 0 {
		r.tcs[sub] = spanOf(ctx)
	}
	r.bufs[sub] = append(r.bufs[sub], rec)
	if len(r.bufs[sub]) >= batchSize {
		return r.flushTo(ctx, sub)
	}
	return nil
}

// flushTo sends the partial batch of downstream subtask sub.
func (r *router) flushTo(ctx context.Context, sub int) error {
	if len(r.bufs[sub]) == 0 {
		return nil
	}
	e := element{kind: elemData, recs: r.bufs[sub]}
	r.bufs[sub] = nil
	if r.traced {
		e.tc, r.tcs[sub] = r.tcs[sub], nil
	}
	return r.outs[sub].send(ctx, e)
}

// flush sends every partial batch.
func (r *router) flush(ctx context.Context) error {
	for _, sub := range r.targets {
		if err := r.flushTo(ctx, sub); err != nil {
			return err
		}
	}
	return nil
}

// broadcast flushes, then sends e to every connected subtask.
func (r *router) broadcast(ctx context.Context, e element) error {
	if err := r.flush(ctx); err != nil {
		return err
	}
	for _, sub := range r.targets {
		if err := r.outs[sub].send(ctx, e); err != nil {
			return err
		}
	}
	return nil
}
