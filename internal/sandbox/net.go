package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// AllowFunc decides one connection: host is the name or address the
// component asked for, addr the address actually being connected to. A
// non-empty reason refuses it.
type AllowFunc func(host string, addr netip.Addr) (reason string)

// LookupFunc resolves a host name to its addresses, as
// net.Resolver.LookupNetIP does.
type LookupFunc func(ctx context.Context, host string) ([]netip.Addr, error)

// Net connects components to their destinations. Restricted (see
// [Restrict]), every connection's address is decided right before the
// connect system call, from the net.Dialer's Control hook: a name that
// resolved to an allowed address when the policy checked it and resolves
// elsewhere now (DNS rebinding) is refused at the address it resolves to.
// Only TCP and UDP are dialled; other networks (unix sockets) are
// refused. Its zero value dials anywhere. A Net is a value; it is safe
// for concurrent use.
type Net struct {
	allow  AllowFunc  // nil: unrestricted
	lookup LookupFunc // nil: net.DefaultResolver
	rule   string
}

// Restrict returns a Net that connects only where allow lets it,
// resolving host names with lookup (nil: the system resolver); refusals
// cite rule.
func Restrict(allow AllowFunc, lookup LookupFunc, rule string) Net {
	return Net{allow: allow, lookup: lookup, rule: rule}
}

// Restricted reports whether n decides the addresses it dials.
func (n Net) Restricted() bool { return n.allow != nil }

// DialFunc is the shape of net.Dialer.DialContext, which HTTP transports
// and most client libraries accept.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// DialContext calls f: a DialFunc is a mongo ContextDialer.
func (f DialFunc) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return f(ctx, network, address)
}

// Dial calls f without a deadline beyond its net.Dialer's Timeout: a
// DialFunc is a nats CustomDialer.
func (f DialFunc) Dial(network, address string) (net.Conn, error) {
	return f(context.Background(), network, address)
}

// Dial returns the dial function of d (nil: a zero net.Dialer) as n
// restricts it. Unrestricted it is d.DialContext itself.
func (n Net) Dial(d *net.Dialer) DialFunc {
	if d == nil {
		d = &net.Dialer{}
	}
	if !n.Restricted() {
		return d.DialContext
	}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		return n.dial(ctx, *d, network, address)
	}
}

// DialContext dials address with a zero net.Dialer as n restricts it.
func (n Net) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return n.Dial(nil)(ctx, network, address)
}

// dial resolves address's host itself (through n.lookup, which tests
// replace) and dials each address in turn with d, its Control hook
// deciding the address the socket is about to connect to.
func (n Net) dial(ctx context.Context, d net.Dialer, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return nil, &Error{Op: "dial", Path: network + " " + address, Reason: "only TCP and UDP destinations are allowed", Rule: n.rule}
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		lookup := n.lookup
		if lookup == nil {
			lookup = func(ctx context.Context, h string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", h)
			}
		}
		if addrs, err = lookup(ctx, host); err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
		if len(addrs) == 0 {
			return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("%s has no addresses", host)}
		}
	}
	chained := d.ControlContext
	plain := d.Control
	d.Control = nil
	d.ControlContext = func(ctx context.Context, network, sockAddr string, c syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(sockAddr)
		if err != nil {
			return &Error{Op: "dial", Path: sockAddr, Reason: "an address that cannot be read", Rule: n.rule}
		}
		if why := n.allow(host, ap.Addr()); why != "" {
			return &Error{Op: "dial", Path: describe(host, sockAddr), Reason: why, Rule: n.rule}
		}
		switch {
		case chained != nil:
			return chained(ctx, network, sockAddr, c)
		case plain != nil:
			return plain(network, sockAddr, c)
		}
		return nil
	}
	var errs []error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		if se, ok := errors.AsType[*Error](err); ok {
			err = se // its text says all; net.OpError's would repeat the address
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

func describe(host, sockAddr string) string {
	if h, _, err := net.SplitHostPort(sockAddr); err == nil && h != host {
		return sockAddr + " (" + host + ")"
	}
	return sockAddr
}

// HTTPTransport returns t (nil: a clone of http.DefaultTransport's) with
// its connections made through n. Restricted, t also uses no proxy: a
// proxy would connect to the destination itself, where n cannot decide
// the address.
func (n Net) HTTPTransport(t *http.Transport) *http.Transport {
	if t == nil {
		t = http.DefaultTransport.(*http.Transport).Clone()
	}
	if n.Restricted() {
		t.Proxy = nil
		t.DialContext = n.Dial(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second})
	}
	return t
}
