package kernel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/operator"
	"github.com/flowplane/flowplane/internal/state"
)

type ctlKind uint8

const (
	ctlBarrier ctlKind = iota // source tasks: inject a barrier
	ctlFinish                 // source tasks: every source ended and the final checkpoint is durable
)

type control struct {
	kind ctlKind
	b    barrier
}

// taskAck is a task's acknowledgement of a checkpoint barrier.
type taskAck struct {
	task       string
	id         int64
	err        error
	artifact   *state.TaskArtifact
	positions  []state.SourcePosition
	txns       []state.SinkTxn // every prepared transaction not yet committed
	stateBytes int64
}

// ackGroup holds the acknowledgements of the source batches read before
// barrier id: they are called once checkpoint id is durable.
type ackGroup struct {
	id   int64
	acks []message.AckFunc
}

// task is one subtask of one chain: a goroutine running its operators.
// Everything but the atomics and the channels is owned by that goroutine.
type task struct {
	r    *attempt
	spec job.Task
	dir  string // the task's directory under the state root; "" without store
	// pinned names dir for the store, which opens its files by path
	// itself: dir opened through the job's FS and pinned there
	// (sandbox.FS.Pin), so a directory above it swapped for a link
	// cannot move the store; unpin lets it go once the store is closed.
	pinned string
	unpin  func() error

	ops     []*chainOp // chain order
	src     *chainOp   // the source operator when the chain starts with a source
	input   component.Input
	inputs  []*input
	routers []*router // every router of every chained operator
	sinks   []*sinkOp

	control    chan control
	commitUpTo atomic.Int64  // highest durable checkpoint; set by the coordinator
	commitWake chan struct{} // buffered(1): commitUpTo moved

	stateful []string // ids of its stateful operators
	store    *state.Store
	budget   *state.Budget
	restore  []state.TaskArtifact // old task artifacts overlapping its key groups
	restored bool

	wm        int64
	idle      bool
	committed int64
	closed    bool

	// source
	wmGen       *watermarkGen
	lastPos     []byte
	seekPos     []byte
	pendingAcks []message.AckFunc
	ackGroups   []ackGroup
	srcEnded    bool
	lastCommit  time.Time // of transactional sinks in a job without checkpoints
	dropped     counter
	readerDone  chan struct{}
	readerStop  context.CancelFunc
	restoredTxn map[string][][]byte // by sink operator id

	spanName string // of its chain spans, made at the first (trace.go)

	// observed
	status     atomic.Value // string
	obsWM      atomic.Int64
	recordsIn  atomic.Int64
	recordsOut atomic.Int64
}

// chainOp is one operator of a task's chain and the collector it emits
// into: what it emits goes to the chained operators after it by direct
// call and to other tasks through its routers.
type chainOp struct {
	t       *task
	pop     *job.Operator     // the operator in the plan
	op      operator.Operator // nil for a source
	sink    *sinkOp
	output  component.Output
	next    []*chainOp // chained operators fed by Emit
	late    []*chainOp // chained operators fed by EmitLate
	routers []*router  // edges to other tasks fed by Emit
	lateRt  []*router  // edges to other tasks fed by EmitLate
	out     []operator.Record
	lateOut []operator.Record
	in, emt counter
	lateDr  counter
	opened  bool
}

func (o *chainOp) Emit(r operator.Record)     { o.out = append(o.out, r) }
func (o *chainOp) EmitLate(r operator.Record) { o.lateOut = append(o.lateOut, r) }

func (t *task) setStatus(s string) { t.status.Store(s) }

// push runs a batch through o and everything chained after it.
func (t *task) push(ctx context.Context, o *chainOp, recs []operator.Record) error {
	if len(recs) == 0 {
		return nil
	}
	o.in.add(len(recs))
	if o.sink != nil {
		t.recordsOut.Add(int64(len(recs)))
		t.offer(o, recs)
	}
	if o.op == nil {
		o.out = append(o.out, recs...)
	} else if err := o.op.Process(ctx, recs, o); err != nil {
		return fmt.Errorf("operator %s: %w", o.pop.ID, err)
	}
	return t.drain(ctx, o)
}

// offer hands recs, at o, to the job's taps.
func (t *task) offer(o *chainOp, recs []operator.Record) {
	taps := t.r.j.opts.Taps
	if taps.Attached() == 0 {
		return
	}
	taps.OfferValues(o.pop.ID, len(recs), func(i int) any { return recs[i].Value })
}

// drain passes on what o emitted.
func (t *task) drain(ctx context.Context, o *chainOp) error {
	if out := o.out; len(out) > 0 {
		o.emt.add(len(out))
		t.offer(o, out)
		if len(o.routers) > 0 {
			t.recordsOut.Add(int64(len(out)))
		}
		for _, nx := range o.next {
			if err := t.push(ctx, nx, out); err != nil {
				return err
			}
		}
		for _, r := range o.routers {
			if err := r.route(ctx, out); err != nil {
				return err
			}
		}
		// A fresh slice: the consumers may keep the one they were given.
		o.out = make([]operator.Record, 0, cap(out))
	}
	if late := o.lateOut; len(late) > 0 {
		for _, nx := range o.late {
			if err := t.push(ctx, nx, late); err != nil {
				return err
			}
		}
		for _, r := range o.lateRt {
			if err := r.route(ctx, late); err != nil {
				return err
			}
		}
		o.lateOut = nil
	}
	return nil
}

// advance moves the task's watermark to wm: every operator in chain order,
// then downstream.
func (t *task) advance(ctx context.Context, wm int64) error {
	if wm <= t.wm {
		return nil
	}
	t.wm = wm
	t.obsWM.Store(wm)
	for _, o := range t.ops {
		if o.op == nil {
			continue
		}
		if err := o.op.OnWatermark(ctx, wm, o); err != nil {
			return fmt.Errorf("operator %s: watermark: %w", o.pop.ID, err)
		}
		if err := t.drain(ctx, o); err != nil {
			return err
		}
	}
	return t.broadcast(ctx, element{kind: elemWatermark, wm: wm})
}

func (t *task) broadcast(ctx context.Context, e element) error {
	for _, r := range t.routers {
		if err := r.broadcast(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

func (t *task) flush(ctx context.Context) error {
	for _, r := range t.routers {
		if err := r.flush(ctx); err != nil {
			return err
		}
	}
	return nil
}

// open prepares the store, restores state, connects the components and
// opens the operators.
func (t *task) open(ctx context.Context) error {
	r := t.r
	if len(t.stateful) > 0 && r.p.State != nil {
		if err := t.r.j.stateFS().RemoveAll(t.dir); err != nil {
			return err
		}
		if err := t.r.j.stateFS().MkdirAll(t.dir, 0o700); err != nil {
			return err
		}
		// Restoring at the same parallelism, the one old task's snapshot
		// is exactly this task's state: it becomes the store as
		// downloaded, without copying entry by entry.
		whole := len(t.restore) == 1 && t.restore[0].KeyGroups == t.spec.KeyGroups
		if whole {
			a := t.restore[0]
			if err := r.arts.Download(ctx, a.Path, filepath.Join(t.dir, "store")); err != nil {
				return fmt.Errorf("download state of task %s: %w", a.Task, err)
			}
		}
		pinned, unpin, err := r.j.stateFS().Pin(t.dir)
		if err != nil {
			return fmt.Errorf("open state store: %w", err)
		}
		s, err := state.Open(filepath.Join(pinned, "store"))
		if err != nil {
			_ = unpin()
			return fmt.Errorf("open state store: %w", err)
		}
		t.pinned, t.unpin = pinned, unpin
		t.store = s
		var maxBytes int64
		if r.p.State.MaxBytes != nil {
			maxBytes = *r.p.State.MaxBytes
		}
		t.budget = state.NewBudget(maxBytes)
		if len(t.restore) > 0 && !whole {
			if err := t.restoreState(ctx); err != nil {
				return err
			}
		}
	} else if t.budget == nil {
		t.budget = state.NewBudget(0)
	}
	if t.src != nil {
		if err := t.input.Connect(ctx); err != nil {
			return fmt.Errorf("source %s: connect: %w", t.src.pop.ID, err)
		}
		if rep, ok := t.input.(component.Replayable); ok && len(t.seekPos) > 0 && string(t.seekPos) != "null" {
			if err := rep.Seek(ctx, t.seekPos); err != nil {
				return fmt.Errorf("source %s: seek: %w", t.src.pop.ID, err)
			}
			t.lastPos = t.seekPos
		}
	}
	for _, o := range t.ops {
		if o.output == nil {
			continue
		}
		if err := o.output.Connect(ctx); err != nil {
			return fmt.Errorf("sink %s: connect: %w", o.pop.ID, err)
		}
		if o.sink.tx != nil {
			if err := o.sink.tx.Begin(ctx, o.pop.ID, t.spec.Subtask, t.restoredTxn[o.pop.ID]); err != nil {
				return fmt.Errorf("sink %s: begin: %w", o.pop.ID, err)
			}
		}
	}
	for _, o := range t.ops {
		if o.op == nil {
			continue
		}
		oc := &operator.Context{
			Plan: r.p, Operator: o.pop, Subtask: t.spec.Subtask, KeyGroups: t.spec.KeyGroups,
			Store: t.store, Budget: t.budget, Restored: t.restored,
			Now: r.j.opts.Now, Logger: r.j.log.With("operator", o.pop.ID, "subtask", t.spec.Subtask),
			LateDropped: o.lateDr.add,
		}
		if err := o.op.Open(ctx, oc); err != nil {
			return fmt.Errorf("operator %s: open: %w", o.pop.ID, err)
		}
		o.opened = true
	}
	return nil
}

// restoreState downloads the old task artifacts that hold part of this
// task's key groups and copies that part into the fresh store.
func (t *task) restoreState(ctx context.Context) error {
	base := filepath.Join(t.dir, "restore")
	defer t.r.j.stateFS().RemoveAll(base)
	dirs := make([]string, len(t.restore))
	_ = t.r.j.stateFS().RemoveAll(base)
	if err := t.r.j.stateFS().MkdirAll(base, 0o700); err != nil {
		return err
	}
	for i, a := range t.restore {
		dirs[i] = filepath.Join(base, strconv.Itoa(i))
		if err := t.r.arts.Download(ctx, a.Path, dirs[i]); err != nil {
			return fmt.Errorf("download state of task %s: %w", a.Task, err)
		}
	}
	if err := state.Restore(t.store, dirs, t.spec.KeyGroups); err != nil {
		return fmt.Errorf("restore state: %w", err)
	}
	return nil
}

// run is the task's goroutine body: open, the mailbox loop, and on the
// way out closing everything it opened.
func (t *task) run(ctx context.Context) (err error) {
	t.setStatus("starting")
	if err := t.open(ctx); err != nil {
		return err
	}
	t.r.ready()
	t.setStatus("running")
	if t.src != nil {
		return t.runSource(ctx)
	}
	return t.runInputs(ctx)
}

func (t *task) runInputs(ctx context.Context) error {
	merged := make(chan inElem)
	for i, in := range t.inputs {
		t.r.goroutine(func() {
			if err := in.forward(ctx, i, merged); err != nil {
				t.r.fail(fmt.Errorf("task %s: %w", t.spec.ID, err))
			}
		})
	}
	tick := time.NewTicker(t.r.j.opts.tick)
	defer tick.Stop()
	if len(t.inputs) == 0 {
		return t.finish(ctx)
	}
	for {
		select {
		case ie := <-merged:
			done, err := t.onElement(ctx, ie)
			if err != nil {
				return err
			}
			if done {
				return t.finish(ctx)
			}
		case <-t.commitWake:
			if err := t.commit(ctx); err != nil {
				return err
			}
		case <-tick.C:
			if err := t.onTick(ctx); err != nil {
				return err
			}
		case <-ctx.Done():
			t.commitOnExit()
			return context.Cause(ctx)
		}
	}
}

func (t *task) onElement(ctx context.Context, ie inElem) (done bool, err error) {
	in := t.inputs[ie.in]
	switch e := ie.e; e.kind {
	case elemData:
		t.recordsIn.Add(int64(len(e.recs)))
		if in.idle {
			in.idle = false
			if err := t.inputWatermark(ctx); err != nil {
				return false, err
			}
		}
		return false, t.tracedPush(ctx, in.feeds, e)
	case elemWatermark:
		in.idle = false
		if e.wm > in.wm {
			in.wm = e.wm
		}
		return false, t.inputWatermark(ctx)
	case elemIdle:
		in.idle = true
		return false, t.inputWatermark(ctx)
	case elemBarrier:
		in.barrier = e.b
		in.held = true
		return false, t.aligned(ctx)
	case elemEnd:
		in.ended = true
		if err := t.inputWatermark(ctx); err != nil {
			return false, err
		}
		if err := t.aligned(ctx); err != nil {
			return false, err
		}
		for _, in := range t.inputs {
			if !in.ended {
				return false, nil
			}
		}
		return true, nil
	}
	return false, nil
}

// inputWatermark recomputes the task's watermark: the minimum over inputs
// that neither ended nor are idle. When every input left is idle the task
// tells downstream it is idle too.
func (t *task) inputWatermark(ctx context.Context) error {
	wm, live, open := int64(math.MaxInt64), false, false
	for _, in := range t.inputs {
		if in.ended {
			continue
		}
		open = true
		if in.idle {
			continue
		}
		live = true
		wm = min(wm, in.wm)
	}
	if open && !live {
		if !t.idle {
			t.idle = true
			return t.broadcast(ctx, element{kind: elemIdle})
		}
		return nil
	}
	if t.idle && live {
		t.idle = false
		if wm <= t.wm { // tell downstream it is active again
			return t.broadcast(ctx, element{kind: elemWatermark, wm: t.wm})
		}
	}
	return t.advance(ctx, wm)
}

// aligned takes the checkpoint once every input that has not ended holds
// the barrier, then releases them.
func (t *task) aligned(ctx context.Context) error {
	var b barrier
	found := false
	for _, in := range t.inputs {
		if in.ended {
			continue
		}
		if !in.held {
			return nil
		}
		b, found = in.barrier, true
	}
	if !found {
		return nil
	}
	if err := t.checkpoint(ctx, b); err != nil {
		return err
	}
	for _, in := range t.inputs {
		if in.held {
			in.held = false
			in.release <- struct{}{}
		}
	}
	return nil
}

func (t *task) runSource(ctx context.Context) error {
	reads := make(chan readResult, 1)
	rctx, stop := context.WithCancel(ctx)
	t.readerStop = stop
	t.readerDone = make(chan struct{})
	go func() {
		defer close(t.readerDone)
		readLoop(rctx, t.input, reads)
	}()
	tick := time.NewTicker(t.r.j.opts.tick)
	defer tick.Stop()
	for {
		select {
		case rr := <-reads:
			if rr.err != nil {
				if errors.Is(rr.err, message.ErrEndOfInput) {
					reads = nil
					if err := t.sourceEnded(ctx); err != nil {
						return err
					}
					continue
				}
				return fmt.Errorf("source %s: read: %w", t.src.pop.ID, rr.err)
			}
			if err := t.sourceBatch(ctx, rr); err != nil {
				return err
			}
		case c := <-t.control:
			switch c.kind {
			case ctlBarrier:
				if err := t.checkpoint(ctx, c.b); err != nil {
					return err
				}
			case ctlFinish:
				return t.finish(ctx)
			}
		case <-t.commitWake:
			if err := t.commit(ctx); err != nil {
				return err
			}
		case <-tick.C:
			if err := t.onTick(ctx); err != nil {
				return err
			}
		case <-ctx.Done():
			t.commitOnExit()
			return context.Cause(ctx)
		}
	}
}

func (t *task) nowMs() int64 { return t.r.j.opts.Now().UnixMilli() }

func (t *task) sourceBatch(ctx context.Context, rr readResult) error {
	now := t.nowMs()
	recs, dropped := t.wmGen.records(rr.b, now)
	t.dropped.add(dropped)
	t.recordsIn.Add(int64(len(rr.b.Messages)))
	if rr.pos != nil {
		t.lastPos = rr.pos
	}
	var err error
	if t.r.j.opts.Tracer != nil {
		err = t.tracedSource(ctx, rr.b, recs)
	} else {
		err = t.push(ctx, t.src, recs)
	}
	if err != nil {
		return err
	}
	if rr.ack != nil {
		if t.r.checkpointing {
			t.pendingAcks = append(t.pendingAcks, rr.ack)
		} else if err := rr.ack(ctx, nil); err != nil {
			t.r.j.log.Warn("source ack failed", "operator", t.src.pop.ID, "error", err)
		}
	}
	if rr.clock != nil {
		return t.applyClock(ctx, *rr.clock)
	}
	if t.idle {
		t.idle = false
		return t.broadcast(ctx, element{kind: elemWatermark, wm: t.wm})
	}
	return nil
}

// applyClock sets the watermark and idleness a Clocked input reported.
func (t *task) applyClock(ctx context.Context, c sourceClock) error {
	if c.idle {
		if t.idle {
			return nil
		}
		t.idle = true
		return t.broadcast(ctx, element{kind: elemIdle})
	}
	if t.idle {
		t.idle = false
		if c.wm <= t.wm { // tell downstream it is active again
			return t.broadcast(ctx, element{kind: elemWatermark, wm: t.wm})
		}
	}
	return t.advance(ctx, c.wm)
}

// sourceEnded sends the final watermark and tells the coordinator; the
// task then waits for the final checkpoint and finish.
func (t *task) sourceEnded(ctx context.Context) error {
	t.srcEnded = true
	if err := t.advance(ctx, math.MaxInt64); err != nil {
		return err
	}
	if err := t.flush(ctx); err != nil {
		return err
	}
	t.setStatus("ended")
	select {
	case t.r.ended <- t.spec.ID:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (t *task) onTick(ctx context.Context) error {
	if err := t.flush(ctx); err != nil {
		return err
	}
	if !t.r.checkpointing && len(t.sinks) > 0 {
		if now := t.r.j.opts.Now(); now.Sub(t.lastCommit) >= time.Second {
			t.lastCommit = now
			for _, s := range t.sinks {
				if err := s.commitNow(ctx); err != nil {
					return err
				}
			}
		}
	}
	if t.src == nil || t.srcEnded {
		return nil
	}
	if _, ok := t.input.(Clocked); ok {
		return nil // its watermark comes with its reads (applyClock)
	}
	now := t.nowMs()
	if t.wmGen.becameIdle(now) {
		t.idle = true
		return t.broadcast(ctx, element{kind: elemIdle})
	}
	// Watermarks go out on the timer, not after every batch: each one
	// flushes the partial batches of every channel.
	return t.advance(ctx, t.wmGen.watermark(now))
}

// checkpoint snapshots the task at barrier b, forwards the barrier and
// uploads the snapshot in the background.
func (t *task) checkpoint(ctx context.Context, b barrier) error {
	for _, o := range t.ops {
		if o.op == nil {
			continue
		}
		if err := o.op.Snapshot(ctx, b.id); err != nil {
			return fmt.Errorf("operator %s: snapshot %d: %w", o.pop.ID, b.id, err)
		}
	}
	ack := taskAck{task: t.spec.ID, id: b.id}
	for _, s := range t.sinks {
		ack.txns = append(ack.txns, s.pending...)
	}
	if t.src != nil {
		if _, ok := t.input.(component.Replayable); ok {
			ack.positions = []state.SourcePosition{{Operator: t.src.pop.ID, Subtask: t.spec.Subtask, Position: t.lastPos}}
		}
		if len(t.pendingAcks) > 0 {
			t.ackGroups = append(t.ackGroups, ackGroup{id: b.id, acks: t.pendingAcks})
			t.pendingAcks = nil
		}
	}
	var dir string
	if t.store != nil {
		dir = filepath.Join(t.dir, "checkpoints", strconv.FormatInt(b.id, 10))
		if err := t.r.j.stateFS().MkdirAll(filepath.Dir(dir), 0o700); err != nil {
			return err
		}
		_ = t.r.j.stateFS().RemoveAll(dir)
		// Pebble writes the checkpoint by path: through the pinned name
		// of the same directory.
		if err := t.store.Checkpoint(filepath.Join(t.pinned, "checkpoints", strconv.FormatInt(b.id, 10))); err != nil {
			return fmt.Errorf("checkpoint %d of the state store: %w", b.id, err)
		}
		ack.stateBytes = t.store.DiskBytes() + t.budget.Used()
	}
	if err := t.broadcast(ctx, element{kind: elemBarrier, b: b}); err != nil {
		return err
	}
	r := t.r
	r.goroutine(func() {
		if dir != "" {
			prefix := r.artifactPath(b, t.spec)
			n, err := r.arts.Upload(ctx, prefix, dir)
			_ = r.j.stateFS().RemoveAll(dir)
			ack.err = err
			ack.artifact = &state.TaskArtifact{
				Task: t.spec.ID, Operators: t.stateful, Subtask: t.spec.Subtask,
				KeyGroups: t.spec.KeyGroups, Path: prefix, Bytes: n,
			}
		}
		select {
		case r.acks <- ack:
		case <-ctx.Done():
		}
	})
	return nil
}

// commit tells the operators the checkpoints up to commitUpTo are durable
// and acknowledges the source batches they cover.
func (t *task) commit(ctx context.Context) error {
	id := t.commitUpTo.Load()
	if id <= t.committed {
		return nil
	}
	t.committed = id
	for _, o := range t.ops {
		if o.op == nil {
			continue
		}
		if err := o.op.Commit(ctx, id); err != nil {
			return fmt.Errorf("operator %s: commit %d: %w", o.pop.ID, id, err)
		}
	}
	k := 0
	for _, g := range t.ackGroups {
		if g.id > id {
			break
		}
		for _, a := range g.acks {
			if err := a(ctx, nil); err != nil {
				t.r.j.log.Warn("source ack failed", "operator", t.src.pop.ID, "error", err)
			}
		}
		k++
	}
	t.ackGroups = t.ackGroups[k:]
	return nil
}

// commitOnExit commits what a durable manifest covers when the task is
// cancelled before it heard of it (a stop right after a savepoint): the
// manifest is the commit point, so committing is always right, and the
// output is visible without waiting for the next start.
func (t *task) commitOnExit() {
	if t.commitUpTo.Load() <= t.committed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := t.commit(ctx); err != nil {
		t.r.j.log.Warn("commit at exit failed; the next start commits it", "task", t.spec.ID, "error", err)
	}
}

// finish ends the task at the end of input: commit what is durable, close
// the operators, tell downstream.
func (t *task) finish(ctx context.Context) error {
	if err := t.commit(ctx); err != nil {
		return err
	}
	if !t.r.checkpointing {
		for _, s := range t.sinks {
			if err := s.commitNow(ctx); err != nil {
				return err
			}
		}
	}
	if err := t.closeOps(ctx); err != nil {
		return err
	}
	if err := t.broadcast(ctx, element{kind: elemEnd}); err != nil {
		return err
	}
	t.setStatus("finished")
	return nil
}

func (t *task) closeOps(ctx context.Context) error {
	if t.closed {
		return nil
	}
	t.closed = true
	var errs []error
	for _, o := range t.ops {
		if !o.opened {
			continue
		}
		if err := o.op.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("operator %s: close: %w", o.pop.ID, err))
		}
	}
	return errors.Join(errs...)
}

// teardown closes what the task opened; it runs after the task's loop
// returned, whatever the reason, once the attempt is cancelled or done.
func (t *task) teardown() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if t.readerStop != nil {
		t.readerStop()
		<-t.readerDone
	}
	_ = t.closeOps(ctx)
	if t.input != nil {
		_ = t.input.Close(ctx)
	}
	for _, o := range t.ops {
		if o.output != nil {
			_ = o.output.Close(ctx)
		}
	}
	if t.store != nil {
		_ = t.store.Close()
		_ = t.unpin()
		t.store = nil
	}
	if s, _ := t.status.Load().(string); s != "finished" && s != "failed" {
		t.setStatus("stopped")
	}
}
