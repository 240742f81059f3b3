package node_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/httpapi/tlstest"
)

// TestNodeAPIOverTLS: with health_check.tls the control-plane server
// answers over HTTPS with that certificate, reloaded when the files are
// replaced; plain HTTP gets no API answer.
func TestNodeAPIOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca, first := tlstest.Server(t, dir)
	h := newHarness(t, doc(fmt.Sprintf(`health_check:
  enabled: true
  address: 127.0.0.1:0
  tls: {cert_file: %q, key_file: %q}
`, first.CertFile, first.KeyFile), genStream("a", "a")))
	if !strings.HasPrefix(h.base, "https://") {
		t.Fatalf("listener does not serve TLS: %s", h.base)
	}
	conf, err := httpapi.ClientTLS(ca.File)
	if err != nil {
		t.Fatal(err)
	}
	h.client.Transport.(*http.Transport).TLSClientConfig = conf
	h.client.Transport.(*http.Transport).DisableKeepAlives = true
	h.expect(t, 200, "GET", "/health", "")
	h.expect(t, 200, "GET", "/streams/a", "")

	serial := func() string {
		t.Helper()
		resp, err := h.client.Get(h.base + "/liveness")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
	if got := serial(); got != first.Cert.SerialNumber.String() {
		t.Errorf("served %s, want %s", got, first.Cert.SerialNumber)
	}
	second := ca.Issue(t, first.CertFile, first.KeyFile)
	if got := serial(); got != second.Cert.SerialNumber.String() {
		t.Errorf("after replacing the files served %s, want %s", got, second.Cert.SerialNumber)
	}

	// TLS 1.2 with AEAD suites only (Mozilla intermediate).
	tlstest.CheckAEADOnly(t, strings.TrimPrefix(h.base, "https://"), ca.File)

	resp, err := http.Get("http://" + strings.TrimPrefix(h.base, "https://") + "/health")
	if err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP got 200 from the TLS listener")
		}
	}

	// A pair that does not load fails Listen (start-up), naming the field.
	hopts := h.hopts
	broken := *hopts.HealthCheck.TLS
	broken.KeyFile = filepath.Join(dir, "missing.pem")
	hopts.HealthCheck.TLS = &broken
	if ln, err := h.n.Listen(hopts); err == nil || !strings.Contains(err.Error(), "health_check.tls") {
		t.Errorf("Listen with a missing key: %v, %v", ln, err)
	}
}
