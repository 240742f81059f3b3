package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA certificate as a PEM file (what a client trusts).
	File string
}

// Pair is a server certificate and key, as PEM files.
type Pair struct {
	Cert     *x509.Certificate
	CertFile string
	KeyFile  string
}

// NewCA makes a CA and writes its certificate to dir/<name>-ca.pem.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name + " test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, name+"-ca.pem")
	writePEM(t, file, "CERTIFICATE", der)
	return &CA{Cert: cert, key: key, File: file}
}

// Issue makes a server certificate for 127.0.0.1, ::1 and localhost signed
// by ca, and writes it to certFile and keyFile (replacing what is there,
// by rename, as renewal tools do).
func (ca *CA) Issue(t testing.TB, certFile, keyFile string) Pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	return ca.sign(t, tmpl, key, certFile, keyFile)
}

// IssueClient makes a client certificate (client auth) signed by ca with
// the given URI SANs, and writes it to certFile and keyFile.
func (ca *CA) IssueClient(t testing.TB, certFile, keyFile string, uris ...string) Pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: "client"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, u := range uris {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	return ca.sign(t, tmpl, key, certFile, keyFile)
}

// sign signs tmpl for key with ca and writes the pair to certFile and
// keyFile.
func (ca *CA) sign(t testing.TB, tmpl *x509.Certificate, key *ecdsa.PrivateKey, certFile, keyFile string) Pair {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyFile, "PRIVATE KEY", kder)
	writePEM(t, certFile, "CERTIFICATE", der)
	return Pair{Cert: cert, CertFile: certFile, KeyFile: keyFile}
}

// Server makes a CA and a server pair in dir (ca.pem, cert.pem, key.pem).
func Server(t testing.TB, dir string) (*CA, Pair) {
	t.Helper()
	ca := NewCA(t, dir, "server")
	return ca, ca.Issue(t, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// CheckAEADOnly checks the TLS server at addr as Mozilla's intermediate
// profile wants it: a TLS 1.2 client offering only CBC suites is refused,
// one offering an AES-GCM or a ChaCha20-Poly1305 suite gets through, and
// TLS 1.3 works. caFile is the CA the server's certificate chains to.
func CheckAEADOnly(t testing.TB, addr, caFile string) {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", caFile)
	}
	dial := func(version uint16, suites ...uint16) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
			&tls.Config{RootCAs: pool, MinVersion: version, MaxVersion: version, CipherSuites: suites})
		if err == nil {
			c.Close()
		}
		return err
	}
	for _, s := range tls.InsecureCipherSuites() {
		if err := dial(tls.VersionTLS12, s.ID); err == nil {
			t.Errorf("TLS 1.2 handshake with %s succeeded", s.Name)
		}
	}
	for _, s := range []uint16{
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA,
		tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA,
	} {
		if err := dial(tls.VersionTLS12, s); err == nil {
			t.Errorf("TLS 1.2 handshake with CBC suite %s succeeded", tls.CipherSuiteName(s))
		}
	}
	for _, s := range []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256} {
		if err := dial(tls.VersionTLS12, s); err != nil {
			t.Errorf("TLS 1.2 handshake with %s: %v", tls.CipherSuiteName(s), err)
		}
	}
	if err := dial(tls.VersionTLS13); err != nil {
		t.Errorf("TLS 1.3 handshake: %v", err)
	}
}
