//go:build !unix

package fleet

import "net"

// peerGone cannot tell on this system; a parked poll of a client that went
// away is found out when its answer is written.
func peerGone(net.Conn) bool { return false }
