package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

// withBatcher moves a component.Batcher at the head of the processors into
// the buffer stage, where the runtime can hand it acknowledgements: it
// becomes the buffer, or follows the configured buffer in a chain. It
// returns how many processors were moved (0 or 1), so that errors keep
// naming processors by their configured index. A Batcher anywhere else is
// an error.
func (c Config) withBatcher() (Config, int, error) {
	var errs []error
	for i, p := range c.Processors {
		if _, ok := p.(component.Batcher); ok && i > 0 {
			errs = append(errs, fmt.Errorf("processors[%d]: %T gathers batches across inputs and must be the first processor", i, p))
		}
	}
	if len(errs) > 0 {
		return c, 0, fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	if len(c.Processors) == 0 {
		return c, 0, nil
	}
	b, ok := c.Processors[0].(component.Batcher)
	if !ok {
		return c, 0, nil
	}
	c.Processors = c.Processors[1:]
	if c.Buffer == nil {
		c.Buffer = b
	} else {
		c.Buffer = &chain{first: c.Buffer, second: b}
	}
	return c, 1, nil
}

// chain is the configured buffer followed by a Batcher. The pipeline's
// pump goroutine moves batches from first to second; Write goes to first
// and Read comes from second.
type chain struct {
	first  component.Buffer
	second component.Buffer

	pumping     atomic.Bool // the pump started; it then closes second
	closeSecond sync.Once
}

func (c *chain) Write(ctx context.Context, b message.Batch, ack message.AckFunc) error {
	return c.first.Write(ctx, b, ack)
}

func (c *chain) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	return c.second.Read(ctx)
}

// Close closes first, which flushes into second through the pump, which
// then closes second. Without a pump (the stream never ran) it closes
// second too.
func (c *chain) Close(ctx context.Context) error {
	err := c.first.Close(ctx)
	if !c.pumping.Load() {
		err = errors.Join(err, c.closeSecondOnce(ctx))
	}
	return err
}

func (c *chain) closeSecondOnce(ctx context.Context) error {
	var err error
	c.closeSecond.Do(func() { err = c.second.Close(ctx) })
	return err
}

// startPump starts the goroutine moving batches through a chained buffer.
func (p *pipeline) startPump() {
	c, ok := p.s.cfg.Buffer.(*chain)
	if !ok {
		return
	}
	c.pumping.Store(true)
	p.wg.Go(func() { p.pump(c) })
}

// pump reads c.first until it ends and writes what it reads into c.second,
// which it then closes so that second flushes. At the stop deadline it
// gives back what first still holds.
func (p *pipeline) pump(c *chain) {
	s := p.s
	defer func() {
		if err := c.closeSecondOnce(p.ackCtx); err != nil {
			s.recordError(kindBuffer, fmt.Errorf("close: %w", err))
		}
	}()
	for attempt := 0; ; {
		b, ack, err := c.first.Read(p.hard)
		if err != nil {
			if errors.Is(err, message.ErrEndOfInput) {
				return
			}
			if p.hard.Err() != nil {
				p.drainAbandonFrom(c.first)
				return
			}
			attempt++
			s.recordError(kindBuffer, err)
			s.log.Warn("buffer read failed, will retry", "attempt", attempt, "err", err)
			if !sleep(p.hard, s.cfg.Retry.Delay(attempt)) {
				p.drainAbandonFrom(c.first)
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
		p.writeTo(c.second, b, ack)
	}
}

// writeTo writes b into buf, retrying failures until the stop deadline,
// when b is abandoned.
func (p *pipeline) writeTo(buf component.Buffer, b message.Batch, ack message.AckFunc) {
	s := p.s
	for attempt := 1; ; attempt++ {
		err := buf.Write(p.hard, b, ack)
		if err == nil {
			return
		}
		if p.hard.Err() != nil {
			p.abandon(ack)
			return
		}
		s.recordError(kindBuffer, err)
		s.log.Warn("buffer write failed, will retry", "attempt", attempt, "err", err)
		if !sleep(p.hard, s.cfg.Retry.Delay(attempt)) {
			p.abandon(ack)
			return
		}
		s.recordRetry(kindBuffer)
	}
}

// drainAbandonFrom gives back what buf still holds at the stop deadline,
// as drainAbandon does for the stream's buffer.
func (p *pipeline) drainAbandonFrom(buf component.Buffer) {
	ctx, cancel := context.WithTimeout(p.ackCtx, abandonDrainTimeout)
	defer cancel()
	for {
		_, ack, err := buf.Read(ctx)
		if err != nil {
			return
		}
		if ack != nil {
			p.abandon(ack)
		}
	}
}
