package stream

import (
	"context"
	"fmt"

	"github.com/flowplane/flowplane/internal/message"
)

// walItem is one batch on its way through WAL.Append.
type walItem struct {
	b    message.Batch
	ack  message.AckFunc
	seq  uint64
	ok   bool          // appended
	done chan struct{} // cap 1: appender -> forwarder
}

// startWALStage starts the appenders and the forwarder. Up to
// WALAppendDepth appends are in flight at once so that group-commit WALs
// can share their syncs; the forwarder still takes the batches in read
// order and lets none into the pipeline before its append returned.
func (p *pipeline) startWALStage() {
	n := p.s.cfg.WALAppendDepth
	p.walFree = make(chan *walItem, n)
	p.walWork = make(chan *walItem, n)
	p.walOrder = make(chan *walItem, n)
	for range n {
		p.walFree <- &walItem{done: make(chan struct{}, 1)}
		p.wg.Go(p.appender)
	}
	p.wg.Go(p.forwarder)
}

// walEnqueue is called by the reader for each batch read.
func (p *pipeline) walEnqueue(b message.Batch, ack message.AckFunc) {
	var it *walItem
	select {
	case it = <-p.walFree:
	case <-p.hard.Done():
		p.abandon(ack)
		return
	}
	it.b, it.ack = b, ack
	p.walOrder <- it
	p.walWork <- it
}

func (p *pipeline) appender() {
	s := p.s
	for it := range p.walWork {
		for attempt := 1; ; attempt++ {
			seq, err := s.cfg.WAL.Append(p.hard, it.b)
			if err == nil {
				it.seq, it.ok = seq, true
				break
			}
			if p.hard.Err() != nil {
				break
			}
			s.recordError(kindWAL, err)
			s.log.Warn("WAL append failed, will retry", "attempt", attempt, "err", err)
			if !sleep(p.hard, s.cfg.Retry.Delay(attempt)) {
				break
			}
			s.recordRetry(kindWAL)
		}
		it.done <- struct{}{}
	}
}

// forwarder acknowledges each durable batch to the input and passes it on,
// in read order; from then on the WAL entry stands for it.
func (p *pipeline) forwarder() {
	defer p.endStage()
	for it := range p.walOrder {
		<-it.done
		b, ack, seq, ok := it.b, it.ack, it.seq, it.ok
		it.b, it.ack, it.seq, it.ok = message.Batch{}, nil, 0, false
		p.walFree <- it
		if !ok {
			p.abandon(ack)
			continue
		}
		p.ack(ack, nil)
		p.toStage(b, p.walAck(seq))
	}
}

// walAck acknowledges the WAL entry once the batch was delivered. A batch
// given up on (error) keeps its entry, to be replayed after a restart.
func (p *pipeline) walAck(seq uint64) message.AckFunc {
	return func(_ context.Context, err error) error {
		if err != nil {
			return nil
		}
		if err := p.s.cfg.WAL.Ack(seq); err != nil {
			p.s.recordError(kindWAL, fmt.Errorf("ack %d: %w", seq, err))
		}
		return nil
	}
}
