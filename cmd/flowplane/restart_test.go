package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func nodeDoc(addr string, streams ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "logging: {level: warn}\nhealth_check: {address: %q}\nstreams:\n", addr)
	for _, id := range streams {
		fmt.Fprintf(&b, "  - id: %s\n    input: {type: generate, context: '{\"n\": {{count}}}', interval: 20ms}\n    pipeline: {processors: []}\n    output: {type: drop}\n", id)
	}
	return b.String()
}

func getJSON(t *testing.T, url string, into any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

type runningNode struct {
	base string
}

func (n runningNode) configVersion(t *testing.T) string {
	t.Helper()
	var c struct {
		ID, Source string
	}
	getJSON(t, n.base+"/configuration", &c)
	return c.ID + "/" + c.Source
}

func (n runningNode) streamIDs(t *testing.T) string {
	t.Helper()
	var p struct{ Items []struct{ ID string } }
	getJSON(t, n.base+"/streams", &p)
	var ids []string
	for _, s := range p.Items {
		ids = append(ids, s.ID)
	}
	return strings.Join(ids, ",")
}

func stopChild(t *testing.T, c interface {
	Signal(os.Signal) error
	Wait() (*os.ProcessState, error)
}) {
	t.Helper()
	if err := c.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Wait(); err != nil || !st.Success() {
		t.Fatalf("node did not stop cleanly: %v %v", st, err)
	}
}

// TestConfigurationHistorySurvivesRestart applies a version through the
// API, restarts the process with the unchanged file (the applied version
// runs), then with a changed file (the file becomes a new version).
func TestConfigurationHistorySurvivesRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	conf := filepath.Join(dir, "node.yaml")
	state := filepath.Join(dir, "state")
	if err := os.WriteFile(conf, []byte(nodeDoc(addr, "a")), 0o600); err != nil {
		t.Fatal(err)
	}
	n := runningNode{base: "http://" + addr}

	child := startChild(t, conf, state)
	waitListening(t, addr)
	if got := n.configVersion(t); got != "v1/file" {
		t.Fatalf("first start runs %s, want v1/file", got)
	}
	body := strings.NewReader(nodeDoc(addr, "a", "b"))
	resp, err := http.Post(n.base+"/configuration/apply", "application/yaml", body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("apply: %d", resp.StatusCode)
	}
	waitUntil(t, "v2 applied", func() bool { return n.configVersion(t) == "v2/api" && n.streamIDs(t) == "a,b" })
	stopChild(t, child.Process)

	// Same file: the node runs the last applied version, v2.
	child = startChild(t, conf, state)
	waitListening(t, addr)
	if got, ids := n.configVersion(t), n.streamIDs(t); got != "v2/api" || ids != "a,b" {
		t.Fatalf("after restart runs %s with streams %s, want v2/api with a,b", got, ids)
	}
	stopChild(t, child.Process)

	// Changed file: it becomes v3 and runs.
	if err := os.WriteFile(conf, []byte(nodeDoc(addr, "c")), 0o600); err != nil {
		t.Fatal(err)
	}
	child = startChild(t, conf, state)
	waitListening(t, addr)
	if got, ids := n.configVersion(t), n.streamIDs(t); got != "v3/file" || ids != "c" {
		t.Fatalf("after the file changed runs %s with streams %s, want v3/file with c", got, ids)
	}
	var versions struct{ Total int }
	getJSON(t, n.base+"/configuration/versions", &versions)
	if versions.Total != 3 {
		t.Errorf("history holds %d versions, want 3", versions.Total)
	}
	stopChild(t, child.Process)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
