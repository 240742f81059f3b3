package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/message"
	"github.com/flowplane/flowplane/internal/tap"
)

// abandonDrainTimeout bounds how long, after the stop deadline, the stream
// waits for a closed buffer to hand back what it still holds.
const abandonDrainTimeout = time.Second

// readLoop owns input.Read. It reads until the input ends or the stream
// stops, and then ends the entry chain (with a WAL, the feeder ends it).
func (p *pipeline) readLoop() {
	s := p.s
	defer func() {
		if s.cfg.WAL != nil {
			close(p.wal.order)
		} else {
			p.endStage()
		}
	}()
	for attempt := 0; ; {
		b, ack, err := s.cfg.Input.Read(p.stop)
		if err != nil {
			if errors.Is(err, message.ErrEndOfInput) {
				p.inputEnded.Store(true)
				return
			}
			if p.stop.Err() != nil {
				return
			}
			attempt++
			s.recordError(kindInput, err)
			s.log.Warn("input read failed, will retry", "attempt", attempt, "err", err)
			if !sleep(p.stop, s.cfg.Retry.Delay(attempt)) {
				return
			}
			s.recordRetry(kindInput)
			continue
		}
		attempt = 0
		if ack == nil {
			ack = message.NoopAck
		}
		n := b.Len()
		if n == 0 {
			p.ack(ack, nil)
			continue
		}
		if b.Table != nil && (s.cfg.WAL != nil || s.cfg.Buffer != nil) {
			// The WAL and buffers hold messages; a table from the input
			// (the sql input's) is turned into messages first.
			if err := columnar.Flatten(&b); err != nil {
				attempt++
				s.recordError(kindInput, err)
				p.ack(ack, err) // handed back to the input, which may redeliver it
				if !sleep(p.stop, s.cfg.Retry.Delay(attempt)) {
					return
				}
				continue
			}
		}
		s.received.Add(uint64(n))
		if s.m != nil {
			s.m.received.Add(float64(n))
		}
		s.cfg.Taps.Offer(tap.PointInput, b)
		if s.cfg.WAL != nil {
			p.walEnqueue(b, ack)
		} else {
			p.toStage(b, ack)
		}
	}
}

// toStage passes a batch to the buffer, or straight to the workers.
func (p *pipeline) toStage(b message.Batch, ack message.AckFunc) {
	s := p.s
	if s.cfg.Buffer == nil {
		p.submit(b, ack)
		return
	}
	p.writeTo(s.cfg.Buffer, b, ack)
}

// endStage is called once when nothing more enters the stage after the
// input (and WAL): the buffer is closed so that it flushes, or the intake
// of the workers is closed.
func (p *pipeline) endStage() {
	s := p.s
	if s.cfg.Buffer == nil {
		p.closeIntake()
		return
	}
	p.bufferClosed.Store(true)
	if err := s.cfg.Buffer.Close(p.hard); err != nil {
		s.recordError(kindBuffer, fmt.Errorf("close: %w", err))
		s.log.Error("buffer close failed", "err", err)
	}
}

// bufferLoop owns buffer.Read and submits what the buffer hands out until
// it reports the end of its input (after endStage closed it).
func (p *pipeline) bufferLoop() {
	s := p.s
	defer p.closeIntake()
	for attempt := 0; ; {
		b, ack, err := s.cfg.Buffer.Read(p.hard)
		if err != nil {
			if errors.Is(err, message.ErrEndOfInput) {
				return
			}
			if p.hard.Err() != nil {
				p.drainAbandon()
				return
			}
			attempt++
			s.recordError(kindBuffer, err)
			s.log.Warn("buffer read failed, will retry", "attempt", attempt, "err", err)
			if !sleep(p.hard, s.cfg.Retry.Delay(attempt)) {
				p.drainAbandon()
				return
			}
			s.recordRetry(kindBuffer)
			continue
		}
		attempt = 0
		if ack == nil {
			ack = message.NoopAck
		}
		if b.Len() == 0 {
			p.ack(ack, nil)
			continue
		}
		if s.staged > 0 {
			s.cfg.Taps.Offer(s.procPoints[0], b) // what the leading Batcher made
		}
		p.submit(b, ack)
	}
}

// drainAbandon gives back what a buffer still holds at the stop deadline.
// The buffer has been (or is being) closed, so Read hands out its content
// and then ErrEndOfInput; a buffer that does not is given up on after
// abandonDrainTimeout.
func (p *pipeline) drainAbandon() {
	ctx, cancel := context.WithTimeout(p.ackCtx, abandonDrainTimeout)
	defer cancel()
	for {
		_, ack, err := p.s.cfg.Buffer.Read(ctx)
		if err != nil {
			return
		}
		if ack != nil {
			p.abandon(ack)
		}
	}
}
