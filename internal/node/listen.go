package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
)

// Listener is the node's one HTTP listener: the control-plane server when
// health_check.enabled (it also serves the observability endpoints, so no
// second listener starts), else the observability listener when
// observability.enabled, else none.
type Listener struct {
	// Kind is "control-plane" or "observability".
	Kind string
	ln   net.Listener
	srv  *http.Server
}

// Listen binds the listener the configuration asks for; it returns nil
// when there is nothing to serve. Binding happens here, before the engine
// starts, so a taken port (or a health_check.tls pair that does not load)
// fails start-up at once. The control-plane server serves HTTPS when
// health_check.tls is set; the observability listener is always plain.
func (n *Node) Listen(o HandlerOptions) (*Listener, error) {
	hc := o.HealthCheck
	var (
		addr, kind string
		h          http.Handler
		tlsConf    *tls.Config
	)
	switch {
	case hc.Enabled:
		addr, kind, h = hc.Address, "control-plane", n.Handler(o)
		if hc.TLS != nil {
			var err error
			if tlsConf, err = httpapi.ServerTLS(hc.TLS.CertFile, hc.TLS.KeyFile, o.Logger); err != nil {
				return nil, fmt.Errorf("health_check.tls: %w", err)
			}
		}
	case hc.Observability.Enabled:
		addr, kind, h = hc.Observability.Address, "observability", n.ObservabilityHandler(o)
	default:
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listener on %s: %w", kind, addr, err)
	}
	so := o.Server
	so.TLSConfig = tlsConf
	srv, lim := httpapi.NewServer(ln, h, so)
	return &Listener{Kind: kind, ln: lim, srv: srv}, nil
}

// TLS reports whether the listener serves HTTPS (health_check.tls).
func (l *Listener) TLS() bool { return l.srv.TLSConfig != nil }

// Addr is the bound address (useful with port 0).
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Serve serves until ctx ends, then shuts down gracefully within 5 s.
func (l *Listener) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- httpapi.Serve(l.srv, l.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := l.srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
