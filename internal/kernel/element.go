package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/flowplane/flowplane/internal/dataplane"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/operator"
)

const (
	// channelCapacity is the number of elements a channel between two
	// subtasks holds: the bound that makes a slow consumer slow its
	// producers.
	channelCapacity = 16
	// batchSize is the most records a data element carries.
	batchSize = 1024
)

type elemKind uint8

const (
	elemData elemKind = iota
	elemWatermark
	elemBarrier
	elemIdle // the sender has no data for now: leave it out of the minimum
	elemEnd  // the sender will send nothing more
)

// barrier is checkpoint id's barrier; savepoint tells the kind.
type barrier struct {
	id        int64
	savepoint bool
}

func (b barrier) kind() string {
	if b.savepoint {
		return "savepoint"
	}
	return "checkpoint"
}

// element is what travels on a channel between two subtasks, in order.
type element struct {
	kind elemKind
	recs []operator.Record // elemData; owned by the receiver
	wm   int64             // elemWatermark
	b    barrier           // elemBarrier
}

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
// outlets of the downstream subtasks this sender is connected to. It is
// owned by the task's goroutine.
type router struct {
	edge    *job.Edge
	outs    []outlet // by downstream subtask; nil where not connected
	targets []int    // downstream subtasks connected, for broadcasts
	bufs    [][]operator.Record
	subtask int
	rr      int
	key     keyer
	maxPar  int
	kbuf    []byte
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

func (r *router) route(ctx context.Context, recs []operator.Record) error {
	n := len(r.outs)
	switch r.edge.Mode {
	case job.Rebalance:
		for i := range recs {
			for r.outs[r.rr%n] == nil {
				r.rr++
			}
			if err := r.add(ctx, r.rr%n, recs[i]); err != nil {
				return err
			}
			r.rr++
		}
	case job.Partitioned:
		for i := range recs {
			k, _, err := r.key.Eval(&recs[i], r.kbuf[:0])
			if err != nil {
				// As the keyed operator would: a key that cannot be
				// computed fails the task rather than losing records.
				return fmt.Errorf("edge %s: key %s: %w", r.edge.ID, r.edge.Key, err)
			}
			r.kbuf = k
			t := job.SubtaskOf(job.KeyGroup(k, r.maxPar), n, r.maxPar)
			if err := r.add(ctx, t, recs[i]); err != nil {
				return err
			}
		}
	default: // forward, late
		t := r.subtask % n
		for i := range recs {
			if err := r.add(ctx, t, recs[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *router) add(ctx context.Context, t int, rec operator.Record) error {
	if r.bufs[t] == nil {
		r.bufs[t] = make([]operator.Record, 0, batchSize)
	}
	r.bufs[t] = append(r.bufs[t], rec)
	if len(r.bufs[t]) >= batchSize {
		return r.flushOne(ctx, t)
	}
	return nil
}

func (r *router) flushOne(ctx context.Context, t int) error {
	if len(r.bufs[t]) == 0 {
		return nil
	}
	e := element{kind: elemData, recs: r.bufs[t]}
	r.bufs[t] = nil
	return r.outs[t].send(ctx, e)
}

// flush sends every partial batch.
func (r *router) flush(ctx context.Context) error {
	for _, t := range r.targets {
		if err := r.flushOne(ctx, t); err != nil {
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
	for _, t := range r.targets {
		if err := r.outs[t].send(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

func send(ctx context.Context, ch chan element, e element) error {
	select {
	case ch <- e:
		return nil
	default:
	}
	select {
	case ch <- e:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// input is one channel into a task, from one upstream subtask on one edge:
// ch from a task of this node, or rcv from a task on another node.
type input struct {
	ch      chan element
	rcv     *dataplane.Receiver
	node    *node         // the operator of the task it feeds
	release chan struct{} // lets the forwarder read past a barrier
	wm      int64
	idle    bool
	ended   bool
	held    bool    // the forwarder waits after barrier
	barrier barrier // the barrier it is held at
}

// inElem is an element tagged with the input it came from.
type inElem struct {
	in int
	e  element
}

// forward moves elements of one input to the task's merged channel. After
// a barrier it waits for release, so the task aligns without buffering: an
// input that delivered barrier N is not read until N arrived on all.
func (in *input) forward(ctx context.Context, idx int, merged chan<- inElem) error {
	for {
		var e element
		if in.rcv != nil {
			f, err := in.rcv.Recv(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if errors.Is(err, io.EOF) {
					err = errors.New("the stream ended before its end of input")
				}
				return fmt.Errorf("input from another node: %w", err)
			}
			if e, err = decodeElement(f); err != nil {
				return fmt.Errorf("input from another node: %w", err)
			}
		} else {
			select {
			case e = <-in.ch:
			case <-ctx.Done():
				return nil
			}
		}
		select {
		case merged <- inElem{idx, e}:
		case <-ctx.Done():
			return nil
		}
		switch e.kind {
		case elemBarrier:
			select {
			case <-in.release:
			case <-ctx.Done():
				return nil
			}
		case elemEnd:
			return nil
		}
	}
}
