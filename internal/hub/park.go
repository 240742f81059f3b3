package hub

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/wire"
)

// Every Agent keeps a long-poll waiting at the Hub almost all the time.
// Held by net/http, a waiting request costs two goroutines (the
// connection's and its background reader) and the connection's read and
// write buffers: with 10,000 Agents, most of the Hub's memory. So a
// long-poll that has to wait is parked instead: the handler takes the
// connection over (Hijack) and returns, and the poll waits as a small
// record on its node with a timer, without a goroutine. A command for the
// node, the timer or the Hub's shutdown answers it; the connection then
// goes back to the HTTP server through the Hub's listener (pollListener)
// and serves the Agent's next request like any kept-alive connection.

// parkedPoll is one long-poll waiting without a goroutine. The fleet's mu
// guards its place in its node's parked list; whoever takes it off the list
// answers it, once.
type parkedPoll struct {
	h      *Hub
	nodeID string
	conn   net.Conn
	raw    net.Conn    // conn as hijacked, for peerGone
	header http.Header // the response headers set before the poll parked
	until  time.Time   // the end of the wait
	close  bool        // the client asked to close the connection after the answer
	timer  *time.Timer
}

// maxParkedBuffered bounds the bytes a client may have sent ahead of a
// parked poll's answer (a pipelined request); more is not parked.
const maxParkedBuffered = 64 << 10

// park takes over the connection of a long-poll of node that has nothing
// to deliver before until. It reports false, having changed nothing, when
// the connection cannot be taken over (no parking listener, HTTP/2, a test
// recorder): the caller then waits the usual way.
func (h *Hub) park(w http.ResponseWriter, r *http.Request, nodeID string, until time.Time) bool {
	l := h.pollListener()
	if l == nil || r.ProtoMajor != 1 || !r.ProtoAtLeast(1, 1) || r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		return false // a body would be left unread on the connection
	}
	if r.TLS != nil && !l.yieldsTLS {
		// The server wraps what the listener yields in TLS: a connection
		// handed back would be wrapped twice.
		return false
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	p := &parkedPoll{h: h, nodeID: nodeID, conn: conn, raw: conn, header: w.Header().Clone(), until: until, close: r.Close}
	if n := brw.Reader.Buffered(); n > 0 {
		// A request sent ahead of the answer stays first in line for the
		// server.
		ahead, _ := brw.Reader.Peek(min(n, maxParkedBuffered))
		p.conn = &aheadConn{Conn: conn, r: io.MultiReader(bytes.NewReader(bytes.Clone(ahead)), conn)}
		p.close = p.close || n > maxParkedBuffered
	}
	h.fleet.mu.Lock()
	// A command may have come since the handler looked.
	cmds, _ := h.fleet.takeLocked(nodeID, h.opts.Now())
	closing := false
	select {
	case <-h.closing:
		closing = true
	default:
	}
	if len(cmds) > 0 || closing {
		h.fleet.mu.Unlock()
		p.answer(cmds)
		return true
	}
	n := h.fleet.nodeLocked(nodeID)
	n.parked = append(n.parked, p)
	p.timer = time.AfterFunc(time.Until(until), p.expire)
	h.fleet.mu.Unlock()
	return true
}

// wakeParkedLocked answers the node's parked polls: its queue grew. f.mu
// is held.
func (n *nodeState) wakeParkedLocked() {
	for _, p := range n.parked {
		p.timer.Stop()
		go p.deliver()
	}
	n.parked = nil
}

// unparkLocked takes p off its node's list and reports whether it was
// there. h.fleet.mu is held.
func (p *parkedPoll) unparkLocked() bool {
	n := p.h.fleet.nodes[p.nodeID]
	if n == nil {
		return false
	}
	for i, q := range n.parked {
		if q == p {
			n.parked = append(n.parked[:i], n.parked[i+1:]...)
			return true
		}
	}
	return false
}

// expire answers p with no command: its wait ended.
func (p *parkedPoll) expire() {
	p.h.fleet.mu.Lock()
	mine := p.unparkLocked()
	p.h.fleet.mu.Unlock()
	if mine {
		p.answer(nil)
	}
}

// deliver answers p with the node's commands, or parks it again when
// another poll took them first and its wait is not over. A poll whose
// client went away (an Agent killed while it waited) is dropped first, so
// that it takes no command from the poll of the Agent's next run.
func (p *parkedPoll) deliver() {
	h := p.h
	if peerGone(p.raw) {
		h.fleet.mu.Lock()
		if n := h.fleet.nodes[p.nodeID]; n != nil {
			n.pollers = max(n.pollers-1, 0)
		}
		h.fleet.mu.Unlock()
		_ = p.conn.Close()
		return
	}
	now := h.opts.Now()
	h.fleet.mu.Lock()
	cmds, _ := h.fleet.takeLocked(p.nodeID, now)
	if len(cmds) == 0 && time.Now().Before(p.until) {
		select {
		case <-h.closing:
		default:
			n := h.fleet.nodeLocked(p.nodeID)
			n.parked = append(n.parked, p)
			p.timer = time.AfterFunc(time.Until(p.until), p.expire)
			h.fleet.mu.Unlock()
			return
		}
	}
	h.fleet.mu.Unlock()
	p.answer(cmds)
}

// answer writes the poll's 200 with cmds (none: an empty page) and hands
// the connection back to the server, or closes it when the client asked
// to or the Hub is closing.
func (p *parkedPoll) answer(cmds []wire.Command) {
	h := p.h
	h.fleet.mu.Lock()
	if n := h.fleet.nodes[p.nodeID]; n != nil {
		n.pollers = max(n.pollers-1, 0)
	}
	h.fleet.mu.Unlock()
	page := wire.Page[wire.Command]{Items: cmds, Page: 1, PageSize: len(cmds), Total: len(cmds)}
	if cmds == nil {
		page.Items = []wire.Command{}
	}
	rec := &recordedResponse{header: p.header}
	if err := httpapi.WriteJSON(rec, http.StatusOK, page); err != nil {
		_ = p.conn.Close()
		return
	}
	closing := p.close
	select {
	case <-h.closing:
		closing = true
	default:
	}
	if closing {
		rec.header.Set("Connection", "close")
	}
	rec.header.Set("Content-Length", strconv.Itoa(rec.body.Len()))
	rec.header.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 200 OK\r\n")
	_ = rec.header.Write(&b)
	b.WriteString("\r\n")
	b.Write(rec.body.Bytes())
	_ = p.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := p.conn.Write(b.Bytes())
	_ = p.conn.SetWriteDeadline(time.Time{})
	if err != nil || closing {
		_ = p.conn.Close()
		return
	}
	if l := h.pollListener(); l != nil {
		l.requeue(p.conn)
		return
	}
	_ = p.conn.Close()
}

// answerParked answers every parked poll with no command: the Hub stops
// serving. h.closing is closed.
func (h *Hub) answerParked() {
	h.fleet.mu.Lock()
	var all []*parkedPoll
	for _, n := range h.fleet.nodes {
		for _, p := range n.parked {
			p.timer.Stop()
			all = append(all, p)
		}
		n.parked = nil
	}
	h.fleet.mu.Unlock()
	for _, p := range all {
		p.answer(nil)
	}
}

// recordedResponse is a response built in memory for a parked poll.
type recordedResponse struct {
	header http.Header
	body   bytes.Buffer
}

func (r *recordedResponse) Header() http.Header         { return r.header }
func (r *recordedResponse) WriteHeader(int)             {}
func (r *recordedResponse) Write(b []byte) (int, error) { return r.body.Write(b) }

// aheadConn is a connection whose first bytes were already read from it.
type aheadConn struct {
	net.Conn
	r io.Reader
}

func (c *aheadConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// NetConn returns the connection below, for the connection caps'
// bookkeeping (httpapi.LimitListener.ConnState).
func (c *aheadConn) NetConn() net.Conn { return c.Conn }

// pollListener is the listener the Hub serves on: the connections its
// listener accepts, and the connections of parked polls once answered, which
// go back to the server for their next request.
type pollListener struct {
	net.Listener
	accepted chan accepted
	back     chan net.Conn
	done     chan struct{}
	once     sync.Once

	// yieldsTLS is set when the listener below yields TLS connections
	// itself (tls.NewListener) and the server does not wrap them: then the
	// connection of an HTTPS poll can go back as it is.
	yieldsTLS bool

	mu sync.Mutex
	// returned holds the connections handed back that have not started
	// their next request: the server counts them as new, not idle, and its
	// Shutdown would wait 5 s for them.
	returned map[net.Conn]bool
	shut     bool // closeReturned ran: connections handed back are closed
}

type accepted struct {
	c   net.Conn
	err error
}

func newPollListener(ln net.Listener) *pollListener {
	l := &pollListener{Listener: ln, accepted: make(chan accepted), back: make(chan net.Conn), done: make(chan struct{}),
		returned: map[net.Conn]bool{}}
	go l.acceptLoop()
	return l
}

func (l *pollListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		select {
		case l.accepted <- accepted{c, err}:
		case <-l.done:
			if c != nil {
				_ = c.Close()
			}
			return
		}
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
		}
	}
}

// Accept returns the next new or returning connection.
func (l *pollListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.back:
		return c, nil
	case a := <-l.accepted:
		return a.c, a.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close closes the listener; connections handed back afterwards are closed.
func (l *pollListener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		err = l.Listener.Close()
	})
	return err
}

// requeue hands an answered poll's connection back to the server.
func (l *pollListener) requeue(c net.Conn) {
	l.mu.Lock()
	if l.shut {
		l.mu.Unlock()
		_ = c.Close()
		return
	}
	l.returned[c] = true
	l.mu.Unlock()
	select {
	case l.back <- c:
	case <-l.done:
		l.forget(c)
		_ = c.Close()
	}
}

func (l *pollListener) forget(c net.Conn) {
	l.mu.Lock()
	delete(l.returned, c)
	l.mu.Unlock()
}

// connState is the server's ConnState hook: a returned connection that
// starts a request (or ends) is the server's alone again.
func (l *pollListener) connState(c net.Conn, st http.ConnState) {
	if st != http.StateNew {
		l.forget(c)
	}
}

// closeReturned closes the returned connections that have not started a
// request, as Shutdown closes idle ones, and every one handed back later.
func (l *pollListener) closeReturned() {
	l.mu.Lock()
	l.shut = true
	cs := l.returned
	l.returned = map[net.Conn]bool{}
	l.mu.Unlock()
	for c := range cs {
		_ = c.Close()
	}
}
