package dataplane

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// maxUnclaimed bounds the streams a peer may open on a link that no
// receiver claimed yet: each is held with no credit until claimed or
// closed by its sender.
const maxUnclaimed = 4096

// largeWrite is the payload size from which a data frame is written with
// writev straight from the caller's slice instead of being copied into the
// link's buffer.
const largeWrite = 16 << 10

// link is one authenticated connection between two nodes of a mesh. Its
// reader goroutine only decodes frames and appends them to their streams'
// bounded queues, never writes and never waits for a stream; everything it
// wants sent (credits) goes through the control queue that the writer
// goroutine, or the next data writer, puts on the wire.
type link struct {
	p    *peer
	conn net.Conn
	dec  *decoder
	opts *Options

	done    chan struct{} // closed by fail
	failure sync.Once
	err     error // why the link ended, wraps ErrLinkBroken; set before done closes

	waiting atomic.Int32  // senders waiting for credit now
	wake    chan struct{} // buffered(1): the control queue has something
	lastW   atomic.Int64  // unix nanos of the last write

	wmu     sync.Mutex // guards the write side: wbuf, bufs and writes to conn
	wbuf    []byte
	bufs    [2][]byte
	writers atomic.Int32 // data writers holding or waiting for wmu

	cmu     sync.Mutex        // guards the control queue
	ctl     []byte            // encoded frames, in order
	credits map[uint32]uint32 // credit to grant per peer stream id

	mu        sync.Mutex // guards the stream tables
	nextID    uint32
	out       map[uint32]*sender   // by our id
	outNames  map[string]bool      // names of out
	in        map[uint32]*receiver // by the peer's id
	byName    map[string]*receiver // claimed or opened, by name
	unclaimed int                  // opened by the peer, not claimed
}

func newLink(p *peer, conn net.Conn, dec *decoder, opts *Options) *link {
	l := &link{
		p: p, conn: conn, dec: dec, opts: opts,
		done:     make(chan struct{}),
		wake:     make(chan struct{}, 1),
		wbuf:     make([]byte, 0, 64<<10),
		credits:  make(map[uint32]uint32),
		out:      make(map[uint32]*sender),
		outNames: make(map[string]bool),
		in:       make(map[uint32]*receiver),
		byName:   make(map[string]*receiver),
	}
	l.lastW.Store(time.Now().UnixNano())
	return l
}

// run serves the link until it fails; it returns when both of its
// goroutines did.
func (l *link) run() {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.writeLoop()
	}()
	l.readLoop()
	wg.Wait()
}

// fail ends the link for cause: the connection closes and every stream on
// it fails. Only the first call counts.
func (l *link) fail(cause error) {
	l.failure.Do(func() {
		switch {
		case errors.Is(cause, ErrLinkBroken):
			l.err = cause
		default:
			l.err = fmt.Errorf("%w: %w", ErrLinkBroken, cause)
		}
		// The peer is down before any stream of the link can see the
		// failure: a stream's error and Up never disagree.
		l.p.detach(l, cause)
		close(l.done)
		_ = l.conn.Close()
		l.mu.Lock()
		rs := make([]*receiver, 0, len(l.byName)+len(l.in))
		for _, r := range l.byName {
			rs = append(rs, r)
		}
		for _, r := range l.in {
			rs = append(rs, r)
		}
		l.mu.Unlock()
		for _, r := range rs {
			r.fail(l.err)
		}
	})
}

// broken returns the link's error once it failed, else nil.
func (l *link) broken() error {
	select {
	case <-l.done:
		return l.err
	default:
		return nil
	}
}

// readLoop decodes frames until the connection fails. The read deadline,
// renewed on every read, is the heartbeat timeout.
func (l *link) readLoop() {
	for {
		h, err := l.dec.readHeader()
		if err == nil {
			err = l.handle(h)
		}
		if err != nil {
			if err == io.EOF {
				err = errors.New("connection closed by peer")
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				err = fmt.Errorf("no heartbeat for %v", l.opts.HeartbeatTimeout)
			}
			l.fail(err)
			return
		}
	}
}

// handle acts on one frame whose header was read.
func (l *link) handle(h header) error {
	if isData(h.typ) {
		l.mu.Lock()
		r := l.in[h.id]
		l.mu.Unlock()
		if r == nil {
			return protoErr("frame on unknown stream %d", h.id)
		}
		return r.deliver(h, l.dec)
	}
	p, err := l.dec.readPayload(h)
	if err != nil {
		return err
	}
	switch h.typ {
	case typeOpen:
		name, label, err := parseOpen(p)
		if err != nil {
			return err
		}
		return l.opened(h.id, name, label)
	case typeCredit:
		n, err := parseCredit(p)
		if err != nil {
			return err
		}
		l.mu.Lock()
		s := l.out[h.id]
		l.mu.Unlock()
		if s != nil {
			s.grant(n)
		}
		return nil
	case typeClose:
		return l.closed(h.id)
	case typeRelease:
		l.mu.Lock()
		s := l.out[h.id]
		l.mu.Unlock()
		if s != nil {
			s.release()
		}
		return nil
	case typeHeartbeat:
		return nil
	case typeRefuse:
		return fmt.Errorf("%w: %s", errPeerRefused, printable(p))
	}
	return protoErr("frame type %#x on an up link", h.typ)
}

// opened registers the peer's new stream id under name.
func (l *link) opened(id uint32, name, label string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, dup := l.in[id]; dup {
		return protoErr("stream %d opened twice", id)
	}
	r := l.byName[name]
	switch {
	case r == nil:
		if l.unclaimed >= maxUnclaimed {
			return protoErr("over %d unclaimed streams", maxUnclaimed)
		}
		r = newReceiver(l.p.m, l.p.id, name, label, false)
		r.l = l
		l.byName[name] = r
		l.unclaimed++
	case r.opened:
		return protoErr("stream %q opened twice", name)
	}
	r.mu.Lock()
	r.opened, r.id = true, id
	released := r.released
	r.mu.Unlock()
	l.in[id] = r
	switch {
	case released:
		// Closed by its receiver before the sender opened it: stop the
		// sender, keep the id until its close frame.
		delete(l.byName, name)
		l.queueFrame(id, typeRelease, nil)
	case r.claimed:
		l.queueCredit(id, uint32(l.opts.Credits))
	}
	return nil
}

// closed handles the sender's end of stream id.
func (l *link) closed(id uint32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.in[id]
	if r == nil {
		return protoErr("close of unknown stream %d", id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.eof {
		return protoErr("stream %d closed twice", id)
	}
	r.eof = true
	switch {
	case r.released:
		delete(l.in, id)
	case !r.claimed:
		// Nobody claimed it and nobody will receive a frame of it.
		delete(l.in, id)
		delete(l.byName, r.name)
		l.unclaimed--
	default:
		r.signal()
	}
	return nil
}

// claim binds a receiver for name to the link: a stream the peer already
// opened gets its credit now.
func (l *link) claim(r *receiver) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.broken(); err != nil {
		return err
	}
	old := l.byName[r.name]
	if old == nil {
		r.l = l
		l.byName[r.name] = r
		return nil
	}
	if old.claimed {
		return fmt.Errorf("dataplane: stream %q from %q received twice", r.name, l.p.id)
	}
	// Opened by the peer before the claim: the held stream becomes r's.
	old.mu.Lock()
	defer old.mu.Unlock()
	r.mu.Lock()
	r.l, r.id, r.opened, r.eof = l, old.id, true, old.eof
	r.mu.Unlock()
	l.byName[r.name] = r
	l.in[old.id] = r
	l.unclaimed--
	if !old.eof {
		l.queueCredit(old.id, uint32(l.opts.Credits))
	}
	return nil
}

// releaseReceiver forgets a receiver that closed: its sender, if it opened
// the stream and did not close it, is told to stop.
func (l *link) releaseReceiver(r *receiver) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.mu.Lock()
	opened, eof, id := r.opened, r.eof, r.id
	r.mu.Unlock()
	switch {
	case !opened:
		// Kept by name so that a later open is answered with a release.
		return
	case eof:
		delete(l.in, id)
	default:
		l.queueFrame(id, typeRelease, nil)
	}
	if l.byName[r.name] == r {
		delete(l.byName, r.name)
	}
}

// openSender registers a new outgoing stream and queues its open frame.
func (l *link) openSender(name, label string) (*sender, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.broken(); err != nil {
		return nil, err
	}
	if l.outNames[name] {
		return nil, fmt.Errorf("dataplane: stream %q to %q sent twice", name, l.p.id)
	}
	l.nextID++
	s := newSender(l, l.nextID, name, label)
	l.out[s.id] = s
	l.outNames[name] = true
	l.queueFrame(s.id, typeOpen, openPayload(name, label))
	return s, nil
}

// closeSender forgets a sender and queues its close frame.
func (l *link) closeSender(s *sender) {
	l.mu.Lock()
	delete(l.out, s.id)
	delete(l.outNames, s.name)
	l.mu.Unlock()
	l.queueFrame(s.id, typeClose, nil)
}

// streams counts the streams on the link, held ones included.
func (l *link) streams() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.out)
	for _, r := range l.byName {
		if !r.released {
			n++
		}
	}
	return n
}

// queueFrame queues a link frame for the writer; it never blocks on the
// connection.
func (l *link) queueFrame(id uint32, typ uint8, payload []byte) {
	l.cmu.Lock()
	l.ctl = appendFrame(l.ctl, id, typ, payload)
	l.cmu.Unlock()
	l.kick()
}

// queueCredit queues n more credits for the peer's stream id; credits
// queued for one stream before the writer runs travel in one frame.
func (l *link) queueCredit(id uint32, n uint32) {
	l.cmu.Lock()
	l.credits[id] += n
	l.cmu.Unlock()
	l.kick()
}

func (l *link) kick() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// drainLocked moves the control queue into the write buffer; wmu is held.
func (l *link) drainLocked() {
	l.cmu.Lock()
	l.wbuf = append(l.wbuf, l.ctl...)
	l.ctl = l.ctl[:0]
	for id, n := range l.credits {
		l.wbuf = appendFrame(l.wbuf, id, typeCredit, uint32Payload(n))
		delete(l.credits, id)
	}
	l.cmu.Unlock()
}

// flushLocked writes the buffer out; wmu is held.
func (l *link) flushLocked() error {
	if len(l.wbuf) == 0 {
		return nil
	}
	_, err := l.conn.Write(l.wbuf)
	l.wbuf = l.wbuf[:0]
	l.lastW.Store(time.Now().UnixNano())
	return err
}

// writeData writes one data frame, sharing the connection with the other
// senders: a writer that knows another is waiting leaves the flush to it.
func (l *link) writeData(id uint32, kind Kind, payload []byte) error {
	l.writers.Add(1)
	l.wmu.Lock()
	l.writers.Add(-1)
	defer l.wmu.Unlock()
	if err := l.broken(); err != nil {
		return err
	}
	l.drainLocked()
	l.wbuf = appendHeader(l.wbuf, len(payload), id, uint8(kind))
	var err error
	if len(payload) >= largeWrite {
		l.bufs = [2][]byte{l.wbuf, payload}
		nb := net.Buffers(l.bufs[:])
		_, err = nb.WriteTo(l.conn)
		l.bufs = [2][]byte{}
		l.wbuf = l.wbuf[:0]
		l.lastW.Store(time.Now().UnixNano())
	} else {
		l.wbuf = append(l.wbuf, payload...)
		if l.writers.Load() == 0 || len(l.wbuf) >= cap(l.wbuf)/2 {
			err = l.flushLocked()
		}
	}
	if err != nil {
		l.fail(err)
		return l.err
	}
	return nil
}

// writeLoop writes the control queue when kicked and a heartbeat when the
// link was quiet for a heartbeat interval.
func (l *link) writeLoop() {
	tick := time.NewTicker(l.opts.HeartbeatInterval / 2)
	defer tick.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-l.wake:
		case now := <-tick.C:
			if now.Sub(time.Unix(0, l.lastW.Load())) >= l.opts.HeartbeatInterval {
				l.queueFrame(0, typeHeartbeat, nil)
			}
			continue
		}
		l.wmu.Lock()
		err := l.broken()
		if err == nil {
			l.drainLocked()
			err = l.flushLocked()
		}
		l.wmu.Unlock()
		if err != nil {
			l.fail(err)
			return
		}
	}
}

// deadlineConn bounds reads: until the handshake ends by its fixed
// deadline, then by timeout renewed before every read, so that a peer
// silent for the heartbeat timeout fails the read. fixed and timeout are
// set before the reads they govern start.
type deadlineConn struct {
	net.Conn
	fixed   time.Time
	timeout time.Duration
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	d := c.fixed
	if d.IsZero() {
		d = time.Now().Add(c.timeout)
	}
	if err := c.Conn.SetReadDeadline(d); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}
