package fleet

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
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
// goes back to the HTTP server through the Hub's listener (Listener)
// and serves the Agent's next request like any kept-alive connection.

// Poll answers a long-poll of node id that may wait up to wait for a
// command: the commands ready now, else the first to come, or none when
// the wait ends, ctx ends or the fleet shuts down. A poll that has to wait
// is parked when its connection can be taken over (see Park): then Poll
// returns parked, and the fleet writes the answer later.
func (f *Fleet) Poll(ctx context.Context, w http.ResponseWriter, r *http.Request, id string, wait time.Duration) (cmds []wire.Command, parked bool) {
	until := time.Now().Add(wait)
	f.mu.Lock()
	f.nodeLocked(id).pollers++
	cmds, _ = f.takeLocked(id, f.now())
	f.mu.Unlock()
	if len(cmds) == 0 && wait > 0 && f.park(w, r, id, until) {
		return nil, true // answered when a command comes or the wait ends
	}
	defer f.pollDone(id)
	if len(cmds) > 0 {
		return cmds, false
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		f.mu.Lock()
		cmds, wake := f.takeLocked(id, f.now())
		forgotten := f.nodeLocked(id).forgotten
		f.mu.Unlock()
		if len(cmds) > 0 || forgotten {
			return cmds, false
		}
		select {
		case <-wake:
			continue
		case <-timer.C:
		case <-ctx.Done():
		case <-f.done:
		}
		return nil, false
	}
}

// pollDone counts a long-poll of node id answered.
func (f *Fleet) pollDone(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.nodes[id]; n != nil {
		n.pollers = max(n.pollers-1, 0)
	}
}

// CommandPage is the answer to a long-poll: cmds, all on one page (none:
// an empty page).
func CommandPage(cmds []wire.Command) wire.Page[wire.Command] {
	if cmds == nil {
		cmds = []wire.Command{}
	}
	return wire.Page[wire.Command]{Items: cmds, Page: 1, PageSize: len(cmds), Total: len(cmds)}
}

// ParkOn sets the listener the Hub serves on: the connections of answered
// parked polls go back to the server through it. Until it is set, polls
// are not parked.
func (f *Fleet) ParkOn(l *Listener) { f.listener.Store(l) }

// Shutdown answers every parked poll with no command and closes its
// connection; from now on a poll does not park or wait, and an answered
// parked poll's connection is closed, not handed back.
func (f *Fleet) Shutdown() {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.done)
	}
	var all []*parkedPoll
	for _, n := range f.nodes {
		for _, p := range n.parked {
			p.timer.Stop()
			all = append(all, p)
		}
		n.parked = nil
	}
	f.mu.Unlock()
	for _, p := range all {
		p.answer(nil)
	}
}

// parkedPoll is one long-poll waiting without a goroutine. Fleet.mu
// guards its place in its node's parked list; whoever takes it off the
// list answers it, once.
type parkedPoll struct {
	f      *Fleet
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
func (f *Fleet) park(w http.ResponseWriter, r *http.Request, nodeID string, until time.Time) bool {
	l := f.listener.Load()
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
	p := &parkedPoll{f: f, nodeID: nodeID, conn: conn, raw: conn, header: w.Header().Clone(), until: until, close: r.Close}
	if n := brw.Reader.Buffered(); n > 0 {
		// A request sent ahead of the answer stays first in line for the
		// server.
		ahead, _ := brw.Reader.Peek(min(n, maxParkedBuffered))
		p.conn = &aheadConn{Conn: conn, r: io.MultiReader(bytes.NewReader(bytes.Clone(ahead)), conn)}
		p.close = p.close || n > maxParkedBuffered
	}
	f.mu.Lock()
	// A command may have come since the handler looked.
	cmds, _ := f.takeLocked(nodeID, f.now())
	if len(cmds) > 0 || f.closed {
		f.mu.Unlock()
		p.answer(cmds)
		return true
	}
	p.parkLocked()
	f.mu.Unlock()
	return true
}

// parkLocked puts p on its node's parked list until p.until. Fleet.mu is
// held.
func (p *parkedPoll) parkLocked() {
	n := p.f.nodeLocked(p.nodeID)
	n.parked = append(n.parked, p)
	p.timer = time.AfterFunc(time.Until(p.until), p.expire)
}

// wakeParkedLocked answers the node's parked polls: its queue grew.
// Fleet.mu is held.
func (n *node) wakeParkedLocked() {
	for _, p := range n.parked {
		p.timer.Stop()
		go p.deliver()
	}
	n.parked = nil
}

// unparkLocked takes p off its node's list and reports whether it was
// there. Fleet.mu is held.
func (p *parkedPoll) unparkLocked() bool {
	n := p.f.nodes[p.nodeID]
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
	p.f.mu.Lock()
	mine := p.unparkLocked()
	p.f.mu.Unlock()
	if mine {
		p.answer(nil)
	}
}

// deliver answers p with the node's commands, or parks it again when
// another poll took them first and its wait is not over. A poll whose
// client went away (an Agent killed while it waited) is dropped first, so
// that it takes no command from the poll of the Agent's next run.
func (p *parkedPoll) deliver() {
	f := p.f
	if peerGone(p.raw) {
		f.pollDone(p.nodeID)
		_ = p.conn.Close()
		return
	}
	now := f.now()
	f.mu.Lock()
	cmds, _ := f.takeLocked(p.nodeID, now)
	if len(cmds) == 0 && time.Now().Before(p.until) && !f.closed {
		p.parkLocked()
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	p.answer(cmds)
}

// answer writes the poll's 200 with cmds (none: an empty page) and hands
// the connection back to the server, or closes it when the client asked
// to or the fleet shut down.
func (p *parkedPoll) answer(cmds []wire.Command) {
	f := p.f
	f.mu.Lock()
	if n := f.nodes[p.nodeID]; n != nil {
		n.pollers = max(n.pollers-1, 0)
	}
	closing := p.close || f.closed
	f.mu.Unlock()
	rec := &recordedResponse{header: p.header}
	if err := httpapi.WriteJSON(rec, http.StatusOK, CommandPage(cmds)); err != nil {
		_ = p.conn.Close()
		return
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
	if l := f.listener.Load(); l != nil {
		l.requeue(p.conn)
		return
	}
	_ = p.conn.Close()
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
