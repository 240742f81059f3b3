package dataplane

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
)

// errUntrusted fails a TLS handshake whose peer certificate is not pinned.
var errUntrusted = errors.New("certificate not pinned by any joined job")

// serverTLS is the listener's TLS: TLS 1.3 only, a client certificate
// required, and its fingerprint one that trusted reports pinned (a peer of
// some joined job). Which job the client may speak for is checked by the
// handshake inside, against the fingerprint of the node it claims to be.
func serverTLS(id *Identity, trusted func(fp string) bool) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{id.cert},
		ClientAuth:   tls.RequireAnyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !trusted(FingerprintOf(cs.PeerCertificates[0].Raw)) {
				return errUntrusted
			}
			return nil
		},
	}
}

// clientTLS is a dialer's TLS to the peer whose certificate fingerprint is
// pin. No chain is verified (there is no CA): the handshake proves the
// peer holds the key of the certificate it presents, and the pin names the
// certificate.
func clientTLS(id *Identity, pin string) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // replaced by the pin below
		ServerName:         "flowplane-dataplane",
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &id.cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no server certificate")
			}
			if got := FingerprintOf(cs.PeerCertificates[0].Raw); got != pin {
				return fmt.Errorf("server certificate %s, pinned %s", got, pin)
			}
			return nil
		},
	}
}

// peerFingerprint is the fingerprint of conn's peer certificate; "" for a
// plain connection.
func peerFingerprint(conn net.Conn) string {
	tc, ok := conn.(*tls.Conn)
	if !ok {
		return ""
	}
	cs := tc.ConnectionState()
	if len(cs.PeerCertificates) == 0 {
		return ""
	}
	return FingerprintOf(cs.PeerCertificates[0].Raw)
}

// isTLSAlert reports whether err is an alert the peer sent: after the
// client's half of a TLS 1.3 handshake, the server's verdict on the client
// certificate arrives as one at the first read.
func isTLSAlert(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "remote error"
}
