package agent_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/agent"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/httpapi/tlstest"
	"github.com/flowplane/flowplane/internal/hub"
	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/wire"
)

// startTLSHub serves internal/hub over HTTPS on loopback with a pair from
// a CA made for the test; it returns the https:// URL and the CA file.
func startTLSHub(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	ca, pair := tlstest.Server(t, dir)
	_, addr := serveHub(t, hub.Settings{Storage: filepath.Join(dir, "hub.db"), TLSCert: pair.CertFile, TLSKey: pair.KeyFile})
	return "https://" + addr, ca.File
}

// TestTLSRoundTrip: an Agent given the Hub's CA registers over HTTPS, and a
// desired state written through the operator API (HTTPS too) converges on
// the node. An Agent without the CA does not connect, and says why.
func TestTLSRoundTrip(t *testing.T) {
	url, caFile := startTLSHub(t)
	tn := startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{url}, streams: []string{"a"},
		tune: func(o *agent.Options) { o.HubCAFile = caFile }})

	conf, err := httpapi.ClientTLS(caFile)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: conf}}
	operator := func(method, path, body string, out any) int {
		req, err := http.NewRequest(method, url+"/api/v1"+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.TLS == nil {
			t.Fatal("operator answer not over TLS")
		}
		if out != nil && resp.StatusCode/100 == 2 {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode
	}
	var w wire.DesiredStateResponse
	eventually(t, "the node registered over HTTPS", func() bool {
		return operator("GET", "/nodes/"+testNodeID, "", nil) == http.StatusOK
	})
	if code := operator("PUT", "/nodes/"+testNodeID+"/streams/a/desired-state", `{"state":"stopped","config_version":"v1"}`, &w); code != http.StatusAccepted {
		t.Fatalf("desired-state: %d", code)
	}
	eventually(t, "stream a stopped in_sync over HTTPS", func() bool {
		var v wire.Stream
		return operator("GET", "/nodes/"+testNodeID+"/streams/a", "", &v) == http.StatusOK && inSync(w.Generation, "stopped")(v)
	})
	if s := tn.stream(t, "a"); s.Observed.State != "stopped" {
		t.Errorf("node view of a: %s", s.Observed.State)
	}
	if st := tn.agent.Status(); !st.Connected || st.HubURL != url {
		t.Errorf("agent status %+v", st)
	}

	// The system roots do not know the test CA: no registration.
	other := startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{url}, streams: []string{"a"}})
	eventually(t, "an Agent without the CA to report a certificate error", func() bool {
		st := other.agent.Status()
		return !st.Connected && strings.Contains(st.LastError, "certificate")
	})
}

func TestHubCAFileErrors(t *testing.T) {
	dir := t.TempDir()
	_, pair := tlstest.Server(t, dir)
	for name, file := range map[string]string{"missing": filepath.Join(dir, "nope.pem"), "not PEM": pair.KeyFile} {
		_, err := agent.New(agent.Options{HubURLs: []string{"https://127.0.0.1:1"}, NodeToken: testNodeToken, NodeID: testNodeID,
			BootID: "b", StateDir: t.TempDir(), Node: fakeNodeForNew{}, HubCAFile: file})
		if err == nil || !strings.Contains(err.Error(), "hub_ca_file") {
			t.Errorf("%s: err = %v, want a hub_ca_file error", name, err)
		}
	}
}

// TestPlainHubURLBeyondLoopbackWarns: http:// to another host is warned
// about at start-up; loopback and https:// are not.
func TestPlainHubURLBeyondLoopbackWarns(t *testing.T) {
	for _, tt := range []struct {
		url  string
		warn bool
	}{
		{"http://10.0.0.7:8090", true},
		{"http://hub.example.com:8090/api/v1", true},
		{"http://user:pw@hub.example.com", true},
		{"http://127.0.0.1:8090", false},
		{"http://[::1]:8090", false},
		{"http://localhost:8090", false},
		{"https://hub.example.com", false},
	} {
		logs := &syncBuffer{}
		_, err := agent.New(agent.Options{HubURLs: []string{tt.url}, NodeToken: testNodeToken, NodeID: testNodeID,
			BootID: "b", StateDir: t.TempDir(), Node: fakeNodeForNew{}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "plain http://")
		if got != tt.warn {
			t.Errorf("%s: warned %v, want %v; logs:\n%s", tt.url, got, tt.warn, logs)
		}
		if strings.Contains(logs.String(), "pw@") {
			t.Errorf("%s: the warning shows the password: %s", tt.url, logs)
		}
	}
}

// fakeNodeForNew is enough of a node for agent.New; the Agent is not run.
type fakeNodeForNew struct{}

func (fakeNodeForNew) System() node.System    { return node.System{} }
func (fakeNodeForNew) Streams() []wire.Stream { return nil }
func (fakeNodeForNew) ConfigVersion() string  { return "v1" }
func (fakeNodeForNew) StreamAction(string, string, node.Request) (wire.Operation, wire.StreamDesired, error) {
	return wire.Operation{}, wire.StreamDesired{}, nil
}
func (fakeNodeForNew) WaitOperation(context.Context, string) (wire.Operation, error) {
	return wire.Operation{}, nil
}
func (fakeNodeForNew) AdoptHubDesire(string, string, int64, string) error { return nil }
func (fakeNodeForNew) ValidateHub(node.Document, map[string]string) (node.Report, error) {
	return node.Report{}, nil
}
func (fakeNodeForNew) ApplyHub(context.Context, node.Document, map[string]string, string, node.Request) (wire.ConfigApplyResult, error) {
	return wire.ConfigApplyResult{}, nil
}
func (fakeNodeForNew) ReapplyVersion(context.Context, string, node.Request) (wire.ConfigApplyResult, error) {
	return wire.ConfigApplyResult{}, nil
}
func (fakeNodeForNew) DiffTexts(wire.ConfigDiffSide, wire.ConfigDiffSide) (node.DiffReport, error) {
	return node.DiffReport{}, nil
}
