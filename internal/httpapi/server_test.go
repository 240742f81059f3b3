package httpapi_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
)

// serveLimited serves routes behind NewServer on a real loopback listener
// and returns its address and the limiting listener.
func serveLimited(t *testing.T, routes []httpapi.Route, opts httpapi.Options, so httpapi.ServerOptions) (string, *httpapi.LimitListener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, lim := httpapi.NewServer(ln, httpapi.NewRouter(routes, opts), so)
	go func() { _ = srv.Serve(lim) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return ln.Addr().String(), lim
}

// rawConn is a client connection that sends hand-written requests.
type rawConn struct {
	net.Conn
	rd *bufio.Reader
}

func dialRaw(t *testing.T, addr, from string) *rawConn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{Conn: c, rd: bufio.NewReader(c)}
}

// get sends a keep-alive GET and reads the answer; it returns the status,
// or an error when the server closed the connection.
func (c *rawConn) get(path string, header ...string) (int, error) {
	req := "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
	for i := 0; i+1 < len(header); i += 2 {
		req += header[i] + ": " + header[i+1] + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		return 0, err
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(c.rd, nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// closedByServer reports whether the server has closed c: a read returns
// EOF (or a reset) rather than waiting. The deadline only bounds the test
// when the server wrongly keeps c open.
func (c *rawConn) closedByServer(wait time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.rd.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func limitRoutes(wait <-chan struct{}) []httpapi.Route {
	return []httpapi.Route{
		{Method: "GET", Pattern: "/health", Handler: ok, Public: true},
		{Method: "GET", Pattern: "/api/v1/status", Handler: ok},
		{Method: "GET", Pattern: "/api/v1/wait", Handler: func(w http.ResponseWriter, r *http.Request) error {
			select {
			case <-wait:
			case <-r.Context().Done():
				return r.Context().Err()
			}
			return httpapi.WriteJSON(w, 200, map[string]bool{"ok": true})
		}},
	}
}

// TestIdleConnectionsCannotExhaustListener: many idle connections from one
// address (keep-alive ones between requests, and ones that never sent a
// request) do not keep an operator request or a probe from being served:
// the oldest idle ones are closed to make room, and no more than the
// per-address cap stay open.
func TestIdleConnectionsCannotExhaustListener(t *testing.T) {
	const perAddr, maxConns, idle = 4, 8, 24
	addr, lim := serveLimited(t, limitRoutes(nil), httpapi.Options{Auth: httpapi.BearerToken(token, "operator")},
		httpapi.ServerOptions{MaxConns: maxConns, MaxConnsPerAddr: perAddr, CapLoopback: true})
	var conns []*rawConn
	for i := range idle {
		c := dialRaw(t, addr, "")
		if i%2 == 0 { // keep-alive: one request, then idle
			if st, err := c.get("/health"); err != nil || st != 200 {
				t.Fatalf("idle conn %d: %d %v", i, st, err)
			}
		}
		conns = append(conns, c)
	}
	// The operator and the probe come from the same address as the flood.
	op := dialRaw(t, addr, "")
	if st, err := op.get("/api/v1/status", "Authorization", "Bearer "+token); err != nil || st != 200 {
		t.Fatalf("operator request: %d %v", st, err)
	}
	probe := dialRaw(t, addr, "")
	if st, err := probe.get("/health"); err != nil || st != 200 {
		t.Fatalf("probe: %d %v", st, err)
	}
	if st := lim.Stats(); st.Open > perAddr || st.Evicted < idle+2-perAddr {
		t.Fatalf("stats %+v: want at most %d open, at least %d evicted", st, perAddr, idle+2-perAddr)
	}
	// Which ones survive depends on when the server saw each turn idle; how
	// many does not.
	closed := 0
	for _, c := range conns {
		if c.closedByServer(2 * time.Second) {
			closed++
		}
	}
	if closed < idle-perAddr {
		t.Fatalf("%d of %d idle connections closed, want at least %d", closed, idle, idle-perAddr)
	}
}

// TestBusyAddressIsRefusedOthersServed: when one address holds its cap in
// requests in progress (long-polls), its next connection is closed at once,
// while another address is still served.
func TestBusyAddressIsRefusedOthersServed(t *testing.T) {
	const perAddr = 3
	wait := make(chan struct{})
	defer close(wait)
	addr, lim := serveLimited(t, limitRoutes(wait), httpapi.Options{Logger: discard()},
		httpapi.ServerOptions{MaxConns: 8, MaxConnsPerAddr: perAddr, CapLoopback: true})
	for range perAddr {
		c := dialRaw(t, addr, "127.0.0.1")
		if _, err := io.WriteString(c, "GET /api/v1/wait HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	// Until the server has read them, the long-polls are idle connections
	// (an extra one would displace them): wait, bounded, until they run.
	for i := 0; ; i++ {
		if st := lim.Stats(); st.Open-st.Idle == perAddr {
			break
		}
		if i == 1000 {
			t.Fatalf("the long-polls never ran: %+v", lim.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	probe := dialRaw(t, addr, "127.0.0.2")
	if st, err := probe.get("/health"); err != nil || st != 200 {
		t.Fatalf("probe from another address: %d %v", st, err)
	}
	if lim.Stats().Refused > 0 {
		t.Fatalf("refused before the cap: %+v", lim.Stats())
	}
	if extra := dialRaw(t, addr, "127.0.0.1"); !extra.closedByServer(5 * time.Second) {
		t.Fatal("a fourth connection from a busy address was kept open")
	}
	if lim.Stats().Refused == 0 {
		t.Fatalf("stats %+v: want a refused connection", lim.Stats())
	}
	other := dialRaw(t, addr, "127.0.0.2")
	if st, err := other.get("/api/v1/status"); err != nil || st != 200 {
		t.Fatalf("request from another address: %d %v", st, err)
	}
}

// TestIdleTimeoutClosesKeepAlive: a keep-alive connection idle past
// IdleTimeout is closed by the server.
func TestIdleTimeoutClosesKeepAlive(t *testing.T) {
	addr, _ := serveLimited(t, limitRoutes(nil), httpapi.Options{}, httpapi.ServerOptions{IdleTimeout: 50 * time.Millisecond})
	c := dialRaw(t, addr, "")
	if st, err := c.get("/health"); err != nil || st != 200 {
		t.Fatalf("%d %v", st, err)
	}
	if !c.closedByServer(5 * time.Second) {
		t.Fatal("an idle keep-alive connection stayed open")
	}
}

// TestSlowBodyIsCutOff: a body trickled one byte at a time is cut off at
// BodyTimeout; the client never gets to send all of it.
func TestSlowBodyIsCutOff(t *testing.T) {
	url, _ := serveLimited(t, []httpapi.Route{{Method: "POST", Pattern: "/x", Handler: func(w http.ResponseWriter, r *http.Request) error {
		var v map[string]any
		if err := httpapi.DecodeJSON(r, &v, 0); err != nil {
			return err
		}
		return httpapi.WriteJSON(w, 200, v)
	}}}, httpapi.Options{}, httpapi.ServerOptions{BodyTimeout: 100 * time.Millisecond})
	c := dialRaw(t, url, "")
	const size = 400
	if _, err := io.WriteString(c, "POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
		"Content-Length: 400\r\n\r\n{\"a\":\""); err != nil {
		t.Fatal(err)
	}
	answered := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(c.rd, nil)
		if err != nil {
			answered <- -1
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	for sent := 7; sent < size-2; sent++ {
		select {
		case st := <-answered:
			if st == 200 {
				t.Fatalf("the slow body was accepted")
			}
			return // cut off before the body ended
		case <-time.After(20 * time.Millisecond):
		}
		if _, err := io.WriteString(c, "a"); err != nil {
			return // the server closed the connection
		}
	}
	t.Fatal("the server read a trickled body to its end without cutting it off")
}

// TestLongRequestsOutliveBodyTimeout: a bodiless long-poll and a handler
// still working after reading its body are not cut by BodyTimeout (their
// context is not cancelled), and the next request on the connection works.
func TestLongRequestsOutliveBodyTimeout(t *testing.T) {
	const d = 30 * time.Millisecond
	hold := func(w http.ResponseWriter, r *http.Request) error {
		if r.Body != nil {
			if _, err := io.ReadAll(r.Body); err != nil {
				return err
			}
		}
		select {
		case <-time.After(10 * d):
		case <-r.Context().Done():
			return httpapi.Unavailable("cancelled", "the request context was cancelled")
		}
		return httpapi.WriteJSON(w, 200, map[string]bool{"ok": true})
	}
	addr, _ := serveLimited(t, []httpapi.Route{
		{Method: "GET", Pattern: "/poll", Handler: hold},
		{Method: "POST", Pattern: "/work", Handler: hold},
	}, httpapi.Options{}, httpapi.ServerOptions{BodyTimeout: d})
	client := &http.Client{Timeout: 10 * time.Second}
	for range 2 {
		resp, err := client.Get("http://" + addr + "/poll")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("long-poll: %v %v", resp, err)
		}
		resp.Body.Close()
		resp, err = client.Post("http://"+addr+"/work", "application/json", strings.NewReader(`{"x":1}`))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("work after the body: %v %v", resp, err)
		}
		resp.Body.Close()
	}
}

// TestBodyCapAnsweredBeforeReading: a Content-Length over the cap is
// answered 413 at once, before the client sends any of the body, and before
// authentication.
func TestBodyCapAnsweredBeforeReading(t *testing.T) {
	addr, _ := serveLimited(t, table(), httpapi.Options{MaxBodyBytes: 1024, Auth: httpapi.BearerToken(token, "operator")}, httpapi.ServerOptions{})
	c := dialRaw(t, addr, "")
	if _, err := io.WriteString(c, "PUT /configuration/draft HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
		"Content-Length: 10000000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(c.rd, nil)
	if err != nil {
		t.Fatalf("no answer before the body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
}

// TestHijackedConnectionStaysCounted: a connection a handler takes over
// (the Hub parks long-polls so) is still an open socket: it counts against
// the caps and is never evicted as idle until it is closed.
func TestHijackedConnectionStaysCounted(t *testing.T) {
	hijacked := make(chan net.Conn, 1)
	routes := []httpapi.Route{{Method: "GET", Pattern: "/hijack", Public: true,
		Handler: func(w http.ResponseWriter, r *http.Request) error {
			c, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return err
			}
			hijacked <- c
			return nil
		}}}
	addr, lim := serveLimited(t, routes, httpapi.Options{}, httpapi.ServerOptions{MaxConns: 1})
	c := dialRaw(t, addr, "")
	if _, err := io.WriteString(c, "GET /hijack HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	var server net.Conn
	select {
	case server = <-hijacked:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never ran")
	}
	if st := lim.Stats(); st.Open != 1 || st.Idle != 0 {
		t.Fatalf("after hijack: %+v, want 1 open, 0 idle", st)
	}
	// The cap is full and the hijacked connection is not idle: a new one
	// is refused rather than displacing it.
	other := dialRaw(t, addr, "")
	if !other.closedByServer(5 * time.Second) {
		t.Fatal("a connection past the cap was kept open")
	}
	if c.closedByServer(100 * time.Millisecond) {
		t.Fatal("the hijacked connection was evicted")
	}
	server.Close()
	if st := lim.Stats(); st.Open != 0 {
		t.Fatalf("after the hijacker closed it: %+v, want 0 open", st)
	}
}

// TestClosingEndsStreamsAtShutdown: a response that streams until
// Closing's channel closes lets Shutdown finish; a request served outside
// NewServer's server gets a nil channel.
func TestClosingEndsStreamsAtShutdown(t *testing.T) {
	if httpapi.Closing(context.Background()) != nil {
		t.Fatal("Closing outside a server is not nil")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	srv, lim := httpapi.NewServer(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		close(started)
		select {
		case <-httpapi.Closing(r.Context()):
		case <-time.After(time.Minute): // a hang guard, not a timing assertion
		}
	}), httpapi.ServerOptions{})
	served := make(chan error, 1)
	go func() { served <- httpapi.Serve(srv, lim) }()
	resp, err := http.Get("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a streaming response in flight: %v", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
}
