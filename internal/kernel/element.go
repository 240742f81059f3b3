package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"

	"go.opentelemetry.io/otel/trace"

	"github.com/flowplane/flowplane/internal/dataplane"
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
	// tc is the span context an elemData batch continues (trace.go); nil
	// with tracing off or when the sender had none.
	tc *trace.SpanContext
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
	feeds   *chainOp      // the operator of the task it feeds
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
