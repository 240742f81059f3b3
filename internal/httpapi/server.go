package httpapi

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Defaults of ServerOptions (docs/api-conventions.md, "Connections").
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout       = 60 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	// DefaultMaxConns caps one listener's connections when the process's
	// file descriptor limit is unknown; otherwise the cap is three quarters
	// of that limit, so that the process keeps descriptors for its files
	// and for accepting the connection that displaces an idle one.
	DefaultMaxConns = 10000
)

// ServerOptions bound the connections of one listener. Zero values take the
// defaults.
type ServerOptions struct {
	// ReadHeaderTimeout bounds reading a request's headers (default 10 s).
	ReadHeaderTimeout time.Duration
	// BodyTimeout bounds reading a request's body, from the handler's start
	// to the body's end (default 60 s). A bodiless request has none, so
	// long-polls and Server-Sent Events streams are never cut by it.
	BodyTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle that long (default
	// 60 s).
	IdleTimeout time.Duration
	// MaxConns caps the listener's open connections (default three
	// quarters of the file descriptor limit, DefaultMaxConns when unknown).
	MaxConns int
	// MaxConnsPerAddr caps the open connections of one client IP address
	// (default a quarter of MaxConns), so that one client cannot take the
	// whole listener.
	MaxConnsPerAddr int
	// CapLoopback applies MaxConnsPerAddr to loopback clients too. By
	// default they are bound by MaxConns only: a loopback peer is this host
	// (a local reverse proxy or sidecar carrying every remote client, a
	// benchmark with thousands of simulated Agents).
	CapLoopback bool
	// ErrorLog receives the server's own errors; nil is the log package's.
	ErrorLog *log.Logger
	// TLSConfig, when set, makes Serve speak HTTPS (see ServerTLS).
	TLSConfig *tls.Config
}

func (o ServerOptions) withDefaults() ServerOptions {
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
		if n := fileLimit(); n > 0 {
			o.MaxConns = max(n-max(n/4, 64), 16)
		}
	}
	if o.MaxConnsPerAddr <= 0 {
		o.MaxConnsPerAddr = max(o.MaxConns/4, 1)
	}
	o.MaxConnsPerAddr = min(o.MaxConnsPerAddr, o.MaxConns)
	return o
}

// NewServer returns the server every flowplane listener uses, serving h,
// and ln wrapped to bound its connections: serve with Serve(srv, lim). The server has a header timeout, a body read deadline and an
// idle timeout; the listener caps connections per listener and per client
// address (see LimitListener).
func NewServer(ln net.Listener, h http.Handler, o ServerOptions) (srv *http.Server, lim *LimitListener) {
	o = o.withDefaults()
	lim = NewLimitListener(ln, o.MaxConns, o.MaxConnsPerAddr, o.CapLoopback)
	srv = &http.Server{
		Handler:           bodyDeadline(h, o.BodyTimeout),
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		IdleTimeout:       o.IdleTimeout,
		ConnState:         lim.ConnState,
		ErrorLog:          o.ErrorLog,
		TLSConfig:         o.TLSConfig,
	}
	closing := make(chan struct{})
	var once sync.Once
	srv.BaseContext = func(net.Listener) context.Context {
		return context.WithValue(context.Background(), closingKey{}, (<-chan struct{})(closing))
	}
	srv.RegisterOnShutdown(func() { once.Do(func() { close(closing) }) })
	return srv, lim
}

type closingKey struct{}

// Closing returns a channel closed when the server of NewServer that
// serves the request of ctx begins to shut down, or nil (never closed)
// outside such a server. A response that streams for long (a tap, an event
// stream) ends on it: Shutdown waits for every request in flight.
func Closing(ctx context.Context) <-chan struct{} {
	c, _ := ctx.Value(closingKey{}).(<-chan struct{})
	return c
}

// bodyDeadline sets a read deadline of d on the connection while a
// request's body is read, and lifts it at the body's end. A body trickled
// byte by byte is cut off at d; a bodiless request (a long-poll, an SSE
// stream) and a handler still working after reading its body have no
// deadline, so the server's background read never cancels them.
func bodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(d)) == nil {
				// On a copy: the server inspects its own request's body
				// after the handler (an unread body over 256 KiB closes the
				// connection instead of being drained first).
				r = r.WithContext(r.Context())
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the connection's read deadline once the body ends.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// LimitListener caps the connections a listener keeps open: at most max in
// all and perAddr from one client IP address (loopback clients only when
// capLoopback). When a new connection would
// pass a cap, the oldest idle connection (a keep-alive connection between
// requests, or one that has not sent its first request yet) within that cap
// is closed to make room; when none is idle, the new connection is closed at
// once. So idle connections never lock out a probe or an operator: a new
// request always displaces an idle connection, and one address can hold at
// most perAddr connections, leaving the rest of the listener to others.
// Its ConnState method must be the server's ConnState hook.
type LimitListener struct {
	net.Listener
	max, perAddr int
	capLoopback  bool

	mu     sync.Mutex // guards conns, byAddr, refused, evicted
	conns  map[*limitConn]struct{}
	byAddr map[string]int
	// refused and evicted count connections closed by the caps.
	refused, evicted int
}

// NewLimitListener wraps ln; see LimitListener.
func NewLimitListener(ln net.Listener, max, perAddr int, capLoopback bool) *LimitListener {
	return &LimitListener{Listener: ln, max: max, perAddr: perAddr, capLoopback: capLoopback,
		conns: map[*limitConn]struct{}{}, byAddr: map[string]int{}}
}

type limitConn struct {
	net.Conn
	l         *LimitListener
	addr      string
	idle      bool // guarded by l.mu
	idleSince time.Time
	closeOnce sync.Once
}

// NetConn returns the connection below (as tls.Conn's does), for code that
// needs the socket itself.
func (c *limitConn) NetConn() net.Conn { return c.Conn }

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() { c.l.forget(c) })
	return err
}

// Accept returns the next connection within the caps.
func (l *LimitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := c.RemoteAddr().String()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			addr = host
		}
		capped := l.capLoopback
		if ip, err := netip.ParseAddr(addr); err != nil || !ip.Unmap().IsLoopback() {
			capped = true
		}
		lc, victims := l.admit(c, addr, capped)
		for _, v := range victims {
			_ = v.Close()
		}
		if lc == nil {
			_ = c.Close()
			continue
		}
		return lc, nil
	}
}

// admit registers c, and returns the idle connections to close for it; a
// nil connection means c is refused. capped applies the per-address cap.
func (l *LimitListener) admit(c net.Conn, addr string, capped bool) (*limitConn, []*limitConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var victims []*limitConn
	if capped && l.byAddr[addr] >= l.perAddr {
		v := l.oldestIdleLocked(addr, nil)
		if v == nil {
			l.refused++
			return nil, nil
		}
		victims = append(victims, v)
	}
	if len(l.conns)-len(victims) >= l.max {
		var skip *limitConn
		if len(victims) > 0 {
			skip = victims[0]
		}
		v := l.oldestIdleLocked("", skip)
		if v == nil {
			l.refused++
			return nil, nil
		}
		victims = append(victims, v)
	}
	for _, v := range victims {
		l.dropLocked(v)
		l.evicted++
	}
	lc := &limitConn{Conn: c, l: l, addr: addr, idle: true, idleSince: time.Now()}
	l.conns[lc] = struct{}{}
	l.byAddr[addr]++
	return lc, victims
}

// oldestIdleLocked returns the idle connection idle longest but skip, of
// addr when addr is not "".
func (l *LimitListener) oldestIdleLocked(addr string, skip *limitConn) *limitConn {
	var out *limitConn
	for c := range l.conns {
		if !c.idle || c == skip || (addr != "" && c.addr != addr) {
			continue
		}
		if out == nil || c.idleSince.Before(out.idleSince) {
			out = c
		}
	}
	return out
}

func (l *LimitListener) dropLocked(c *limitConn) {
	if _, ok := l.conns[c]; !ok {
		return
	}
	delete(l.conns, c)
	if l.byAddr[c.addr]--; l.byAddr[c.addr] <= 0 {
		delete(l.byAddr, c.addr)
	}
}

func (l *LimitListener) forget(c *limitConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropLocked(c)
}

// ConnState tracks which connections are idle; it is the http.Server's
// ConnState hook. A connection wrapped again by the server (TLS) is
// unwrapped through its NetConn method.
func (l *LimitListener) ConnState(c net.Conn, state http.ConnState) {
	for {
		if _, ok := c.(*limitConn); ok {
			break
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return
		}
		c = u.NetConn()
	}
	lc := c.(*limitConn)
	switch state {
	case http.StateActive:
		l.mu.Lock()
		lc.idle = false
		l.mu.Unlock()
	case http.StateIdle:
		l.mu.Lock()
		lc.idle, lc.idleSince = true, time.Now()
		l.mu.Unlock()
	case http.StateHijacked:
		// Still open, now the hijacker's (a parked long-poll, which may
		// hand it back to the server): counted, never evicted, until its
		// Close.
		l.mu.Lock()
		lc.idle = false
		l.mu.Unlock()
	case http.StateClosed:
		lc.closeOnce.Do(func() { l.forget(lc) })
	}
}

// LimitStats are a LimitListener's counters.
type LimitStats struct {
	Open    int // connections open now
	Idle    int // of them, between requests or before the first one
	Refused int // new connections closed because a cap was reached
	Evicted int // idle connections closed to make room
}

// Stats returns the listener's counters.
func (l *LimitListener) Stats() LimitStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := LimitStats{Open: len(l.conns), Refused: l.refused, Evicted: l.evicted}
	for c := range l.conns {
		if c.idle {
			st.Idle++
		}
	}
	return st
}
