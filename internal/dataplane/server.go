package dataplane

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// handshakeTimeout bounds a connection's handshake, from accept or dial to
// the link being up.
const handshakeTimeout = 5 * time.Second

// server is a node's data plane.
type server struct {
	opts Options // defaults applied
	log  *slog.Logger
	ln   net.Listener
	met  *metrics

	refused atomic.Int64
	wg      sync.WaitGroup // the accept loop and accepted connections

	mu      sync.Mutex // guards the fields below
	closed  bool
	meshes  map[string]*mesh
	shaking map[net.Conn]struct{} // accepted, in the handshake
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
	return opts
}

func listen(opts Options) (*Server, error) {
	opts = withDefaults(opts)
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
		shaking: make(map[net.Conn]struct{}),
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.acceptLoop()
	}()
	return &Server{impl: s}, nil
}

func (s *server) addr() string { return s.ln.Addr().String() }

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
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = conn.Close()
			return
		}
		s.shaking[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serveConn(conn)
		}()
	}
}

// newConnDecoder starts a connection's handshake: its reads and writes
// are bounded by the handshake deadline, and only handshake frames are
// accepted.
func (s *server) newConnDecoder(conn net.Conn) (*decoder, *deadlineConn) {
	dl := time.Now().Add(handshakeTimeout)
	_ = conn.SetWriteDeadline(dl)
	dc := &deadlineConn{Conn: conn, fixed: dl, timeout: s.opts.HeartbeatTimeout}
	return newDecoder(dc, 0), dc
}

// endHandshake lifts the handshake's bounds: from now on the heartbeat
// timeout bounds reads and data frames up to MaxFrame are accepted.
func (s *server) endHandshake(conn net.Conn, dc *deadlineConn, dec *decoder) {
	_ = conn.SetWriteDeadline(time.Time{})
	dc.fixed = time.Time{}
	dec.maxFrame = s.opts.MaxFrame
}

func (s *server) serveConn(conn net.Conn) {
	dec, dc := s.newConnDecoder(conn)
	m, from, err := acceptHandshake(conn, dec, s.opts.NodeID, s.lookup)
	s.mu.Lock()
	delete(s.shaking, conn)
	s.mu.Unlock()
	if err != nil {
		_ = conn.Close()
		var ref *refusal
		if errors.As(err, &ref) {
			s.countRefused(ref)
		}
		return
	}
	s.endHandshake(conn, dc, dec)
	_ = m.peers[from].serve(conn, dec)
}

func (s *server) lookup(job string) *mesh {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.meshes[job]
}

// countRefused logs and counts a refused connection; the secret is never
// part of a refusal.
func (s *server) countRefused(ref *refusal) {
	s.refused.Add(1)
	s.met.refused.WithLabelValues(ref.reason).Inc()
	s.log.Warn("data plane connection refused", "reason", ref.reason, "err", ref.err)
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
	s.mu.Unlock()
	sort.Slice(meshes, func(i, j int) bool { return meshes[i].job < meshes[j].job })
	st := Status{Address: s.addr(), Jobs: make([]MeshStatus, 0, len(meshes)), Refused: s.refused.Load()}
	for _, m := range meshes {
		st.Jobs = append(st.Jobs, m.status())
	}
	return st
}
