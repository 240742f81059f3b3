package agent_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/flowplane/flowplane/internal/agent"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/httpapi/tlstest"
	"github.com/flowplane/flowplane/internal/hub"
	"github.com/flowplane/flowplane/internal/wire"
)

// TestMutualTLS: with SVC_HUB_CLIENT_CA the agent API requires a client
// certificate from that CA naming the node id. The Agent with its own
// certificate registers and converges; a certificate naming another node
// is refused 403 node_identity_mismatch, none at all (or one from another
// CA) 403 client_certificate_required;
// the operator API still answers without a client certificate.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	serverCA, pair := tlstest.Server(t, dir)
	clientCA := tlstest.NewCA(t, dir, "nodes")
	_, addr := serveHub(t, hub.Settings{Storage: filepath.Join(dir, "hub.db"), TLSCert: pair.CertFile, TLSKey: pair.KeyFile, ClientCA: clientCA.File})
	url := "https://" + addr
	mine := clientCA.IssueClient(t, filepath.Join(dir, "a.pem"), filepath.Join(dir, "a-key.pem"), hub.NodeCertificateURI("fleet.test", testNodeID))
	other := clientCA.IssueClient(t, filepath.Join(dir, "b.pem"), filepath.Join(dir, "b-key.pem"), hub.NodeCertificateURI("fleet.test", "node-b"))
	stranger := tlstest.NewCA(t, dir, "stranger").IssueClient(t, filepath.Join(dir, "s.pem"), filepath.Join(dir, "s-key.pem"), hub.NodeCertificateURI("fleet.test", testNodeID))

	client := func(p *tlstest.Pair) *http.Client {
		conf, err := httpapi.ClientTLS(serverCA.File)
		if err != nil {
			t.Fatal(err)
		}
		if p != nil {
			cert, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
			if err != nil {
				t.Fatal(err)
			}
			conf.Certificates = []tls.Certificate{cert}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: conf}}
	}
	register := func(c *http.Client) (int, string) {
		t.Helper()
		body, _ := json.Marshal(wire.RegisterRequest{NodeID: testNodeID, BootID: "raw", ProtocolVersion: wire.ProtocolVersion,
			Capabilities: []string{wire.CapabilityStreamControl}, NodeCredential: "raw-client-credential-0123456789abcdef"})
		req, _ := http.NewRequest("POST", url+"/api/v1/agent/register", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testNodeToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return -1, err.Error()
		}
		defer resp.Body.Close()
		var p wire.Problem
		_ = json.NewDecoder(resp.Body).Decode(&p)
		return resp.StatusCode, p.Code
	}
	if status, code := register(client(&other)); status != http.StatusForbidden || code != hub.CodeNodeIdentityMismatch {
		t.Errorf("a certificate naming node-b: %d %s, want 403 %s", status, code, hub.CodeNodeIdentityMismatch)
	}
	if status, code := register(client(nil)); status != http.StatusForbidden || code != hub.CodeClientCertificateRequired {
		t.Errorf("no certificate: %d %s, want 403 %s", status, code, hub.CodeClientCertificateRequired)
	}
	// Go's client sends no certificate the Hub's CA list does not name:
	// refused as none (a forced one would fail the handshake).
	if status, code := register(client(&stranger)); status != -1 && code != hub.CodeClientCertificateRequired {
		t.Errorf("a certificate from another CA: %d %s, want refused", status, code)
	}

	tn := startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{url}, streams: []string{"a"}, tune: func(o *agent.Options) {
		o.HubCAFile, o.HubClientCertFile, o.HubClientKeyFile = serverCA.File, mine.CertFile, mine.KeyFile
	}})
	eventually(t, "the Agent with its certificate to register", func() bool { return tn.agent.Status().Connected })

	// The operator API takes no client certificate.
	req, _ := http.NewRequest("GET", url+"/api/v1/nodes/"+testNodeID, nil)
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	var v hub.NodeView
	eventually(t, "the node online, read without a client certificate", func() bool {
		resp, err := client(nil).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&v) == nil && v.Status == "online"
	})
	tn.stop()
}
