package agent_test

import (
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/agent"
	"github.com/flowplane/flowplane/internal/hub"
)

// TestRealHubNodeIdentity: the node credential is made once, 0600, in the
// state directory; another process registering the node id with another
// credential is refused 403 node_identity_mismatch; a node that lost its
// state directory is refused too, says the fix once at error level and in
// its status, retries slowly, and registers after the operator forgets
// the node, without a restart.
func TestRealHubNodeIdentity(t *testing.T) {
	rh := startRealHub(t)
	dir := t.TempDir()
	tn := startNode(t, nodeOptions{stateDir: dir, hubURLs: []string{rh.proxy.URL}, streams: []string{"a"}})
	eventually(t, "the node to register", func() bool { return tn.agent.Status().Connected })
	file := filepath.Join(dir, "agent", "node_credential")
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("node credential mode %v, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(file)
	if raw, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(string(b))); err != nil || len(raw) < 32 {
		t.Fatalf("node credential: %d bytes, %v", len(raw), err)
	}
	if status, code := registerDirect(t, rh.url, "another-credential-of-at-least-32-characters"); status != http.StatusForbidden || code != hub.CodeNodeIdentityMismatch {
		t.Fatalf("another credential: %d %s, want 403 %s", status, code, hub.CodeNodeIdentityMismatch)
	}
	tn.stop()
	if b2, _ := os.ReadFile(file); string(b2) != string(b) {
		t.Fatal("the node credential changed")
	}

	// The node comes back without its state directory.
	lost := startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{rh.proxy.URL}, streams: []string{"a"}, tune: func(o *agent.Options) {
		o.IdentityRetry = 50 * time.Millisecond
	}})
	eventually(t, "a few refused registrations", func() bool { return rh.proxy.count("/api/v1/agent/register", http.StatusForbidden) >= 4 })
	st := lost.agent.Status()
	if st.Connected || !strings.Contains(st.LastError, "flowplane ctl node forget "+testNodeID) || !strings.Contains(st.LastError, "lost its state directory") {
		t.Fatalf("status of the refused node: %+v", st)
	}
	if n := strings.Count(lost.logs.String(), "level=ERROR msg=\"register refused: node identity mismatch\""); n != 1 {
		t.Fatalf("the refusal logged at error level %d times, want once:\n%s", n, lost.logs.String())
	}
	rh.operator(t, "DELETE", "/nodes/"+testNodeID+"?force=true", "", nil)
	eventually(t, "the node to register after the forget", func() bool { return lost.agent.Status().Connected })
	var v hub.NodeView
	eventually(t, "the node online at the Hub", func() bool {
		rh.operator(t, "GET", "/nodes/"+testNodeID, "", &v)
		return v.Status == "online"
	})
	lost.stop()
	rh.proxy.checkNoTokenLeak(t)
}
