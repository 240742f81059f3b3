package dataplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"time"
)

// Redial backoff of the dialing end of a link.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// mesh is one job's membership on a node.
type mesh struct {
	srv    *server
	job    string
	secret []byte
	peers  map[string]*peer // fixed at join

	ctx    context.Context // ends at close: stops the dialers
	cancel context.CancelFunc
	once   sync.Once
	wg     sync.WaitGroup // dialers and links
}

// peer is the link of a mesh to one other node.
type peer struct {
	m    *mesh
	id   string
	addr string
	fp   string // its certificate's fingerprint, pinned
	dial bool   // this node's id sorts first: it dials

	mu      sync.Mutex // guards the fields below
	closed  bool
	cur     *link         // the up link, if any
	upc     chan struct{} // closed while a link is up
	state   string
	since   time.Time
	lastErr string
	pending map[string]*receiver // claimed while no link was up
}

func (s *server) join(job string, secret []byte, peers map[string]Peer) (*Mesh, error) {
	switch {
	case job == "" || len(job) > maxID:
		return nil, fmt.Errorf("dataplane: job id %q", job)
	case len(secret) == 0:
		return nil, errors.New("dataplane: empty job secret")
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &mesh{srv: s, job: job, secret: append([]byte(nil), secret...), peers: make(map[string]*peer), ctx: ctx, cancel: cancel}
	now := time.Now()
	for id, pe := range peers {
		if id == s.opts.NodeID {
			continue
		}
		switch {
		case id == "" || len(id) > maxID:
			cancel()
			return nil, fmt.Errorf("dataplane: node id %q", id)
		case !ValidFingerprint(pe.Fingerprint) && !s.opts.plaintext:
			cancel()
			return nil, fmt.Errorf("dataplane: node %q has no data-plane certificate fingerprint: links are never made without TLS", id)
		}
		m.peers[id] = &peer{m: m, id: id, addr: pe.Addr, fp: pe.Fingerprint, dial: s.opts.NodeID < id, upc: make(chan struct{}), since: now, pending: make(map[string]*receiver)}
	}
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			cancel()
			return nil, ErrClosed
		}
		old := s.meshes[job]
		if old == nil {
			s.meshes[job] = m
			s.mu.Unlock()
			break
		}
		s.mu.Unlock()
		_ = old.close()
	}
	for _, p := range m.peers {
		p.mu.Lock()
		p.setState(LinkConnecting)
		p.mu.Unlock()
		if p.dial {
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				p.dialLoop(ctx)
			}()
		}
	}
	return &Mesh{impl: m}, nil
}

func (m *mesh) peer(id string) (*peer, error) {
	p := m.peers[id]
	if p == nil {
		return nil, fmt.Errorf("dataplane: node %q is not a peer of job %q", id, m.job)
	}
	return p, nil
}

func (m *mesh) send(ctx context.Context, peerID, name, label string) (*Sender, error) {
	if err := errors.Join(checkName("name", name, maxName), checkName("label", label, maxName)); err != nil {
		return nil, err
	}
	p, err := m.peer(peerID)
	if err != nil {
		return nil, err
	}
	for {
		p.mu.Lock()
		closed, l, upc := p.closed, p.cur, p.upc
		p.mu.Unlock()
		switch {
		case closed || m.ctx.Err() != nil:
			return nil, ErrClosed
		case l != nil:
			s, err := l.openSender(name, label)
			if err != nil {
				return nil, err
			}
			return &Sender{impl: s}, nil
		}
		select {
		case <-upc:
		case <-m.ctx.Done():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (m *mesh) receive(peerID, name, label string) (*Receiver, error) {
	if err := errors.Join(checkName("name", name, maxName), checkName("label", label, maxName)); err != nil {
		return nil, err
	}
	p, err := m.peer(peerID)
	if err != nil {
		return nil, err
	}
	r := newReceiver(m, peerID, name, label, true)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return nil, ErrClosed
	case p.cur != nil:
		if err := p.cur.claim(r); err != nil {
			return nil, err
		}
	case p.pending[name] != nil:
		return nil, fmt.Errorf("dataplane: stream %q from %q received twice", name, peerID)
	default:
		p.pending[name] = r
	}
	return &Receiver{impl: r}, nil
}

// dropPending forgets a receiver that closed; if a link adopted it
// meanwhile, the link releases it.
func (m *mesh) dropPending(r *receiver) {
	p := m.peers[r.peer]
	p.mu.Lock()
	if p.pending[r.name] == r {
		delete(p.pending, r.name)
	}
	p.mu.Unlock()
	r.mu.Lock()
	l := r.l
	r.mu.Unlock()
	if l != nil {
		l.releaseReceiver(r)
	}
}

func (m *mesh) up(peerID string) bool {
	p := m.peers[peerID]
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur != nil
}

func (m *mesh) close() error {
	m.once.Do(func() {
		m.cancel()
		s := m.srv
		s.mu.Lock()
		if s.meshes[m.job] == m {
			delete(s.meshes, m.job)
		}
		s.mu.Unlock()
		for _, p := range m.peers {
			p.mu.Lock()
			p.closed = true
			p.setState("")
			l, pending := p.cur, p.pending
			p.pending = nil
			p.mu.Unlock()
			if l != nil {
				l.fail(ErrClosed)
			}
			for _, r := range pending {
				r.fail(ErrClosed)
			}
		}
		m.wg.Wait()
		s.met.forgetJob(m.job)
	})
	return nil
}

func (m *mesh) status() MeshStatus {
	ids := make([]string, 0, len(m.peers))
	for id := range m.peers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	ms := MeshStatus{Job: m.job, Links: make([]LinkStatus, 0, len(ids))}
	for _, id := range ids {
		p := m.peers[id]
		p.mu.Lock()
		ls := LinkStatus{Node: id, Address: p.addr, State: p.state, Since: p.since, LastError: p.lastErr, Streams: len(p.pending)}
		l := p.cur
		p.mu.Unlock()
		if l != nil {
			ls.Streams += l.streams()
			ls.CreditWaits = int(l.waiting.Load())
		}
		ms.Links = append(ms.Links, ls)
	}
	return ms
}

// setState moves the peer to state ("" when its mesh closes) and keeps
// svc_dataplane_links in step; p.mu is held.
func (p *peer) setState(state string) {
	if p.state == state {
		return
	}
	links := p.m.srv.met.links
	if p.state != "" {
		links.WithLabelValues(p.state).Dec()
	}
	if state != "" {
		links.WithLabelValues(state).Inc()
		p.state, p.since = state, time.Now()
	}
}

// attach makes conn, authenticated, the peer's link, replacing the one up
// (a peer that restarted redials before this end noticed). Receivers
// claimed meanwhile bind to it.
func (p *peer) attach(conn net.Conn, dec *decoder) (*link, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	l := newLink(p, conn, dec, &p.m.srv.opts)
	old := p.cur
	p.cur = l
	if old == nil {
		close(p.upc)
	}
	p.setState(LinkUp)
	p.since = time.Now()
	for name, r := range p.pending {
		delete(p.pending, name)
		r.mu.Lock()
		released := r.released
		r.mu.Unlock()
		if !released {
			_ = l.claim(r) // a fresh link: nothing to refuse
		}
	}
	p.m.wg.Add(1)
	if old != nil {
		go old.fail(errors.New("replaced by a new connection"))
	}
	p.m.srv.log.Info("data plane link up", "job", p.m.job, "node", p.id, "address", conn.RemoteAddr().String())
	return l, nil
}

// detach forgets l, which failed for cause.
func (p *peer) detach(l *link, cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != l {
		return
	}
	p.cur = nil
	p.upc = make(chan struct{})
	p.lastErr = cause.Error()
	if !p.closed {
		p.setState(LinkDown)
		p.m.srv.log.Warn("data plane link down", "job", p.m.job, "node", p.id, "err", cause)
	}
}

// serve runs conn as the peer's link until it fails.
func (p *peer) serve(conn net.Conn, dec *decoder) error {
	l, err := p.attach(conn, dec)
	if err != nil {
		_ = conn.Close()
		return err
	}
	defer p.m.wg.Done()
	l.run()
	return l.err
}

// noteError records why connecting failed.
func (p *peer) noteError(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastErr = err.Error()
	if p.state == LinkUp || p.closed {
		return
	}
	if p.state != LinkConnecting {
		p.setState(LinkDown)
	}
}

// dialLoop connects to the peer, serves the link and redials, with capped
// backoff, until ctx ends.
func (p *peer) dialLoop(ctx context.Context) {
	backoff := minBackoff
	for {
		start := time.Now()
		err := p.dialOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			p.noteError(err)
		}
		if time.Since(start) > maxBackoff {
			backoff = minBackoff
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// dialOnce connects, authenticates and serves one link.
func (p *peer) dialOnce(ctx context.Context) error {
	s := p.m.srv
	d := net.Dialer{Timeout: handshakeTimeout}
	conn, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
	var cfg *tls.Config
	if s.tls != nil {
		cfg = clientTLS(s.opts.Identity, p.fp)
	}
	c, err := s.secure(conn, cfg, false)
	if err != nil {
		err = fmt.Errorf("TLS with node %q: %w", p.id, err)
	} else {
		dec, dc := s.newConnDecoder(c)
		if err = dialHandshake(c, dec, p.m.job, s.opts.NodeID, p.id, p.m.secret); err == nil {
			if !stop() {
				_ = conn.Close()
				return ctx.Err()
			}
			_ = conn.SetReadDeadline(time.Time{})
			s.endHandshake(c, dc, dec)
			return p.serve(c, dec)
		}
		if errors.Is(err, errPeerRefused) || isTLSAlert(err) {
			err = fmt.Errorf("%w (node %q does not pin this node's certificate for the job yet, or refused its proof)", err, p.id)
		}
	}
	// The dialer's failures are its link's last error, not refusals of
	// this node's listener.
	stop()
	_ = conn.Close()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
