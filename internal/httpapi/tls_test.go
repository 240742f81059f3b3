package httpapi_test

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/httpapi/tlstest"
)

// serveTLS serves a handler answering 200 over TLS on loopback with the
// pair in certFile and keyFile, until the test ends.
func serveTLS(t *testing.T, certFile, keyFile string) string {
	t.Helper()
	conf, err := httpapi.ServerTLS(certFile, keyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), TLSConfig: conf}
	done := make(chan error, 1)
	go func() { done <- httpapi.Serve(srv, ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return "https://" + ln.Addr().String() + "/"
}

// client trusts caFile and opens a new connection for every request.
func client(t *testing.T, caFile string) *http.Client {
	t.Helper()
	conf, err := httpapi.ClientTLS(caFile)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: conf, DisableKeepAlives: true}}
}

func peerSerial(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 {
		t.Fatal("the answer did not come over TLS")
	}
	return resp.TLS.PeerCertificates[0].SerialNumber.String()
}

func TestServerTLSVerifiedByCA(t *testing.T) {
	dir := t.TempDir()
	ca, pair := tlstest.Server(t, dir)
	url := serveTLS(t, pair.CertFile, pair.KeyFile)
	if got := peerSerial(t, client(t, ca.File), url); got != pair.Cert.SerialNumber.String() {
		t.Errorf("served certificate %s, want %s", got, pair.Cert.SerialNumber)
	}
	// Without the CA (system roots) the certificate is refused.
	_, err := client(t, "").Get(url)
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client without the CA: err = %v, want a certificate verification error", err)
	}
	// Another CA is refused too.
	other := tlstest.NewCA(t, dir, "other")
	if _, err := client(t, other.File).Get(url); err == nil {
		t.Error("a client trusting another CA connected")
	}
	// Plain HTTP to a TLS listener does not get an answer from the API.
	resp, err := http.Get("http" + strings.TrimPrefix(url, "https"))
	if err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP got 200 from the TLS listener")
		}
	}
}

func TestServerTLSReloadsReplacedFiles(t *testing.T) {
	dir := t.TempDir()
	ca, first := tlstest.Server(t, dir)
	url := serveTLS(t, first.CertFile, first.KeyFile)
	c := client(t, ca.File)
	if got := peerSerial(t, c, url); got != first.Cert.SerialNumber.String() {
		t.Fatalf("served %s, want the first certificate %s", got, first.Cert.SerialNumber)
	}
	second := ca.Issue(t, first.CertFile, first.KeyFile)
	if got := peerSerial(t, c, url); got != second.Cert.SerialNumber.String() {
		t.Fatalf("after replacing the files served %s, want the new certificate %s", got, second.Cert.SerialNumber)
	}

	// A pair that does not load leaves the previous one in service...
	if err := os.WriteFile(first.CertFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := peerSerial(t, c, url); got != second.Cert.SerialNumber.String() {
		t.Errorf("with a broken certificate file served %s, want the previous %s", got, second.Cert.SerialNumber)
	}
	// ...until a good one replaces it.
	third := ca.Issue(t, first.CertFile, first.KeyFile)
	if got := peerSerial(t, c, url); got != third.Cert.SerialNumber.String() {
		t.Errorf("after repairing the files served %s, want %s", got, third.Cert.SerialNumber)
	}
}

func TestServerTLSErrors(t *testing.T) {
	dir := t.TempDir()
	_, pair := tlstest.Server(t, dir)
	if conf, err := httpapi.ServerTLS("", "", nil); conf != nil || err != nil {
		t.Errorf("no files: got %v, %v; want no TLS and no error", conf, err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for name, files := range map[string][2]string{
		"cert only":     {pair.CertFile, ""},
		"key only":      {"", pair.KeyFile},
		"missing cert":  {missing, pair.KeyFile},
		"missing key":   {pair.CertFile, missing},
		"swapped files": {pair.KeyFile, pair.CertFile},
	} {
		if _, err := httpapi.ServerTLS(files[0], files[1], nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := httpapi.ClientTLS(pair.KeyFile); err == nil {
		t.Error("ClientTLS of a key file: no error")
	}
	if _, err := httpapi.ClientTLS(missing); err == nil {
		t.Error("ClientTLS of a missing file: no error")
	}
	conf, err := httpapi.ClientTLS(pair.CertFile)
	if err != nil || conf.MinVersion != tls.VersionTLS12 {
		t.Errorf("ClientTLS: %v, %v", conf, err)
	}
}
