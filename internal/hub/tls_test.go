package hub

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/httpapi/tlstest"
)

// TestServeTLSReloadsCertificate: the Hub serves HTTPS with the pair named
// by its settings, and a new connection after the files were replaced gets
// the new certificate without a restart.
func TestServeTLSReloadsCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, first := tlstest.Server(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	h, err := New(ctx, Options{Settings: Settings{Address: "127.0.0.1:0", OperatorToken: "operator-token-0123456789",
		NodeToken: "node-token-0123456789", TLSCert: first.CertFile, TLSKey: first.KeyFile}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		_ = h.Close()
	})
	conf, err := httpapi.ClientTLS(ca.File)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: conf, DisableKeepAlives: true}}
	serial := func() string {
		t.Helper()
		resp, err := c.Get("https://" + ln.Addr().String() + "/liveness")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.TLS == nil {
			t.Fatalf("liveness: %d, tls %v", resp.StatusCode, resp.TLS != nil)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
	if got := serial(); got != first.Cert.SerialNumber.String() {
		t.Fatalf("served %s, want %s", got, first.Cert.SerialNumber)
	}
	second := ca.Issue(t, first.CertFile, first.KeyFile)
	if got := serial(); got != second.Cert.SerialNumber.String() {
		t.Errorf("after replacing the files served %s, want %s", got, second.Cert.SerialNumber)
	}
	// TLS 1.2 with AEAD suites only (Mozilla intermediate).
	tlstest.CheckAEADOnly(t, ln.Addr().String(), ca.File)
}

func TestNewRefusesUnloadableTLS(t *testing.T) {
	dir := t.TempDir()
	_, pair := tlstest.Server(t, dir)
	_, err := New(context.Background(), Options{Settings: Settings{TLSCert: pair.CertFile, TLSKey: filepath.Join(dir, "missing.pem")},
		Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "tls key") {
		t.Errorf("err = %v, want a tls key error", err)
	}
}
