package websocket_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	gws "github.com/gorilla/websocket"

	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/stream"

	_ "github.com/flowplane/flowplane/internal/connect/input"
	_ "github.com/flowplane/flowplane/internal/connect/output"
)

// wsServer is a WebSocket server on a fixed loopback port that can be
// stopped (dropping its connections) and started again on the same port.
// Every connection it accepts is handed to the test on conns.
type wsServer struct {
	t     testing.TB
	port  int
	conns chan *serverConn

	mu   sync.Mutex // guards srv, live
	srv  *http.Server
	live []*serverConn
}

// serverConn is one accepted connection; the test writes to it from one
// goroutine.
type serverConn struct {
	c       *gws.Conn
	headers http.Header
	done    chan struct{} // closed when the client went away
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func newServer(t testing.TB) *wsServer {
	s := &wsServer{t: t, port: freePort(t), conns: make(chan *serverConn, 16)}
	t.Cleanup(s.stop)
	return s
}

func startServer(t testing.TB) *wsServer {
	s := newServer(t)
	s.start()
	return s
}

func (s *wsServer) url() string { return fmt.Sprintf("ws://127.0.0.1:%d/ws", s.port) }

func (s *wsServer) start() {
	s.t.Helper()
	var l net.Listener
	var err error
	// The port was ours a moment ago; a just-closed listener may take a
	// few tries to rebind.
	for range 100 {
		if l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", s.port)); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatal(err)
	}
	up := gws.Upgrader{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ws" {
			http.NotFound(w, r)
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		sc := &serverConn{c: c, headers: r.Header.Clone(), done: make(chan struct{})}
		s.mu.Lock()
		s.live = append(s.live, sc)
		s.mu.Unlock()
		// Read until the client goes away so that close frames and
		// pings are handled.
		go func() {
			defer close(sc.done)
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					return
				}
			}
		}()
		s.conns <- sc
	})}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(l) }()
}

// stop closes the listener and every connection (without a close frame,
// as a crash would).
func (s *wsServer) stop() {
	s.mu.Lock()
	srv, live := s.srv, s.live
	s.srv, s.live = nil, nil
	s.mu.Unlock()
	if srv == nil {
		return
	}
	_ = srv.Close()
	for _, c := range live {
		_ = c.c.Close()
	}
}

// accept waits for the next connection a client opened.
func (s *wsServer) accept() *serverConn {
	s.t.Helper()
	select {
	case c := <-s.conns:
		return c
	case <-time.After(20 * time.Second):
		s.t.Fatal("timed out after 20s waiting for a client to connect")
		return nil
	}
}

// send writes messages first..first+n-1 as {"id":i}, text and binary
// alternately.
func (c *serverConn) send(t testing.TB, first, n int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		kind := gws.TextMessage
		if i%2 == 1 {
			kind = gws.BinaryMessage
		}
		if err := c.c.WriteMessage(kind, fmt.Appendf(nil, `{"id":%d}`, i)); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func status(t testing.TB, e *engine.Engine, id string) stream.Status {
	t.Helper()
	return componenttest.Stream(t, e, id).Status
}

func lines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// distinct counts the lines of path by content.
func distinct(t testing.TB, path string) map[string]int {
	seen := map[string]int{}
	for _, l := range lines(t, path) {
		seen[l]++
	}
	return seen
}
