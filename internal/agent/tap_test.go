package agent_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/access"
	"github.com/flowplane/flowplane/internal/hub"
	"github.com/flowplane/flowplane/internal/wire"
)

// tapGet opens a tap on the Hub with token and reads it to its end.
func tapGet(t *testing.T, hubURL, path, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", hubURL+"/api/v1"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestRealHubTap taps a node's stream through the Hub: the operator gets
// the sampled messages and the end as server-sent events, relayed from the
// Agent; a viewer and the node token are refused and get no data; the tap
// and the refusal are audited.
func TestRealHubTap(t *testing.T) {
	viewer, sum, err := access.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(access.NamedToken{Name: "dash", Role: access.Viewer, SHA256: sum}.Line()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, addr := serveHub(t, hub.Settings{Storage: filepath.Join(t.TempDir(), "hub.db"), TokensFile: tokens})
	rh := &realHub{url: "http://" + addr}
	startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{rh.url}, streams: []string{"a"}})
	rh.waitStream(t, "a", "observed running", func(v wire.Stream) bool { return v.Observed.State == "running" })
	var node struct {
		Capabilities []string `json:"capabilities"`
	}
	rh.operator(t, "GET", "/nodes/"+testNodeID, "", &node)
	if !strings.Contains(strings.Join(node.Capabilities, ","), wire.CapabilityTap) {
		t.Fatalf("capabilities %v lack tap", node.Capabilities)
	}
	path := "/nodes/" + testNodeID + "/streams/a/tap?stage=input&rate=20&duration=2s"

	// Refused: nothing of the stream reaches a viewer or the node token.
	for _, tc := range []struct {
		token  string
		status int
	}{{viewer, http.StatusForbidden}, {testNodeToken, http.StatusUnauthorized}} {
		status, body := tapGet(t, rh.url, path, tc.token)
		if status != tc.status || bytes.Contains(body, []byte("event:")) || bytes.Contains(body, []byte(`\"s\"`)) {
			t.Fatalf("tap with a refused token: %d %s", status, body)
		}
	}

	// The Agent polls for taps; the first tap may come before its first
	// poll reached the Hub, which then answers 503: retry until it runs.
	var body []byte
	eventually(t, "a tap through the Hub", func() bool {
		var status int
		status, body = tapGet(t, rh.url, path, operatorToken)
		return status == http.StatusOK
	})
	var msgs int
	var end wire.TapEnd
	for block := range strings.SplitSeq(string(body), "\n\n") {
		event, data, _ := strings.Cut(block, "\ndata: ")
		switch event {
		case "event: " + wire.TapEventMessage:
			var m wire.TapMessage
			if err := json.Unmarshal([]byte(data), &m); err != nil || m.Stage != "input" || m.Payload != `{"s": "a"}` {
				t.Fatalf("message %s (%v)", data, err)
			}
			msgs++
		case "event: " + wire.TapEventEnd:
			if err := json.Unmarshal([]byte(data), &end); err != nil {
				t.Fatal(err)
			}
		}
	}
	if msgs < 5 || end.Reason != wire.TapEndDuration || end.Sampled < uint64(msgs) {
		t.Fatalf("%d messages, end %+v:\n%s", msgs, end, body)
	}

	var audit wire.Page[wire.AuditRecord]
	rh.operator(t, "GET", "/audit?action=tap", "", &audit)
	var accepted, rejected int
	for _, a := range audit.Items {
		switch {
		case a.Outcome == "accepted" && a.ResourceID == "a" && a.NodeID == testNodeID && a.Actor == "operator" && strings.Contains(a.Message, "stage=input rate=20 duration_ms=2000"):
			accepted++
		case a.Outcome == "rejected" && a.FailureCode == "forbidden" && a.Actor == "dash":
			rejected++
		}
	}
	if accepted != 1 || rejected != 1 {
		t.Fatalf("audit: %d accepted, %d rejected taps: %+v", accepted, rejected, audit.Items)
	}
}
