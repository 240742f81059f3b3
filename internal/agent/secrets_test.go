package agent_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/wire"
)

// TestSecretsNeverReachTheHub: a stream fails at run time with an error
// quoting a part of a value that embeds a secret (the directory it could
// not create). Its last_error reaches the Hub redacted: in the Agent's
// reports, the Hub's stream views and events, and the Hub's SQLite files.
func TestSecretsNeverReachTheHub(t *testing.T) {
	const secret = "hub-bound-S3cret-8e2f"
	t.Setenv("SVC_SECRET_FLOWPLANE_AGENT_PART", secret)
	rh := startRealHub(t)
	out := "  - id: out\n    input: {type: generate, context: '{}', interval: 1h, batch_size: 1}\n" +
		"    pipeline: {processors: []}\n    output: {type: file, path: \"/proc/x-${secret:FLOWPLANE_AGENT_PART}/sub/out.txt\"}\n"
	tn := startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{rh.proxy.URL}, streams: []string{"a"}, extra: out})

	v := rh.waitStream(t, "out", "failed with its last error", func(v wire.Stream) bool { return v.Observed.LastError != "" })
	if !strings.Contains(v.Observed.LastError, "mkdir /proc/x-"+config.Redacted+":") {
		t.Errorf("hub last_error = %q", v.Observed.LastError)
	}
	var w wire.DesiredStateResponse
	rh.operator(t, "POST", "/nodes/"+testNodeID+"/streams/out/actions/restart", "", &w)
	eventually(t, "the restart's outcome at the Hub", func() bool {
		var op wire.Operation
		rh.operator(t, "GET", "/operations/"+w.OperationID, "", &op)
		return op.State == wire.OpSucceeded || op.State == wire.OpFailed
	})
	tn.stop()

	surfaces := map[string][]byte{}
	for _, path := range []string{"/streams", "/nodes/" + testNodeID + "/streams/out", "/events?page_size=100", "/operations?page_size=100", "/nodes/" + testNodeID, "/status"} {
		var raw jsonRaw
		rh.operator(t, "GET", path, "", &raw)
		surfaces["GET "+path] = raw
	}
	rh.proxy.mu.Lock()
	for _, r := range rh.proxy.requests {
		surfaces[r.Method+" "+r.Path] = append(surfaces[r.Method+" "+r.Path], r.Body...)
	}
	rh.proxy.mu.Unlock()
	files, _ := filepath.Glob(rh.storage + "*")
	if len(files) == 0 {
		t.Fatalf("no SQLite file at %s", rh.storage)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		surfaces[filepath.Base(f)] = b
	}
	if !bytes.Contains(surfaces["POST /api/v1/agent/report"], []byte("mkdir /proc/x-"+config.Redacted)) {
		t.Errorf("no report carried the redacted last_error")
	}
	for name, b := range surfaces {
		if bytes.Contains(b, []byte("S3cret")) {
			t.Errorf("%s holds the secret", name)
		}
	}
}

// jsonRaw keeps a response body as it came.
type jsonRaw []byte

func (j *jsonRaw) UnmarshalJSON(b []byte) error {
	*j = append((*j)[:0], b...)
	return nil
}
