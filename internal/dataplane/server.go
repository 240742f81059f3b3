package dataplane

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// handshakeTimeout bounds a connection's handshake, TLS and job proof,
// from accept or dial to the link being up.
const handshakeTimeout = 5 * time.Second

// refusalLogEvery is the most often a refusal is logged: a flood of
// refused connections is one WARN line per period with their count.
const refusalLogEvery = 10 * time.Second

// server is a node's data plane.
type server struct {
	opts Options // defaults applied
	log  *slog.Logger
	ln   net.Listener
	met  *metrics
	tls  *tls.Config // nil when plaintext

	refused atomic.Int64
	wg      sync.WaitGroup // the accept loop and accepted connections
	sampled sampler

	mu      sync.Mutex // guards the fields below
	closed  bool
	meshes  map[string]*mesh
	shaking map[net.Conn]string // accepted, in the handshake: remote host
	perHost map[string]int      // shaking, by remote host
}

// withDefaults fills in the zero fields of opts.
func withDefaults(opts Options) Options {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Credits <= 0 {
		opts.Credits = 16
	}
	if opts.MaxFrame <= 0 {
		opts.MaxFrame = 64 << 20
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = time.Second
	}
	if opts.HeartbeatTimeout <= 0 {
		opts.HeartbeatTimeout = 5 * time.Second
	}
	if opts.MaxHandshakes <= 0 {
		opts.MaxHandshakes = 64
	}
	if opts.MaxHandshakesPerHost <= 0 {
		opts.MaxHandshakesPerHost = 8
	}
	return opts
}

func listen(opts Options) (*Server, error) {
	opts = withDefaults(opts)
	if opts.Identity == nil {
		id, err := NewIdentity()
		if err != nil {
			return nil, fmt.Errorf("dataplane: identity: %w", err)
		}
		opts.Identity = id
	}
	switch {
	case opts.NodeID == "" || len(opts.NodeID) > maxID:
		return nil, fmt.Errorf("dataplane: node id %q", opts.NodeID)
	case opts.MaxFrame > 1<<31-1:
		return nil, fmt.Errorf("dataplane: max frame %d over 2 GiB", opts.MaxFrame)
	case opts.HeartbeatTimeout <= opts.HeartbeatInterval:
		return nil, fmt.Errorf("dataplane: heartbeat timeout %v not over the interval %v", opts.HeartbeatTimeout, opts.HeartbeatInterval)
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("dataplane: %w", err)
	}
	s := &server{
		opts:    opts,
		log:     opts.Logger,
		ln:      ln,
		met:     newMetrics(opts.Registerer),
		meshes:  make(map[string]*mesh),
		shaking: make(map[net.Conn]string),
		perHost: make(map[string]int),
		sampled: sampler{every: refusalLogEvery, counts: map[string]int64{}},
	}
	if !opts.plaintext {
		s.tls = serverTLS(opts.Identity, s.trusted)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.acceptLoop()
	}()
	return &Server{impl: s}, nil
}

func (s *server) addr() string { return s.ln.Addr().String() }

// remoteHost is the IP address conn comes from.
func remoteHost(conn net.Conn) string {
	if a, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return conn.RemoteAddr().String()
}

func (s *server) acceptLoop() {
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("data plane accept", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		host := remoteHost(conn)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = conn.Close()
			return
		}
		if len(s.shaking) >= s.opts.MaxHandshakes || s.perHost[host] >= s.opts.MaxHandshakesPerHost {
			// Nothing read, nothing allocated, no goroutine: closed at once.
			s.mu.Unlock()
			_ = conn.Close()
			s.countRefused(&refusal{reason: reasonCapacity, err: fmt.Errorf("from %s: over %d handshakes at once, or %d from one address", host, s.opts.MaxHandshakes, s.opts.MaxHandshakesPerHost)})
			continue
		}
		s.shaking[conn] = host
		s.perHost[host]++
		s.met.handshakes.Inc()
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serveConn(conn)
		}()
	}
}

// handshakeDone forgets conn's handshake.
func (s *server) handshakeDone(conn net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	host, ok := s.shaking[conn]
	if !ok {
		return
	}
	delete(s.shaking, conn)
	s.met.handshakes.Dec()
	if s.perHost[host]--; s.perHost[host] <= 0 {
		delete(s.perHost, host)
	}
}

// secure runs the TLS handshake on a fresh connection, within its
// handshake deadline; a plain connection is returned as it is.
func (s *server) secure(conn net.Conn, cfg *tls.Config, server bool) (net.Conn, error) {
	if cfg == nil {
		return conn, nil
	}
	var tc *tls.Conn
	if server {
		tc = tls.Server(conn, cfg)
	} else {
		tc = tls.Client(conn, cfg)
	}
	if err := tc.Handshake(); err != nil {
		return nil, err
	}
	return tc, nil
}

// newConnDecoder starts a connection's handshake: its reads and writes
// are bounded by the handshake deadline, only handshake frames are
// accepted, and the read buffer is small until the peer is authenticated.
func (s *server) newConnDecoder(conn net.Conn) (*decoder, *deadlineConn) {
	dl := time.Now().Add(handshakeTimeout)
	_ = conn.SetWriteDeadline(dl)
	dc := &deadlineConn{Conn: conn, fixed: dl, timeout: s.opts.HeartbeatTimeout}
	return newDecoder(dc, 0), dc
}

// endHandshake lifts the handshake's bounds: from now on the heartbeat
// timeout bounds reads, data frames up to MaxFrame are accepted, and the
// link reads through a full-size buffer.
func (s *server) endHandshake(conn net.Conn, dc *deadlineConn, dec *decoder) {
	_ = conn.SetWriteDeadline(time.Time{})
	dc.fixed = time.Time{}
	dec.authenticated(s.opts.MaxFrame)
}

func (s *server) serveConn(conn net.Conn) {
	_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
	c, err := s.secure(conn, s.tls, true)
	var m *mesh
	var from string
	var dc *deadlineConn
	var dec *decoder
	if err != nil {
		err = &refusal{reason: reasonTLS, err: err}
	} else {
		dec, dc = s.newConnDecoder(c)
		m, from, err = acceptHandshake(c, dec, s.opts.NodeID, peerFingerprint(c), s.tls != nil, s.lookup)
	}
	s.handshakeDone(conn)
	if err != nil {
		_ = conn.Close()
		var ref *refusal
		if errors.As(err, &ref) {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				ref.reason = reasonTimeout
			}
			s.countRefused(ref)
		}
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	s.endHandshake(c, dc, dec)
	_ = m.peers[from].serve(c, dec)
}

func (s *server) lookup(job string) *mesh {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.meshes[job]
}

// trusted reports whether fp is the fingerprint of a peer of a job joined
// here: only those complete a TLS handshake with this node.
func (s *server) trusted(fp string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.meshes {
		for _, p := range m.peers {
			if p.fp == fp {
				return true
			}
		}
	}
	return false
}

// countRefused counts a refused connection and logs it, sampled; the
// secret is never part of a refusal.
func (s *server) countRefused(ref *refusal) {
	s.refused.Add(1)
	s.met.refused.WithLabelValues(ref.reason).Inc()
	if counts, ok := s.sampled.note(ref.reason, time.Now()); ok {
		s.log.Warn("data plane connections refused", "count", sum(counts), "by_reason", counts, "last_reason", ref.reason, "last_err", ref.err)
	}
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// sampler lets one refusal log line through per period, carrying the
// count of those since the last line.
type sampler struct {
	every time.Duration

	mu     sync.Mutex // guards the fields below
	last   time.Time
	counts map[string]int64 // by reason, since the last line
}

// note counts one refusal for reason at now; when a line is due it
// returns the counts it stands for (and resets them) and true.
func (s *sampler) note(reason string, now time.Time) (map[string]int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[reason]++
	if !s.last.IsZero() && now.Sub(s.last) < s.every {
		return nil, false
	}
	s.last = now
	out := s.counts
	s.counts = map[string]int64{}
	return out, true
}

func (s *server) close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.ln.Close()
	meshes := make([]*mesh, 0, len(s.meshes))
	for _, m := range s.meshes {
		meshes = append(meshes, m)
	}
	for c := range s.shaking {
		_ = c.Close()
	}
	s.mu.Unlock()
	for _, m := range meshes {
		_ = m.close()
	}
	s.wg.Wait()
	return err
}

func (s *server) status() Status {
	s.mu.Lock()
	meshes := make([]*mesh, 0, len(s.meshes))
	for _, m := range s.meshes {
		meshes = append(meshes, m)
	}
	shaking := len(s.shaking)
	s.mu.Unlock()
	sort.Slice(meshes, func(i, j int) bool { return meshes[i].job < meshes[j].job })
	st := Status{Address: s.addr(), Fingerprint: s.opts.Identity.Fingerprint(), Jobs: make([]MeshStatus, 0, len(meshes)),
		Refused: s.refused.Load(), Handshakes: shaking}
	for _, m := range meshes {
		st.Jobs = append(st.Jobs, m.status())
	}
	return st
}
