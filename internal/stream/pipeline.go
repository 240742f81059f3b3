package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/tap"
	"github.com/flowplane/flowplane/internal/tracing"
)

// ErrProcessorPanic wraps the value of a panic raised by a processor; the
// batch is then handled as failed.
var ErrProcessorPanic = errors.New("processor panicked")

// slot carries one batch from submission to acknowledgement. There are
// MaxInFlight slots; holding one is the right to be in flight, so the free
// list is the back-pressure semaphore and no slot is allocated per batch.
type slot struct {
	in  message.Batch
	ack message.AckFunc

	// Set by the worker, read by the output loop after done (or after the
	// slot arrived on order in direct mode).
	out  []message.Batch
	orig []message.Message // copy of in.Messages taken before processing; kept on failure
	err  error

	trace batchTrace // zero with tracing off

	one        [1]message.Batch
	bufA, bufB []message.Batch // reused when processors fan out
	done       chan struct{}   // cap 1: worker -> output loop (not used in direct mode)
}

// pipeline is the running machinery of one Run. Goroutines:
//
//	reader      input.Read -> (WAL.Append | buffer.Write | submit)
//	forwarder   in read order: wait until durable, ack input, queue (WAL only)
//	feeder      WAL replay, then queue -> buffer.Write | submit (WAL only)
//	bufferLoop  buffer.Read -> submit (buffer only)
//	workers     processors (ThreadNum of them)
//	outputLoop  in submission order: output / error_output writes, acks
//
// Exactly one goroutine submits at a time (the last stage of the entry
// chain), and the goroutine that ends the entry chain closes the intake.
type pipeline struct {
	s *Stream
	// stop ends reading (ctx cancelled or a fatal error); hard ends
	// everything (the stop deadline); ackCtx is never cancelled.
	stop, hard, ackCtx context.Context
	fail               func(error)

	direct bool // one worker: it passes slots to the output loop in order
	free   chan *slot
	work   chan *slot
	order  chan *slot

	wal *walStage // nil without a WAL

	inputEnded   atomic.Bool // the input returned ErrEndOfInput
	bufferClosed atomic.Bool // the buffer was closed (flushed) by the entry chain

	wg   sync.WaitGroup
	done chan struct{} // closed when every goroutine returned
}

func (s *Stream) startPipeline(stop, hard, ackCtx context.Context, fail func(error)) *pipeline {
	n := s.cfg.MaxInFlight
	p := &pipeline{
		s: s, stop: stop, hard: hard, ackCtx: ackCtx, fail: fail,
		direct: s.cfg.ThreadNum == 1,
		free:   make(chan *slot, n),
		work:   make(chan *slot, n),
		order:  make(chan *slot, n),
		done:   make(chan struct{}),
	}
	for range n {
		sl := &slot{}
		if !p.direct {
			sl.done = make(chan struct{}, 1)
		}
		p.free <- sl
	}
	p.wg.Go(p.outputLoop)
	if p.direct {
		p.wg.Go(func() {
			p.worker()
			close(p.order)
		})
	} else {
		for range s.cfg.ThreadNum {
			p.wg.Go(p.worker)
		}
	}
	if s.cfg.Buffer != nil {
		p.startPump()
		p.wg.Go(p.bufferLoop)
	}
	if s.cfg.WAL != nil {
		p.startWALStage()
	}
	p.wg.Go(p.readLoop)
	go func() {
		p.wg.Wait()
		close(p.done)
	}()
	return p
}

// submit hands a batch to the workers, waiting for a free slot. It returns
// false when the stop deadline passed first; the batch is then abandoned.
func (p *pipeline) submit(b message.Batch, ack message.AckFunc) bool {
	var (
		bt batchTrace
		in trace.Span
	)
	if p.s.cfg.Tracer != nil {
		bt, in = p.startTrace(b)
	}
	var sl *slot
	select {
	case sl = <-p.free:
	default:
		select {
		case sl = <-p.free:
		case <-p.hard.Done():
			tracing.End(in, ErrStopTimeout)
			tracing.End(bt.span, ErrStopTimeout)
			p.abandon(ack)
			return false
		}
	}
	tracing.End(in, nil)
	sl.in, sl.ack, sl.trace = b, ack, bt
	p.s.inFlight.Add(1)
	if p.s.m != nil {
		p.s.m.inFlight.Inc()
	}
	// Neither send blocks: the channels hold as many slots as exist.
	if !p.direct {
		p.order <- sl
	}
	p.work <- sl
	return true
}

// closeIntake tells the workers (and the output loop) that no more batches
// come; it is called once by the end of the entry chain.
func (p *pipeline) closeIntake() {
	close(p.work)
	if !p.direct {
		close(p.order)
	}
}

func (p *pipeline) worker() {
	var scratch []message.Message
	timed := p.s.m != nil && len(p.s.cfg.Processors) > 0
	for sl := range p.work {
		if timed {
			start := time.Now()
			p.process(sl, &scratch)
			p.s.m.processing.Observe(time.Since(start).Seconds())
		} else {
			p.process(sl, &scratch)
		}
		if p.direct {
			p.order <- sl
		} else {
			sl.done <- struct{}{}
		}
	}
}

// process runs the processors over sl.in and leaves the result in sl.
// scratch is the worker's reusable copy buffer for the original messages;
// on failure the slot takes it over.
func (p *pipeline) process(sl *slot, scratch *[]message.Message) {
	procs := p.s.cfg.Processors
	sl.one[0] = sl.in
	batches := sl.one[:1]
	if len(procs) == 0 {
		p.toOutput(sl, batches, nil, scratch)
		return
	}
	// Processors may change the messages of the batch they are given; the
	// copy keeps the original for error_output.
	orig := append((*scratch)[:0], sl.in.Messages...)
	*scratch = orig
	useA := true
	for i, pr := range procs {
		if len(batches) == 1 {
			out, err := p.runStage(sl, i, pr, batches[0])
			if err != nil {
				p.failed(sl, i, err, orig, scratch)
				return
			}
			p.s.offerProcessed(i+p.s.staged, out)
			batches = out
			continue
		}
		next := sl.bufB[:0]
		if useA {
			next = sl.bufA[:0]
		}
		for _, b := range batches {
			out, err := p.runStage(sl, i, pr, b)
			if err != nil {
				p.failed(sl, i, err, orig, scratch)
				return
			}
			p.s.offerProcessed(i+p.s.staged, out)
			next = append(next, out...)
		}
		if useA {
			sl.bufA = next
		} else {
			sl.bufB = next
		}
		useA = !useA
		batches = next
	}
	if p.toOutput(sl, batches, orig, scratch) {
		clear(orig) // do not keep the batch's payloads alive until the next one
	}
}

// toOutput leaves batches in sl for the output, first turning tables
// (from columnar processors, a columnar input or a window's join) into
// messages for an output that does not read tables. It reports false when
// that failed and the slot holds the failure (and orig, for error_output).
func (p *pipeline) toOutput(sl *slot, batches []message.Batch, orig []message.Message, scratch *[]message.Message) bool {
	if !component.IsColumnar(p.s.cfg.Output) {
		for i := range batches {
			if err := columnar.Flatten(&batches[i]); err != nil {
				p.failWith(sl, fmt.Errorf("output: turning the table into messages: %w", err), orig, scratch)
				return false
			}
		}
	}
	sl.out = batches
	return true
}

// runStage runs processor i over b, in a span of its own when the batch
// is traced.
func (p *pipeline) runStage(sl *slot, i int, pr component.Processor, b message.Batch) ([]message.Batch, error) {
	ctx, span := p.stage(sl.trace, p.hard, p.s.names.processor(i))
	out, err := p.run(ctx, pr, b)
	tracing.End(span, err)
	return out, err
}

// run calls one processor, first turning a table into messages for a
// processor that does not read tables.
func (p *pipeline) run(ctx context.Context, pr component.Processor, b message.Batch) ([]message.Batch, error) {
	if b.Table != nil && !component.IsColumnar(pr) {
		if err := columnar.Flatten(&b); err != nil {
			return nil, fmt.Errorf("turning the table into messages: %w", err)
		}
	}
	return safeProcess(ctx, pr, b)
}

func (p *pipeline) failed(sl *slot, i int, err error, orig []message.Message, scratch *[]message.Message) {
	p.failWith(sl, fmt.Errorf("processors[%d]: %w", i+p.s.staged, err), orig, scratch)
}

// failWith records a failed slot. The original batch goes to
// error_output as messages: an input's table (the sql input's) is
// turned into messages for it.
func (p *pipeline) failWith(sl *slot, err error, orig []message.Message, scratch *[]message.Message) {
	sl.err = err
	sl.orig = orig
	if sl.in.Table != nil {
		c := sl.in
		if columnar.Flatten(&c) == nil {
			sl.orig = c.Messages
		}
	}
	*scratch = nil
}

func safeProcess(ctx context.Context, p component.Processor, b message.Batch) (out []message.Batch, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("%w: %v", ErrProcessorPanic, r)
		}
	}()
	return p.Process(ctx, b)
}

func (p *pipeline) outputLoop() {
	for sl := range p.order {
		if !p.direct {
			<-sl.done
		}
		p.deliver(sl)
		p.release(sl)
	}
}

// deliver writes what was made of one input batch, in order, and
// acknowledges it.
func (p *pipeline) deliver(sl *slot) {
	s := p.s
	if p.hard.Err() != nil {
		p.abandon(sl.ack)
		return
	}
	if sl.err != nil {
		p.deliverFailed(sl)
		return
	}
	ctx, span := p.stage(sl.trace, p.hard, "output")
	for _, b := range sl.out {
		n := b.Len()
		if n == 0 {
			continue
		}
		if !p.write(ctx, s.cfg.Output, kindOutput, b) {
			tracing.End(span, ErrStopTimeout)
			p.abandon(sl.ack)
			return
		}
		s.sent.Add(uint64(n))
		if s.m != nil {
			s.m.sentOut.Add(float64(n))
		}
		s.cfg.Taps.Offer(tap.PointOutput, b)
	}
	tracing.End(span, nil)
	p.ack(sl.ack, nil)
}

// deliverFailed routes the original batch of a failed processor call to
// error_output, or drops it (logged and counted) when there is none.
func (p *pipeline) deliverFailed(sl *slot) {
	s := p.s
	s.recordError(kindProcessor, sl.err)
	orig := message.Batch{Messages: sl.orig}
	if s.cfg.ErrorOutput == nil {
		n := orig.Len()
		if ok, held := s.dropLog.allow(time.Now()); ok {
			s.log.Error("processor failed, batch dropped (no error_output)", "err", sl.err, "messages", n, "suppressed_since_last", held)
		}
		s.dropped.Add(uint64(n))
		if s.m != nil {
			s.m.dropped.Add(float64(n))
		}
		p.ack(sl.ack, nil)
		return
	}
	text := sl.err.Error()
	for i := range orig.Messages {
		orig.Messages[i].SetMeta(message.MetaError, text)
	}
	ctx, span := p.stage(sl.trace, p.hard, "error_output")
	ok := p.write(ctx, s.cfg.ErrorOutput, kindErrorOutput, orig)
	if !ok {
		tracing.End(span, ErrStopTimeout)
		p.abandon(sl.ack)
		return
	}
	tracing.End(span, nil)
	s.sent.Add(uint64(orig.Len()))
	if s.m != nil {
		s.m.sentErr.Add(float64(orig.Len()))
	}
	p.ack(sl.ack, nil)
}

func (p *pipeline) release(sl *slot) {
	if sl.trace.span != nil {
		err := sl.err
		if p.hard.Err() != nil && err == nil {
			err = ErrStopTimeout
		}
		tracing.End(sl.trace.span, err)
		sl.trace = batchTrace{}
	}
	sl.in, sl.ack, sl.out, sl.orig, sl.err = message.Batch{}, nil, nil, nil, nil
	sl.one[0] = message.Batch{}
	clear(sl.bufA[:cap(sl.bufA)])
	clear(sl.bufB[:cap(sl.bufB)])
	p.s.inFlight.Add(-1)
	if p.s.m != nil {
		p.s.m.inFlight.Dec()
	}
	p.free <- sl
}

// write calls out.Write until it accepts b, with backoff between attempts.
// It returns false when the stop deadline ends the attempts. ctx is p.hard,
// or a context beneath it holding the batch's output span.
func (p *pipeline) write(ctx context.Context, out component.Output, k kind, b message.Batch) bool {
	for attempt := 1; ; attempt++ {
		err := out.Write(ctx, b)
		if err == nil {
			return true
		}
		if p.hard.Err() != nil {
			return false
		}
		p.s.recordError(k, err)
		p.s.log.Warn("write failed, will retry", "component", string(k), "attempt", attempt, "err", err)
		if !sleep(p.hard, p.s.cfg.Retry.Delay(attempt)) {
			return false
		}
		p.s.recordRetry(k)
	}
}

func (p *pipeline) ack(ack message.AckFunc, err error) {
	if aerr := ack(p.ackCtx, err); aerr != nil {
		p.s.recordError(kindInput, fmt.Errorf("acknowledge: %w", aerr))
	}
}

// abandon gives a batch back to its input at the stop deadline.
func (p *pipeline) abandon(ack message.AckFunc) {
	p.s.abandoned.Add(1)
	p.ack(ack, ErrStopTimeout)
}

// sleep waits d or until ctx ends, reporting whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
