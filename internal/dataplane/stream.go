package dataplane

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// sender is the sending end of a stream on one link.
type sender struct {
	l           *link
	id          uint32
	name, label string
	maxFrame    int

	bytes, batches prometheus.Counter
	waitGauge      prometheus.Gauge
	backpressure   prometheus.Counter

	wake chan struct{} // buffered(1): credit or release arrived

	mu       sync.Mutex // guards the fields below
	credit   uint64
	released bool // the receiver closed
	closed   bool
}

func newSender(l *link, id uint32, name, label string) *sender {
	met, job := l.p.m.srv.met, l.p.m.job
	return &sender{
		l: l, id: id, name: name, label: label, maxFrame: l.opts.MaxFrame,
		bytes:        met.bytes.WithLabelValues(job, label, "sent"),
		batches:      met.batches.WithLabelValues(job, label, "sent"),
		waitGauge:    met.waiting.WithLabelValues(job, label),
		backpressure: met.backpressure.WithLabelValues(job, label),
		wake:         make(chan struct{}, 1),
	}
}

func (s *sender) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// grant adds credit from the receiver; the reader goroutine calls it.
func (s *sender) grant(n uint32) {
	s.mu.Lock()
	s.credit += uint64(n)
	s.mu.Unlock()
	s.signal()
}

// release marks the stream closed by its receiver.
func (s *sender) release() {
	s.mu.Lock()
	s.released = true
	s.mu.Unlock()
	s.signal()
}

func (s *sender) sendFrame(ctx context.Context, f Frame) error {
	if f.Kind < KindBatch || f.Kind > KindControl {
		return fmt.Errorf("dataplane: frame kind %d", f.Kind)
	}
	if len(f.Payload) > s.maxFrame {
		return fmt.Errorf("dataplane: frame of %d bytes over the %d bytes allowed", len(f.Payload), s.maxFrame)
	}
	if err := s.takeCredit(ctx); err != nil {
		return err
	}
	if err := s.l.writeData(s.id, f.Kind, f.Payload); err != nil {
		return err
	}
	s.bytes.Add(float64(len(f.Payload)))
	if f.Kind == KindBatch {
		s.batches.Inc()
	}
	return nil
}

// takeCredit spends one credit, waiting for one while there is none.
func (s *sender) takeCredit(ctx context.Context) error {
	var start time.Time
	defer func() {
		if !start.IsZero() {
			s.waitGauge.Dec()
			s.l.waiting.Add(-1)
			s.backpressure.Add(time.Since(start).Seconds())
		}
	}()
	for {
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			return ErrClosed
		case s.released:
			s.mu.Unlock()
			return fmt.Errorf("%w: stream %q closed by its receiver", ErrClosed, s.name)
		case s.credit > 0:
			s.credit--
			s.mu.Unlock()
			return nil
		}
		s.mu.Unlock()
		if err := s.l.broken(); err != nil {
			return err
		}
		if start.IsZero() {
			start = time.Now()
			s.waitGauge.Inc()
			s.l.waiting.Add(1)
		}
		select {
		case <-s.wake:
		case <-s.l.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *sender) close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.l.closeSender(s)
	return nil
}

// receiver is the receiving end of a stream. A receiver the peer opened
// before anyone claimed it (claimed false) only holds the stream's place
// on its link.
type receiver struct {
	m           *mesh
	peer        string
	name, label string
	claimed     bool

	bytes, batches prometheus.Counter

	wake chan struct{} // buffered(1): a frame, the end or a failure

	mu       sync.Mutex // guards the fields below
	l        *link      // nil while waiting for a link
	id       uint32     // the sender's id, once opened
	opened   bool
	eof      bool
	released bool // closed by Close
	err      error
	ring     []Frame // Credits slots: the frames received, not yet handed over
	head, n  int
}

func newReceiver(m *mesh, peer, name, label string, claimed bool) *receiver {
	r := &receiver{m: m, peer: peer, name: name, label: label, claimed: claimed, wake: make(chan struct{}, 1)}
	if claimed {
		r.ring = make([]Frame, m.srv.opts.Credits)
		r.bytes = m.srv.met.bytes.WithLabelValues(m.job, label, "received")
		r.batches = m.srv.met.batches.WithLabelValues(m.job, label, "received")
	}
	return r
}

func (r *receiver) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// deliver reads the payload of a data frame of r's stream into r's queue;
// the reader goroutine calls it. The credit check comes before the payload
// is read: a frame beyond the credit granted is a protocol error.
func (r *receiver) deliver(h header, dec *decoder) error {
	r.mu.Lock()
	switch {
	case r.released:
		r.mu.Unlock()
		return dec.discard(h)
	case !r.claimed || r.eof || r.n >= len(r.ring):
		r.mu.Unlock()
		return protoErr("frame without credit on stream %q", r.name)
	}
	r.mu.Unlock()
	p, err := dec.readPayload(h)
	if err != nil {
		return err
	}
	r.mu.Lock()
	if !r.released && r.err == nil {
		r.ring[(r.head+r.n)%len(r.ring)] = Frame{Kind: Kind(h.typ), Payload: p}
		r.n++
	}
	r.mu.Unlock()
	r.bytes.Add(float64(len(p)))
	if h.typ == uint8(KindBatch) {
		r.batches.Inc()
	}
	r.signal()
	return nil
}

// fail ends the stream with err unless its sender already ended it.
func (r *receiver) fail(err error) {
	r.mu.Lock()
	if r.err == nil && !r.eof {
		r.err = err
	}
	r.mu.Unlock()
	r.signal()
}

func (r *receiver) recv(ctx context.Context) (Frame, error) {
	for {
		r.mu.Lock()
		if r.released {
			r.mu.Unlock()
			return Frame{}, ErrClosed
		}
		if r.n > 0 {
			f := r.ring[r.head]
			r.ring[r.head] = Frame{}
			r.head = (r.head + 1) % len(r.ring)
			r.n--
			l, id, more := r.l, r.id, !r.eof && r.err == nil
			r.mu.Unlock()
			if more {
				l.queueCredit(id, 1)
			}
			return f, nil
		}
		switch {
		case r.eof:
			r.mu.Unlock()
			return Frame{}, io.EOF
		case r.err != nil:
			err := r.err
			r.mu.Unlock()
			return Frame{}, err
		}
		r.mu.Unlock()
		select {
		case <-r.wake:
		case <-ctx.Done():
			return Frame{}, ctx.Err()
		}
	}
}

func (r *receiver) close() error {
	r.mu.Lock()
	if r.released {
		r.mu.Unlock()
		return nil
	}
	r.released = true
	r.ring, r.n = nil, 0
	l := r.l
	r.mu.Unlock()
	if l != nil {
		l.releaseReceiver(r)
		return nil
	}
	r.m.dropPending(r)
	return nil
}
