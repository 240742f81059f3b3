package input

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/httpapi/tlstest"
)

// TestHTTPTLS: with tls the input answers over HTTPS with that
// certificate, and a new connection after the files were replaced sees the
// new one.
func TestHTTPTLS(t *testing.T) {
	dir := t.TempDir()
	ca, first := tlstest.Server(t, dir)
	in := startHTTP(t, map[string]any{"path": "/in", "tls": map[string]any{"cert_file": first.CertFile, "key_file": first.KeyFile}})
	conf, err := httpapi.ClientTLS(ca.File)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: conf, DisableKeepAlives: true}}
	url := "https://" + in.Addr().String() + "/in"
	post := func() string {
		t.Helper()
		done := make(chan *http.Response, 1)
		go func() {
			resp, err := c.Post(url, "text/plain", strings.NewReader("hello"))
			if err != nil {
				t.Error(err)
			}
			done <- resp
		}()
		b, ack, err := in.Read(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if got := payloadsOf(t, b); len(got) != 1 || got[0] != "hello" {
			t.Errorf("payloads %q", got)
		}
		_ = ack(testCtx(t), nil)
		resp := <-done
		if resp == nil {
			t.FailNow()
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.TLS == nil {
			t.Fatalf("status %d, tls %v", resp.StatusCode, resp.TLS != nil)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
	if got := post(); got != first.Cert.SerialNumber.String() {
		t.Errorf("served %s, want %s", got, first.Cert.SerialNumber)
	}
	second := ca.Issue(t, first.CertFile, first.KeyFile)
	if got := post(); got != second.Cert.SerialNumber.String() {
		t.Errorf("after replacing the files served %s, want %s", got, second.Cert.SerialNumber)
	}
}

func TestHTTPTLSConfigErrors(t *testing.T) {
	dir := t.TempDir()
	_, pair := tlstest.Server(t, dir)
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("no"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec, _ := component.Default.Lookup(component.KindInput, "http")
	for name, tt := range map[string]struct {
		tls         map[string]any
		schemaCatch bool
	}{
		"cert without key": {map[string]any{"cert_file": pair.CertFile}, true},
		"key without cert": {map[string]any{"key_file": pair.KeyFile}, true},
		"missing key file": {map[string]any{"cert_file": pair.CertFile, "key_file": filepath.Join(dir, "nope.pem")}, false},
		"not a cert":       {map[string]any{"cert_file": garbage, "key_file": pair.KeyFile}, false},
	} {
		t.Run(name, func(t *testing.T) {
			conf := map[string]any{"tls": tt.tls}
			_, err := component.Default.NewInput("http", conf, component.Resources{})
			if err == nil || !strings.Contains(err.Error(), "tls") {
				t.Errorf("err = %v, want a tls error", err)
			}
			if got := componenttest.Validate(spec, conf) != nil; got != tt.schemaCatch {
				t.Errorf("schema rejects: %v, want %v", got, tt.schemaCatch)
			}
		})
	}
}
