package dataplane

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
)

// The handshake, inside the TLS channel, before any stream frame:
//
//	dialer   → acceptor  hello     version, job, from, to, nonce_d
//	acceptor → dialer    challenge nonce_a, proof(acceptor)
//	dialer   → acceptor  proof     proof(dialer)
//	acceptor → dialer    accept
//
// proof(p) = HMAC-SHA256(secret, nonce_d | nonce_a | job | p | other), the
// strings length-prefixed, so each end proves it holds the job's secret for
// this connection and this direction: neither proof can be replayed on
// another connection nor reflected back at its maker. The acceptor also
// requires the TLS client certificate to be the one pinned for the node the
// hello names. An acceptor that refuses answers every refusal the same way
// (a challenge with a random proof, then a refuse frame saying "refused"
// after the dialer's proof): the bytes never tell a job that does not exist
// from a node that is not in it or a wrong secret.

// Refuse reasons, the values of svc_dataplane_connections_refused_total's
// reason label: a bounded set, never a peer-supplied value.
const (
	reasonUnknownJob  = "unknown_job"
	reasonBadSecret   = "bad_secret"
	reasonUnknownNode = "unknown_node"
	reasonProtocol    = "protocol"
	// reasonTLS: the TLS handshake failed, the client certificate among
	// them is not pinned by any joined job.
	reasonTLS = "tls"
	// reasonCapacity: over MaxHandshakes or MaxHandshakesPerHost, closed
	// at accept.
	reasonCapacity = "capacity"
	// reasonTimeout: the handshake did not end within handshakeTimeout.
	reasonTimeout = "timeout"
)

// refusedWire is the one reason an acceptor ever sends.
const refusedWire = "refused"

// refusal is a handshake that failed for a reason worth counting.
type refusal struct {
	reason string
	err    error
}

func (r *refusal) Error() string { return fmt.Sprintf("dataplane: refused (%s): %v", r.reason, r.err) }
func (r *refusal) Unwrap() error { return r.err }

// errPeerRefused is wrapped when the other end refused the connection.
var errPeerRefused = errors.New("refused by peer")

func newNonce() []byte {
	n := make([]byte, nonceLen)
	if _, err := rand.Read(n); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return n
}

// proof is what prover sends to verifier on the connection whose nonces are
// nd (dialer's) and na (acceptor's).
func proof(secret, nd, na []byte, job, prover, verifier string) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write(nd)
	mac.Write(na)
	var b []byte
	b = appendStr(b, job)
	b = appendStr(b, prover)
	b = appendStr(b, verifier)
	mac.Write(b)
	return mac.Sum(nil)
}

// hello is the dialer's first frame.
type hello struct {
	job, from, to string
	nonce         []byte
}

func (h hello) payload() []byte {
	b := []byte{protocolVer}
	b = appendStr(b, h.job)
	b = appendStr(b, h.from)
	b = appendStr(b, h.to)
	return append(b, h.nonce...)
}

func parseHello(p []byte) (hello, error) {
	f := fields{b: p}
	ver := f.bytes(1)
	h := hello{job: f.str(maxID), from: f.str(maxID), to: f.str(maxID), nonce: f.bytes(nonceLen)}
	if err := f.end(); err != nil {
		return hello{}, err
	}
	if ver[0] != protocolVer {
		return hello{}, protoErr("protocol version %d, want %d", ver[0], protocolVer)
	}
	return h, nil
}

// writeFrame writes one frame straight to conn (handshake only: links
// write through their buffer).
func writeFrame(conn net.Conn, id uint32, typ uint8, payload []byte) error {
	_, err := conn.Write(appendFrame(nil, id, typ, payload))
	return err
}

// refuse tells the other end why the connection ends, best effort.
func refuse(conn net.Conn, reason string) {
	_ = writeFrame(conn, 0, typeRefuse, []byte(reason))
}

// expect reads the next handshake frame, which must be of type want; a
// refuse frame becomes an error wrapping errPeerRefused.
func expect(dec *decoder, want uint8) ([]byte, error) {
	h, p, err := dec.next()
	if err != nil {
		return nil, err
	}
	switch {
	case h.typ == want && h.id == 0:
		return p, nil
	case h.typ == typeRefuse:
		return nil, fmt.Errorf("%w: %s", errPeerRefused, printable(p))
	}
	return nil, protoErr("handshake frame type %#x, want %#x", h.typ, want)
}

// dialHandshake runs the dialer's side on conn for the link from self to
// peer of job.
func dialHandshake(conn net.Conn, dec *decoder, job, self, peer string, secret []byte) error {
	nd := newNonce()
	if err := writeFrame(conn, 0, typeHello, hello{job: job, from: self, to: peer, nonce: nd}.payload()); err != nil {
		return err
	}
	p, err := expect(dec, typeChallenge)
	if err != nil {
		return err
	}
	f := fields{b: p}
	na, got := f.bytes(nonceLen), f.bytes(proofLen)
	if err := f.end(); err != nil {
		return err
	}
	if !hmac.Equal(got, proof(secret, nd, na, job, peer, self)) {
		refuse(conn, refusedWire)
		return &refusal{reason: reasonBadSecret, err: fmt.Errorf("node %q did not prove the job's secret (it has not joined the job yet, or holds another secret)", peer)}
	}
	if err := writeFrame(conn, 0, typeProof, proof(secret, nd, na, job, self, peer)); err != nil {
		return err
	}
	_, err = expect(dec, typeAccept)
	return err
}

// acceptHandshake runs the acceptor's side on conn: lookup finds the mesh
// of the hello's job, fp is the fingerprint of the TLS client certificate,
// which must be the one pinned for the dialer's node when pinned. It
// returns the mesh and the dialer's node id, or a *refusal after telling
// the dialer, uniformly, that it is refused.
func acceptHandshake(conn net.Conn, dec *decoder, self, fp string, pinned bool, lookup func(job string) *mesh) (*mesh, string, error) {
	p, err := expect(dec, typeHello)
	if err != nil {
		return nil, "", &refusal{reason: reasonProtocol, err: err}
	}
	h, err := parseHello(p)
	if err != nil {
		refuse(conn, refusedWire)
		return nil, "", &refusal{reason: reasonProtocol, err: err}
	}
	// Why the connection will be refused, if it will: decided now, told
	// only after the dialer's proof, the same way for every reason.
	var why *refusal
	m := lookup(h.job)
	var pr *peer
	if m != nil {
		pr = m.peers[h.from]
	}
	switch {
	case m == nil:
		why = &refusal{reason: reasonUnknownJob, err: fmt.Errorf("job %q not joined", h.job)}
	case pr == nil || h.to != self || h.from == self:
		why = &refusal{reason: reasonUnknownNode, err: fmt.Errorf("node %q to %q is not a peer of job %q", h.from, h.to, h.job)}
	case pinned && pr.fp != fp:
		why = &refusal{reason: reasonUnknownNode, err: fmt.Errorf("node %q of job %q presented certificate %s, pinned %s", h.from, h.job, fp, pr.fp)}
	case !(h.from < self):
		why = &refusal{reason: reasonProtocol, err: fmt.Errorf("node %q dialed %q, which dials it", h.from, self)}
	}
	na := newNonce()
	var mine []byte
	if why == nil {
		mine = proof(m.secret, h.nonce, na, h.job, self, h.from)
	} else {
		mine = make([]byte, proofLen) // random: proves nothing
		_, _ = rand.Read(mine)
	}
	if err := writeFrame(conn, 0, typeChallenge, append(na, mine...)); err != nil {
		return nil, "", &refusal{reason: reasonProtocol, err: err}
	}
	got, err := expect(dec, typeProof)
	switch {
	case why != nil:
		if err == nil {
			refuse(conn, refusedWire)
		}
		return nil, "", why
	case errors.Is(err, errPeerRefused):
		// The dialer refused our proof: its secret differs.
		return nil, "", &refusal{reason: reasonBadSecret, err: err}
	case err != nil:
		return nil, "", &refusal{reason: reasonProtocol, err: err}
	}
	if !hmac.Equal(got, proof(m.secret, h.nonce, na, h.job, h.from, self)) {
		refuse(conn, refusedWire)
		return nil, "", &refusal{reason: reasonBadSecret, err: fmt.Errorf("node %q did not prove the secret of job %q", h.from, h.job)}
	}
	if err := writeFrame(conn, 0, typeAccept, nil); err != nil {
		return nil, "", &refusal{reason: reasonProtocol, err: err}
	}
	return m, h.from, nil
}

// printable bounds and cleans a peer-supplied reason for logs and errors.
func printable(p []byte) string {
	if len(p) > maxReason {
		p = p[:maxReason]
	}
	b := make([]byte, 0, len(p))
	for _, c := range p {
		if c < 0x20 || c > 0x7e {
			c = '?'
		}
		b = append(b, c)
	}
	return string(b)
}

// uint32Payload encodes n.
func uint32Payload(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
