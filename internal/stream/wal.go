package stream

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/flowplane/flowplane/internal/message"
)

// The WAL stage decouples the input from the pipeline:
//
//	reader     input.Read -> WAL.Append (in read order, so seqs follow it)
//	forwarder  in read order: wait until durable, ack the input, queue.push
//	feeder     WAL.Replay, then queue.next -> buffer.Write | submit
//
// Once an append is durable the input is acknowledged and the batch waits in
// the queue, however long the pipeline is stuck (an output outage): the
// queue holds up to WALMemoryBytes (and maxWALMemBatches) of batches in
// memory and leaves the rest in the WAL's files, from which the feeder reads
// them back in order. The input is not read while the bytes appended and not
// yet delivered reach WALMaxBytes.

// maxWALMemBatches bounds the batches the WAL queue holds in memory
// whatever their size, since a batch costs more memory than its encoding.
const maxWALMemBatches = 4096

// walItem is one batch whose append is under way.
type walItem struct {
	b    message.Batch
	ack  message.AckFunc
	seq  uint64
	size int64
	done <-chan error
}

// walEntry is a durable batch waiting for the pipeline.
type walEntry struct {
	b    message.Batch
	seq  uint64
	size int64
}

// walQueue carries durable entries from the forwarder to the feeder in
// sequence order, and counts the bytes not yet delivered.
type walQueue struct {
	memLimit, maxBytes int64
	gauge              func(total int64) // nil without metrics; called under mu

	ready chan struct{} // buffered(1): something to take, or closed
	room  chan struct{} // buffered(1): undelivered bytes went down

	mu sync.Mutex // guards the fields below
	// mem holds the newest entries while the feeder keeps up; entries in
	// [diskFrom, diskTo) are only in the WAL and come after every entry of
	// mem. While that range is not empty, new entries join it.
	mem              []walEntry
	memBytes         int64
	diskFrom, diskTo uint64
	closed           bool
	undelivered      int64 // bytes of entries appended or recovered, not yet acknowledged
}

func newWALQueue(memLimit, maxBytes, recovered int64, gauge func(int64)) *walQueue {
	q := &walQueue{
		memLimit: memLimit, maxBytes: maxBytes, gauge: gauge,
		ready: make(chan struct{}, 1), room: make(chan struct{}, 1),
	}
	q.add(recovered)
	return q
}

// add counts delta undelivered bytes (negative once delivered).
func (q *walQueue) add(delta int64) {
	q.mu.Lock()
	q.undelivered += delta
	if q.gauge != nil {
		q.gauge(q.undelivered) // under mu, so that the gauge ends at the last total
	}
	q.mu.Unlock()
	if delta < 0 {
		wake(q.room)
	}
}

// waitRoom waits until the undelivered bytes are below maxBytes. It reports
// false when ctx ended first.
func (q *walQueue) waitRoom(ctx context.Context) bool {
	for {
		q.mu.Lock()
		ok := q.undelivered < q.maxBytes
		q.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-q.room:
		case <-ctx.Done():
			return false
		}
	}
}

// backlog returns the undelivered bytes.
func (q *walQueue) backlog() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.undelivered
}

// push queues a durable entry; it never blocks. Past memLimit the batch is
// let go: the feeder reads it back from the WAL.
func (q *walQueue) push(e walEntry) {
	q.mu.Lock()
	switch {
	case q.diskFrom < q.diskTo:
		q.diskTo = e.seq + 1
	case len(q.mem) > 0 && (q.memBytes+e.size > q.memLimit || len(q.mem) >= maxWALMemBatches):
		q.diskFrom, q.diskTo = e.seq, e.seq+1
	default:
		q.mem = append(q.mem, e)
		q.memBytes += e.size
	}
	q.mu.Unlock()
	wake(q.ready)
}

// close says that nothing more is pushed.
func (q *walQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	wake(q.ready)
}

// next waits for the next entry: one held in memory (disk false), or the
// range [from, to) of entries to read from the WAL (disk true). ok is false
// once the queue is closed and empty, or ctx ended.
func (q *walQueue) next(ctx context.Context) (e walEntry, from, to uint64, disk, ok bool) {
	for ctx.Err() == nil {
		q.mu.Lock()
		switch {
		case len(q.mem) > 0:
			e = q.mem[0]
			q.mem[0] = walEntry{}
			q.mem = q.mem[1:]
			q.memBytes -= e.size
			if len(q.mem) == 0 {
				q.mem = nil // let the backing array go
			}
			q.mu.Unlock()
			return e, 0, 0, false, true
		case q.diskFrom < q.diskTo:
			from, to = q.diskFrom, q.diskTo
			q.mu.Unlock()
			return walEntry{}, from, to, true, true
		case q.closed:
			q.mu.Unlock()
			return walEntry{}, 0, 0, false, false
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-ctx.Done():
		}
	}
	return walEntry{}, 0, 0, false, false
}

// readTo records that the entries below seq were read back from the WAL.
func (q *walQueue) readTo(seq uint64) {
	q.mu.Lock()
	q.diskFrom = max(q.diskFrom, seq)
	q.mu.Unlock()
}

func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// walStage is the WAL part of a pipeline.
type walStage struct {
	q      *walQueue
	slots  chan struct{} // appends under way (cap WALAppendDepth)
	order  chan walItem  // reader -> forwarder, in read order
	failed atomic.Int32  // consecutive failed appends (paces the reader)
}

// startWALStage starts the forwarder and the feeder; the reader calls
// walEnqueue.
func (p *pipeline) startWALStage() {
	s := p.s
	var gauge func(int64)
	if s.m != nil {
		gauge = func(n int64) { s.m.walBacklog.Set(float64(n)) }
	}
	n := s.cfg.WALAppendDepth
	p.wal = &walStage{
		q:     newWALQueue(s.cfg.WALMemoryBytes, s.cfg.WALMaxBytes, s.cfg.WAL.ReplayBytes(), gauge),
		slots: make(chan struct{}, n),
		order: make(chan walItem, n),
	}
	s.walQueue.Store(p.wal.q)
	p.wg.Go(p.forwarder)
	p.wg.Go(p.feeder)
}

// walEnqueue is called by the reader for each batch read. It waits while
// the WAL holds WALMaxBytes not yet delivered, or WALAppendDepth appends are
// under way, then starts the append.
func (p *pipeline) walEnqueue(b message.Batch, ack message.AckFunc) {
	s, ws := p.s, p.wal
	if !ws.q.waitRoom(p.hard) {
		p.abandon(ack)
		return
	}
	select {
	case ws.slots <- struct{}{}:
	case <-p.hard.Done():
		p.abandon(ack)
		return
	}
	// The forwarder counts a failure before it frees the slot.
	if n := ws.failed.Load(); n > 0 {
		if !sleep(p.hard, s.cfg.Retry.Delay(int(n))) {
			<-ws.slots
			p.abandon(ack)
			return
		}
		s.recordRetry(kindWAL)
	}
	seq, size, done := s.cfg.WAL.Append(b)
	ws.q.add(size)
	ws.order <- walItem{b: b, ack: ack, seq: seq, size: size, done: done} // never blocks: slots bound it
}

// forwarder acknowledges each batch to the input once its append is
// durable, in read order, and queues it for the feeder: from then on the
// WAL entry stands for it. A failed append is acknowledged to the input
// with the error, so that it can redeliver.
func (p *pipeline) forwarder() {
	s, ws := p.s, p.wal
	defer ws.q.close()
	for it := range ws.order {
		var err error
		select {
		case err = <-it.done:
		case <-p.hard.Done():
			<-ws.slots
			ws.q.add(-it.size)
			p.abandon(it.ack)
			continue
		}
		if err != nil {
			ws.q.add(-it.size)
			ws.failed.Add(1)
			<-ws.slots
			s.recordError(kindWAL, fmt.Errorf("append: %w", err))
			s.log.Warn("WAL append failed; the input gets the batch back", "err", err)
			p.ack(it.ack, fmt.Errorf("%w: %w", ErrWALAppend, err))
			continue
		}
		ws.failed.Store(0)
		<-ws.slots
		p.ack(it.ack, nil)
		ws.q.push(walEntry{b: it.b, seq: it.seq, size: it.size})
	}
}

// feeder replays what the WAL held at start, then passes the queued
// entries on in sequence order, reading back from the WAL those the queue
// let go. When the stream stops it stops at once: what it did not pass on
// stays in the WAL for the next start.
func (p *pipeline) feeder() {
	s, q := p.s, p.wal.q
	defer p.endStage()
	if !p.replay() {
		return
	}
	for {
		e, from, to, disk, ok := q.next(p.stop)
		if !ok {
			return
		}
		if disk {
			seq, b, size, found, err := s.cfg.WAL.Read(p.stop, from, to)
			if err != nil {
				if p.stop.Err() == nil {
					s.recordError(kindWAL, err)
					p.fail(fmt.Errorf("%w: %w", ErrWALRead, err))
				}
				return
			}
			if !found {
				// Only an append that failed after taking its seq leaves a
				// gap, and then the WAL fails every later append.
				s.log.Warn("WAL entries to read back are missing; skipped", "from", from, "to", to)
				q.readTo(to)
				continue
			}
			q.readTo(seq + 1)
			e = walEntry{b: b, seq: seq, size: size}
		}
		p.toStage(e.b, p.walAck(e.seq, e.size))
	}
}

// replay feeds the WAL's entries left from before the start to the
// pipeline. It reports whether feeding may go on.
func (p *pipeline) replay() bool {
	s := p.s
	n := 0
	err := s.cfg.WAL.Replay(p.stop, func(seq uint64, b message.Batch, size int64) error {
		if err := p.stop.Err(); err != nil {
			return err
		}
		n++
		s.received.Add(uint64(b.Len()))
		if s.m != nil {
			s.m.received.Add(float64(b.Len()))
		}
		p.toStage(b, p.walAck(seq, size))
		return nil
	})
	if n > 0 {
		s.log.Info("replayed WAL entries", "batches", n)
	}
	if err != nil && p.stop.Err() == nil {
		s.recordError(kindWAL, err)
		p.fail(fmt.Errorf("%w: %w", ErrReplay, err))
		return false
	}
	return p.stop.Err() == nil
}

// walAck acknowledges the WAL entry once the batch was delivered. A batch
// given up on (error) keeps its entry, to be replayed after a restart.
func (p *pipeline) walAck(seq uint64, size int64) message.AckFunc {
	return func(_ context.Context, err error) error {
		if err != nil {
			return nil
		}
		if err := p.s.cfg.WAL.Ack(seq); err != nil {
			p.s.recordError(kindWAL, fmt.Errorf("ack %d: %w", seq, err))
		}
		p.wal.q.add(-size)
		return nil
	}
}
