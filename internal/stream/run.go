package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/component"
)

// Run connects the components and runs the stream until one of:
//
//   - the input ends (message.ErrEndOfInput): everything read is delivered,
//     the buffer flushed, state completed, nil returned;
//   - ctx is cancelled: reading stops, in-flight batches (and what the
//     buffer holds) are finished, state stopped, nil returned. If
//     StopTimeout passes first, the rest is abandoned (inputs acknowledged
//     with ErrStopTimeout, counted in Status.Abandoned) and an error
//     wrapping ErrStopTimeout is returned; failed writes are retried until
//     then;
//   - a fatal error (a Connect still failing after MaxConnectAttempts, a
//     failed WAL replay): state failed, the error returned. With
//     MaxConnectAttempts 0 a failing Connect is retried until ctx ends.
//
// Every component is closed once before Run returns, within what remains
// of the stop deadline. Run may be called once.
func (s *Stream) Run(ctx context.Context) error {
	if !s.ran.CompareAndSwap(false, true) {
		return ErrAlreadyRun
	}
	s.mu.Lock()
	s.startedAt = time.Now()
	s.mu.Unlock()

	var (
		fatalMu sync.Mutex // guards fatal
		fatal   error
	)
	stop, stopReading := context.WithCancel(ctx)
	defer stopReading()
	fail := func(err error) {
		fatalMu.Lock()
		if fatal == nil {
			fatal = err
		}
		fatalMu.Unlock()
		stopReading()
	}
	ackCtx := context.WithoutCancel(ctx)
	hard, abandonAll := context.WithCancel(ackCtx)
	defer abandonAll()

	if err := s.connect(stop); err != nil {
		s.closeAll(ackCtx, time.Now().Add(s.cfg.StopTimeout), false)
		if ctx.Err() != nil {
			s.setState(StateStopped)
			return nil
		}
		s.log.Error("stream failed to start", "err", err)
		s.setState(StateFailed)
		return err
	}
	s.setState(StateRunning)

	p := s.startPipeline(stop, hard, ackCtx, fail)
	deadline := time.Time{}
	timedOut := false
	select {
	case <-p.done:
	case <-stop.Done():
		s.setState(StateStopping)
		deadline = time.Now().Add(s.cfg.StopTimeout)
		t := time.NewTimer(s.cfg.StopTimeout)
		select {
		case <-p.done:
		case <-t.C:
			timedOut = true
			abandonAll()
			<-p.done
		}
		t.Stop()
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(s.cfg.StopTimeout)
	}
	s.closeAll(ackCtx, deadline, p.bufferClosed.Load())

	fatalMu.Lock()
	err := fatal
	fatalMu.Unlock()
	if timedOut {
		n := s.abandoned.Load()
		s.log.Warn("stop timeout passed, batches abandoned", "abandoned", n, "stop_timeout", s.cfg.StopTimeout)
		err = errors.Join(err, fmt.Errorf("%w: %d batches abandoned after %s", ErrStopTimeout, n, s.cfg.StopTimeout))
	}
	switch {
	case fatal != nil:
		s.log.Error("stream failed", "err", fatal)
		s.setState(StateFailed)
	case ctx.Err() != nil || !p.inputEnded.Load():
		s.setState(StateStopped)
	default:
		s.setState(StateCompleted)
	}
	return err
}

// connect connects the temporaries, then the outputs, then the input, so
// nothing is read before it can be processed and written. A component
// whose Connect fails is tried again (Retry paces it) until it connects,
// the stream is stopped or MaxConnectAttempts is reached; meanwhile the
// stream stays starting with the failure in LastError, and the components
// connected already stay connected. An error marked component.Permanent
// is not retried.
func (s *Stream) connect(ctx context.Context) error {
	for _, t := range s.cfg.Temporaries {
		if err := s.connectOne(ctx, kindTemporary, t.Connect); err != nil {
			return err
		}
	}
	if err := s.connectOne(ctx, kindOutput, s.cfg.Output.Connect); err != nil {
		return err
	}
	if s.cfg.ErrorOutput != nil {
		if err := s.connectOne(ctx, kindErrorOutput, s.cfg.ErrorOutput.Connect); err != nil {
			return err
		}
	}
	return s.connectOne(ctx, kindInput, s.cfg.Input.Connect)
}

func (s *Stream) connectOne(ctx context.Context, k kind, connect func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		err := connect(ctx)
		if err == nil {
			if attempt > 1 {
				s.log.Info("connected", "component", string(k), "attempts", attempt)
			}
			return nil
		}
		s.recordError(k, err)
		if ctx.Err() != nil || component.IsPermanent(err) || s.cfg.MaxConnectAttempts > 0 && attempt >= s.cfg.MaxConnectAttempts {
			return fmt.Errorf("%w: %s: %w", ErrConnect, k, err)
		}
		d := s.cfg.Retry.Delay(attempt)
		s.log.Warn("connect failed, will retry", "component", string(k), "attempt", attempt, "retry_in", d, "err", err)
		if !sleep(ctx, d) {
			return fmt.Errorf("%w: %s: %w", ErrConnect, k, err)
		}
		s.recordRetry(k)
	}
}

// closeAll closes every component once, input first, with a context that
// ends at deadline. A close error is logged; it does not change the result.
func (s *Stream) closeAll(base context.Context, deadline time.Time, bufferClosed bool) {
	ctx, cancel := context.WithDeadline(base, deadline)
	defer cancel()
	logErr := func(k kind, err error) {
		if err != nil {
			s.recordError(k, fmt.Errorf("close: %w", err))
			s.log.Error("close failed", "component", string(k), "err", err)
		}
	}
	logErr(kindInput, s.cfg.Input.Close(ctx))
	if s.cfg.Buffer != nil && !bufferClosed {
		logErr(kindBuffer, s.cfg.Buffer.Close(ctx))
	}
	for _, p := range s.cfg.Processors {
		logErr(kindProcessor, p.Close(ctx))
	}
	logErr(kindOutput, s.cfg.Output.Close(ctx))
	if s.cfg.ErrorOutput != nil {
		logErr(kindErrorOutput, s.cfg.ErrorOutput.Close(ctx))
	}
	for _, t := range s.cfg.Temporaries {
		logErr(kindTemporary, t.Close(ctx))
	}
}
