package httpapi

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// CertReloader serves a PEM certificate chain and private key from files,
// loading them again when either file changes (a renewal tool replacing
// them, in place or by rename). The files are checked at each TLS
// handshake, so a new connection sees a replaced pair at once; connections
// already open keep the certificate they were made with. A pair that does
// not load (say the certificate is written and the key not yet) is logged
// and the previous one stays in use until the files change again.
type CertReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu    sync.Mutex // guards cert and stamp
	cert  *tls.Certificate
	stamp [2]fileStamp // of certFile, keyFile when cert was last tried
}

// fileStamp identifies one version of a file.
type fileStamp struct {
	info    os.FileInfo
	modTime time.Time
	size    int64
}

func (a fileStamp) same(b fileStamp) bool {
	return a.info != nil && b.info != nil && os.SameFile(a.info, b.info) &&
		a.modTime.Equal(b.modTime) && a.size == b.size
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{info: fi, modTime: fi.ModTime(), size: fi.Size()}, nil
}

// NewCertReloader loads the pair once; an error names what failed to load
// (never the key's content). log receives reload failures; nil means
// slog.Default().
func NewCertReloader(certFile, keyFile string, log *slog.Logger) (*CertReloader, error) {
	if log == nil {
		log = slog.Default()
	}
	r := &CertReloader{certFile: certFile, keyFile: keyFile, log: log}
	cs, err := stampOf(certFile)
	if err != nil {
		return nil, fmt.Errorf("tls certificate: %w", err)
	}
	ks, err := stampOf(keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls key: %w", err)
	}
	cert, err := loadPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	r.cert, r.stamp = cert, [2]fileStamp{cs, ks}
	return r, nil
}

func loadPair(certFile, keyFile string) (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls certificate %s and key %s: %w", certFile, keyFile, err)
	}
	return &cert, nil
}

// GetCertificate is a tls.Config.GetCertificate: the current pair, reloaded
// first when a file changed since it was last loaded.
func (r *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs, cerr := stampOf(r.certFile)
	ks, kerr := stampOf(r.keyFile)
	if cerr != nil || kerr != nil {
		// Mid-replacement, or removed: keep serving the pair we have.
		return r.cert, nil
	}
	if cs.same(r.stamp[0]) && ks.same(r.stamp[1]) {
		return r.cert, nil
	}
	r.stamp = [2]fileStamp{cs, ks}
	cert, err := loadPair(r.certFile, r.keyFile)
	if err != nil {
		r.log.Warn("tls: the changed certificate files do not load; still serving the previous certificate", "err", err)
		return r.cert, nil
	}
	r.cert = cert
	r.log.Info("tls: certificate reloaded", "cert_file", r.certFile)
	return r.cert, nil
}

// ServerTLS is the tls.Config of a server whose certificate comes from
// certFile and keyFile and is reloaded when they change. Both empty means
// no TLS: it returns nil. One without the other is an error.
func ServerTLS(certFile, keyFile string, log *slog.Logger) (*tls.Config, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case certFile == "" || keyFile == "":
		return nil, errors.New("tls: a certificate file and a key file go together")
	}
	r, err := NewCertReloader(certFile, keyFile, log)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, CipherSuites: CipherSuites(), GetCertificate: r.GetCertificate}, nil
}

// CipherSuites are the TLS 1.2 suites flowplane speaks, as a server and as
// a client: Mozilla's "intermediate" profile, ECDHE key exchange with
// AES-GCM or ChaCha20-Poly1305 only (Go has no DHE). Go's defaults also
// accept CBC suites, which the profile excludes. TLS 1.3 suites are all
// AEAD and not configurable.
func CipherSuites() []uint16 {
	return []uint16{
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
		tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	}
}

// Serve serves srv on ln, over TLS when srv.TLSConfig is set (HTTP/2 is
// negotiated as with ListenAndServeTLS).
func Serve(srv *http.Server, ln net.Listener) error {
	if srv.TLSConfig != nil {
		return srv.ServeTLS(ln, "", "")
	}
	return srv.Serve(ln)
}

// ClientTLS is the tls.Config of a client that verifies servers against
// the PEM certificates in caFile instead of the system roots. An empty
// caFile means the system roots: it returns nil.
func ClientTLS(caFile string) (*tls.Config, error) {
	if caFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tls ca file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("tls ca file %s: no PEM certificate in it", caFile)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, CipherSuites: CipherSuites(), RootCAs: pool}, nil
}
