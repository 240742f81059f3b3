package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/ctl"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/httpapi/tlstest"
	"github.com/flowplane/flowplane/internal/hub"
	"github.com/flowplane/flowplane/internal/wire"
)

// TestHubAgentTLS runs a real Hub and a real Hub-managed node as child
// processes, both serving HTTPS with certificates made by the test: the
// Agent verifies the Hub against health_check.hub_ca_file, registers and
// carries out a desired state; the Node API answers over HTTPS; replacing
// the Hub's certificate files changes the certificate a new connection
// sees, with no restart.
func TestHubAgentTLS(t *testing.T) {
	dir := t.TempDir()
	ca, hubPair := tlstest.Server(t, dir)
	nodePair := ca.Issue(t, filepath.Join(dir, "node-cert.pem"), filepath.Join(dir, "node-key.pem"))
	conf, err := httpapi.ClientTLS(ca.File)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: conf, DisableKeepAlives: true}}
	const opToken, nodeToken = "operator-token-for-the-tls-test", "node-token-for-the-tls-test"

	hubAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	hubURL := "https://" + hubAddr
	startProcessFor(t, t, "hub", []string{hub.EnvAddress + "=" + hubAddr, hub.EnvStorage + "=" + filepath.Join(dir, "hub.db"),
		hub.EnvOperatorToken + "=" + opToken, hub.EnvNodeToken + "=" + nodeToken,
		hub.EnvTLSCert + "=" + hubPair.CertFile, hub.EnvTLSKey + "=" + hubPair.KeyFile}, "hub")

	// get answers the status and body of an HTTPS GET (0 when no answer).
	get := func(url, token string) (int, []byte, string) {
		req, err := http.NewRequest("GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.TLS == nil {
			t.Fatalf("%s answered without TLS", url)
		}
		return resp.StatusCode, b, resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
	waitUntil(t, "the Hub to be ready over HTTPS", func() bool {
		code, _, _ := get(hubURL+"/readiness", "")
		return code == http.StatusOK
	})

	nodeAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	nodeConf := filepath.Join(dir, "node.yaml")
	doc := fmt.Sprintf(`logging: {level: info}
health_check:
  address: %q
  tls: {cert_file: %q, key_file: %q}
  hub_urls: [%q]
  hub_ca_file: %q
  node_id: tls-node
  node_token: "${env:SVC_NODE_TOKEN}"
streams:
  - id: s
    input: {type: generate, context: '{"n": 1}', interval: 50ms}
    pipeline: {processors: []}
    output: {type: drop}
`, nodeAddr, nodePair.CertFile, nodePair.KeyFile, hubURL, ca.File)
	if err := os.WriteFile(nodeConf, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	startProcessFor(t, t, "node", []string{hub.EnvNodeToken + "=" + nodeToken}, "--config", nodeConf, "--state-dir", filepath.Join(dir, "node"))

	waitUntil(t, "the node to register with the Hub over HTTPS", func() bool {
		code, b, _ := get(hubURL+"/api/v1/nodes/tls-node", opToken)
		return code == http.StatusOK && strings.Contains(string(b), `"status":"online"`)
	})
	req, err := http.NewRequest("PUT", hubURL+"/api/v1/nodes/tls-node/streams/s/desired-state", strings.NewReader(`{"state":"stopped","config_version":"v1"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+opToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var w wire.DesiredStateResponse
	if err := json.NewDecoder(resp.Body).Decode(&w); err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("desired-state: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	waitUntil(t, "stream s stopped in_sync", func() bool {
		code, b, _ := get(hubURL+"/api/v1/nodes/tls-node/streams/s", opToken)
		var v wire.Stream
		return code == http.StatusOK && json.Unmarshal(b, &v) == nil &&
			v.Convergence == wire.ConvergenceInSync && v.Observed.State == "stopped" && v.Observed.Generation == w.Generation
	})

	// flowplane ctl verifies the Hub against the context's CA file, and
	// refuses it without.
	ctlEnv := map[string]string{"XDG_CONFIG_HOME": filepath.Join(dir, "config"), "OP_TOKEN": opToken}
	ctlRun := func(args ...string) (int, string) {
		var out bytes.Buffer
		code := ctl.Main(context.Background(), append([]string{"ctl"}, args...), ctl.Env{Stdout: &out, Stderr: &out, Getenv: func(k string) string { return ctlEnv[k] }})
		return code, out.String()
	}
	if code, out := ctlRun("login", "--hub", hubURL, "--name", "tls", "--token-env", "OP_TOKEN"); code != 1 || !strings.Contains(out, "certificate") {
		t.Errorf("ctl login without the CA: exit %d: %s", code, out)
	}
	if code, out := ctlRun("login", "--hub", hubURL, "--name", "tls", "--token-env", "OP_TOKEN", "--ca-file", ca.File); code != 0 {
		t.Fatalf("ctl login with the CA: exit %d: %s", code, out)
	}
	if code, out := ctlRun("get", "streams"); code != 0 || !regexp.MustCompile(`(?m)^tls-node\s+s\s+stopped\s+stopped\s+in_sync`).MatchString(out) {
		t.Errorf("ctl get streams over HTTPS: exit %d:\n%s", code, out)
	}

	// The Node API answers over HTTPS with the node's certificate.
	code, b, serial := get("https://"+nodeAddr+"/streams/s", "")
	if code != http.StatusOK || !strings.Contains(string(b), `"stopped"`) || serial != nodePair.Cert.SerialNumber.String() {
		t.Errorf("node API: %d %s, certificate %s", code, b, serial)
	}

	// Renewal: new files, same paths; the next connection gets them.
	if _, _, serial := get(hubURL+"/liveness", ""); serial != hubPair.Cert.SerialNumber.String() {
		t.Fatalf("hub certificate %s, want %s", serial, hubPair.Cert.SerialNumber)
	}
	renewed := ca.Issue(t, hubPair.CertFile, hubPair.KeyFile)
	if _, _, serial := get(hubURL+"/liveness", ""); serial != renewed.Cert.SerialNumber.String() {
		t.Errorf("after renewal the hub served %s, want %s", serial, renewed.Cert.SerialNumber)
	}
	// The Agent keeps working across the renewal (new connections verify
	// the new certificate against the same CA).
	waitUntil(t, "the node still online after the renewal", func() bool {
		code, b, _ := get(hubURL+"/api/v1/nodes/tls-node", opToken)
		return code == http.StatusOK && strings.Contains(string(b), `"status":"online"`)
	})
}
