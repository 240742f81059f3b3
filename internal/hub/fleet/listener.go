package fleet

import (
	"net"
	"net/http"
	"sync"
)

// Listener is the listener the Hub serves on: the connections its
// listener accepts, and the connections of parked polls once answered, which
// go back to the server for their next request (Fleet.ParkOn).
type Listener struct {
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

// NewListener returns a Listener over ln; it accepts from ln until Close.
func NewListener(ln net.Listener) *Listener {
	l := &Listener{Listener: ln, accepted: make(chan accepted), back: make(chan net.Conn), done: make(chan struct{}),
		returned: map[net.Conn]bool{}}
	go l.acceptLoop()
	return l
}

func (l *Listener) acceptLoop() {
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
func (l *Listener) Accept() (net.Conn, error) {
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
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		err = l.Listener.Close()
	})
	return err
}

// requeue hands an answered poll's connection back to the server.
func (l *Listener) requeue(c net.Conn) {
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

func (l *Listener) forget(c net.Conn) {
	l.mu.Lock()
	delete(l.returned, c)
	l.mu.Unlock()
}

// ConnState is the server's ConnState hook: a returned connection that
// starts a request (or ends) is the server's alone again.
func (l *Listener) ConnState(c net.Conn, st http.ConnState) {
	if st != http.StateNew {
		l.forget(c)
	}
}

// CloseReturned closes the returned connections that have not started a
// request, as Shutdown closes idle ones, and every one handed back later.
func (l *Listener) CloseReturned() {
	l.mu.Lock()
	l.shut = true
	cs := l.returned
	l.returned = map[net.Conn]bool{}
	l.mu.Unlock()
	for c := range cs {
		_ = c.Close()
	}
}
