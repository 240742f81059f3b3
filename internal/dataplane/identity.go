package dataplane

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// IdentityFile is the file, in a node's state directory, that holds its
// data-plane key and self-signed certificate (PEM, mode 0600).
const IdentityFile = "dataplane.pem"

// fingerprintPrefix starts every fingerprint: the hash is named, so another
// can follow without ambiguity.
const fingerprintPrefix = "sha256:"

// Identity is a node's data-plane key pair: an Ed25519 key and a
// self-signed certificate for it. Peers pin the certificate's SHA-256
// (Fingerprint); no CA is involved.
type Identity struct {
	cert tls.Certificate
	fp   string
}

// Fingerprint is the identity's certificate fingerprint,
// "sha256:<64 lowercase hex digits>", as the node advertises it.
func (id *Identity) Fingerprint() string { return id.fp }

// FingerprintOf is the fingerprint of a DER certificate.
func FingerprintOf(der []byte) string {
	sum := sha256.Sum256(der)
	return fingerprintPrefix + hex.EncodeToString(sum[:])
}

// ValidFingerprint reports whether s is a fingerprint as FingerprintOf
// writes it.
func ValidFingerprint(s string) bool {
	h, ok := strings.CutPrefix(s, fingerprintPrefix)
	if !ok || len(h) != 2*sha256.Size {
		return false
	}
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// NewIdentity makes an identity that lives as long as the process (tests,
// and nodes without a state directory).
func NewIdentity() (*Identity, error) {
	key, der, err := newKeyPair()
	if err != nil {
		return nil, err
	}
	return identityOf(der, key)
}

// newKeyPair is a new key and its self-signed certificate (DER).
func newKeyPair() (ed25519.PrivateKey, []byte, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := selfSign(key)
	return key, der, err
}

// LoadIdentity reads dir/IdentityFile, creating it (0600) with a new key
// pair when it does not exist: the node keeps one identity across
// restarts, and its peers' pins stay valid.
func LoadIdentity(dir string) (*Identity, error) {
	path := filepath.Join(dir, IdentityFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createIdentity(path)
	}
	if err != nil {
		return nil, fmt.Errorf("data-plane identity: %w", err)
	}
	id, err := parseIdentity(b)
	if err != nil {
		return nil, fmt.Errorf("data-plane identity %s: %w (remove it to make a new key; the Hub learns the new fingerprint at the next registration, and split jobs need a move)", path, err)
	}
	return id, nil
}

func createIdentity(path string) (*Identity, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("data-plane identity: %w", err)
	}
	key, der, err := newKeyPair()
	if err != nil {
		return nil, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	// Written aside and renamed: a partial file is never read as a key.
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data-plane identity: %w", err)
	}
	_, werr := f.Write(b)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("data-plane identity: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("data-plane identity: %w", err)
	}
	return identityOf(der, key)
}

// selfSign is a certificate for key, signed by itself. Its names and dates
// matter to nobody: peers pin its hash and check no chain.
func selfSign(key ed25519.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "flowplane data plane"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(100, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	return x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
}

func parseIdentity(b []byte) (*Identity, error) {
	var key ed25519.PrivateKey
	var der []byte
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		switch blk.Type {
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
			if err != nil {
				return nil, err
			}
			ek, ok := k.(ed25519.PrivateKey)
			if !ok {
				return nil, errors.New("the key is not Ed25519")
			}
			key = ek
		case "CERTIFICATE":
			der = blk.Bytes
		}
	}
	if key == nil || der == nil {
		return nil, errors.New("want a PRIVATE KEY and a CERTIFICATE block")
	}
	return identityOf(der, key)
}

// identityOf checks that der certifies key.
func identityOf(der []byte, key ed25519.PrivateKey) (*Identity, error) {
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pub, ok := c.PublicKey.(ed25519.PublicKey)
	if !ok || !pub.Equal(key.Public()) {
		return nil, errors.New("the certificate is not the key's")
	}
	return &Identity{cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: c}, fp: FingerprintOf(der)}, nil
}
