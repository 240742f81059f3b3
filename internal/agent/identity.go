package agent

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
)

// credentialFileName is the node credential's file in StateDir/agent.
const credentialFileName = "node_credential"

// credentialBytes is the node credential's random length.
const credentialBytes = 32

// DefaultIdentityRetry is how often an Agent the Hub refused for its
// identity tries again: slowly, so that an operator's forget takes effect
// without a restart and the Hub is not hammered meanwhile.
const DefaultIdentityRetry = time.Minute

// codeNodeIdentityMismatch is the Hub's 403 for a node id bound to another
// credential (hub.CodeNodeIdentityMismatch).
const codeNodeIdentityMismatch = "node_identity_mismatch"

// nodeCredential returns the node credential kept in dir, creating it the
// first time: credentialBytes from crypto/rand, base64url, mode 0600. It is
// never rewritten: a lost file is a new identity, which the Hub refuses
// for a known node id until an operator forgets the node.
func nodeCredential(dir string) (string, error) {
	path := filepath.Join(dir, credentialFileName)
	if b, err := os.ReadFile(path); err == nil {
		cred := strings.TrimSpace(string(b))
		if len(cred) < credentialBytes {
			return "", fmt.Errorf("node credential %s: shorter than %d characters; restore it, or remove it and have the operator forget the node", path, credentialBytes)
		}
		return cred, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("node credential: %w", err)
	}
	raw := make([]byte, credentialBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("node credential: %w", err)
	}
	cred := base64.RawURLEncoding.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nodeCredential(dir) // another process made it meanwhile
	}
	if err != nil {
		return "", fmt.Errorf("node credential: %w", err)
	}
	_, werr := f.WriteString(cred + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("node credential: %w", err)
	}
	return cred, nil
}

// identityError is a registration the Hub refused with 403
// node_identity_mismatch. Its text is the fix an operator reads.
type identityError struct {
	nodeID  string
	message string // the Hub's
}

func (e *identityError) Error() string {
	return fmt.Sprintf("the Hub knows node %s with another credential: this node lost its state directory (its agent/%s), or another process uses its id; "+
		"an operator runs `flowplane ctl node forget %s`, and this node registers again within a minute (hub said: %s)",
		e.nodeID, credentialFileName, e.nodeID, e.message)
}

// withClientCertificate makes conf (nil: the system roots) present the
// client certificate in certFile and keyFile, reloaded when they change.
// Both empty leaves conf as it is.
func withClientCertificate(conf *tls.Config, certFile, keyFile string, log *slog.Logger) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		return conf, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("agent: health_check.hub_client_cert_file and hub_client_key_file go together")
	}
	r, err := httpapi.NewCertReloader(certFile, keyFile, log)
	if err != nil {
		return nil, fmt.Errorf("agent: health_check.hub_client_cert_file: %w", err)
	}
	if conf == nil {
		conf = &tls.Config{MinVersion: tls.VersionTLS12, CipherSuites: httpapi.CipherSuites()}
	}
	conf.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return r.GetCertificate(nil) }
	return conf, nil
}
