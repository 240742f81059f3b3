//go:build unix

package fleet

import (
	"errors"
	"net"
	"syscall"
)

// peerGone reports whether the client of c has closed its end (or reset
// the connection): a read would return end-of-file or an error now. It
// peeks without waiting and consumes nothing, so a request the client sent
// ahead stays for the server.
func peerGone(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	for !ok {
		// TLS, the connection caps: the socket is below.
		u, wraps := c.(interface{ NetConn() net.Conn })
		if !wraps {
			return false
		}
		c = u.NetConn()
		sc, ok = c.(syscall.Conn)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	var buf [1]byte
	err = raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil:
			gone = n == 0
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EINTR):
		default:
			gone = true
		}
		return true
	})
	return gone || err != nil
}
