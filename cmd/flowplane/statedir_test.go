package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/node"
)

// dirNames lists the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestQuickstartLeavesItsFolderAlone runs the quickstart as `make
// quickstart` does (a real process), from a copy of examples/: the folder of the
// configuration file holds nothing new afterwards (the state went to the
// user's state directory), so `make test` after `make quickstart` reads
// what it read before. Run again, the node finds the same state.
func TestQuickstartLeavesItsFolderAlone(t *testing.T) {
	tmp := t.TempDir()
	examples := filepath.Join(tmp, "examples")
	if err := os.Mkdir(examples, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(examples, "quickstart.yaml")
	if err := os.WriteFile(conf, data, 0o644); err != nil {
		t.Fatal(err)
	}
	xdg := filepath.Join(tmp, "state-home")
	env := []string{"XDG_STATE_HOME=" + xdg, "SVC_STATE_ROOT="}

	code, out := runToExit(t, env, "--config", conf)
	if code != exitOK || strings.Count(out, "hello, flowplane") != 10 {
		t.Fatalf("quickstart exit %d, output:\n%s", code, out)
	}
	if got := dirNames(t, examples); !slices.Equal(got, []string{"quickstart.yaml"}) {
		t.Fatalf("the quickstart left %v in the configuration's folder, want only quickstart.yaml", got)
	}
	name, err := node.StateName(conf)
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(xdg, "flowplane", name)
	id, err := os.ReadFile(filepath.Join(state, "node_id"))
	if err != nil {
		t.Fatalf("no node id in the default state directory: %v", err)
	}
	if code, out := runToExit(t, env, "--config", conf); code != exitOK {
		t.Fatalf("second quickstart exit %d: %s", code, out)
	}
	again, err := os.ReadFile(filepath.Join(state, "node_id"))
	if err != nil || string(again) != string(id) {
		t.Errorf("node id %q after a second run, want %q (%v)", again, id, err)
	}
	if got := dirNames(t, filepath.Join(xdg, "flowplane")); !slices.Equal(got, []string{name}) {
		t.Errorf("state directories %v after two runs of one file, want [%s]", got, name)
	}
}

// TestExampleConfigsSkipsLeftovers: the schema test reads the example
// configurations only, not what a run or a walkthrough left in examples/.
func TestExampleConfigsSkipsLeftovers(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.yaml", "b.toml", "c.json", "d.yml", "node.log", "hub.db", "hub.db.lock", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("streams: []\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{".flowplane/config", "x.yaml"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, f := range exampleConfigs(t, dir) {
		got = append(got, filepath.Base(f))
	}
	if want := []string{"a.yaml", "b.toml", "c.json", "d.yml"}; !slices.Equal(got, want) {
		t.Errorf("example configurations %v, want %v", got, want)
	}
}

// runToExit runs flowplane as a child process that is expected to exit by
// itself within 30 s, and returns its exit code and combined output.
func runToExit(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, childBin, args...)
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("flowplane %v did not exit within 30 s:\n%s", args, out)
	}
	if err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

func nodeIDOf(t *testing.T, addr string) string {
	t.Helper()
	var s struct {
		NodeID string `json:"node_id"`
	}
	getJSON(t, "http://"+addr+"/system", &s)
	return s.NodeID
}

// TestOneProcessPerStateDir starts real node processes. Two configuration
// files in one folder get state directories of their own by default (two
// node ids). Two nodes given one --state-dir: the second exits 1 naming
// the directory and the first's pid. Once the first is SIGKILLed, the
// second starts at once with the first's node id.
func TestOneProcessPerStateDir(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	env := []string{"XDG_STATE_HOME=" + filepath.Join(dir, "state-home"), "SVC_STATE_ROOT="}
	addrA := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	addrB := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	confA, confB := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	if err := os.WriteFile(confA, []byte(nodeDoc(addrA, "s")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(confB, []byte(nodeDoc(addrB, "s")), 0o600); err != nil {
		t.Fatal(err)
	}

	// Defaults: one folder, two files, two nodes.
	a := startProcess(t, "node a", env, "--config", confA)
	b := startProcess(t, "node b", env, "--config", confB)
	waitListening(t, addrA)
	waitListening(t, addrB)
	idA, idB := nodeIDOf(t, addrA), nodeIDOf(t, addrB)
	if idA == idB {
		t.Fatalf("two configuration files in one folder share node id %s", idA)
	}
	if _, err := os.Stat(filepath.Join(dir, ".flowplane")); err == nil {
		t.Errorf("a node wrote .flowplane/ beside its configuration file")
	}
	stopChild(t, a.Process)
	stopChild(t, b.Process)

	// One --state-dir, two processes.
	state := filepath.Join(dir, "shared-state")
	a = startProcess(t, "node a", env, "--config", confA, "--state-dir", state)
	waitListening(t, addrA)
	idA = nodeIDOf(t, addrA)
	code, out := runToExit(t, env, "--config", confB, "--state-dir", state)
	if code != exitFailed {
		t.Fatalf("second node on %s: exit %d, want 1; output:\n%s", state, code, out)
	}
	pid := strconv.Itoa(a.Process.Pid)
	if !strings.Contains(out, "state directory "+state+" is in use by process "+pid) {
		t.Errorf("second node's message does not name %s and pid %s:\n%s", state, pid, out)
	}
	versions, err := os.ReadDir(filepath.Join(state, "config", "versions"))
	if err != nil || len(versions) != 1 {
		t.Errorf("the refused node touched the history: %d versions (%v)", len(versions), err)
	}

	// A SIGKILLed holder does not block the restart.
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()
	b = startProcess(t, "node b", env, "--config", confB, "--state-dir", state)
	waitListening(t, addrB)
	if got := nodeIDOf(t, addrB); got != idA {
		t.Errorf("after the holder was killed the node runs as %s, want the directory's id %s", got, idA)
	}
	stopChild(t, b.Process)
}

// TestOneProcessPerWALDir gives two nodes, each with its own state
// directory, one stream WAL path: the second exits 1 naming the WAL
// directory and the first's pid.
func TestOneProcessPerWALDir(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	walDir := filepath.Join(dir, "shared-wal")
	doc := func(addr string) string {
		return fmt.Sprintf(`logging: {level: warn}
health_check: {address: %q}
streams:
  - id: s
    input: {type: generate, context: '{"n": {{count}}}', interval: 20ms}
    pipeline: {processors: []}
    output: {type: drop}
    durability: {path: %q}
`, addr, walDir)
	}
	addrA := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	addrB := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	confA, confB := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	if err := os.WriteFile(confA, []byte(doc(addrA)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(confB, []byte(doc(addrB)), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startProcess(t, "node a", nil, "--config", confA, "--state-dir", filepath.Join(dir, "state-a"))
	waitListening(t, addrA)
	waitUntil(t, "node a ready (its WAL open)", func() bool {
		resp, err := http.Get("http://" + addrA + "/readiness")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	code, out := runToExit(t, nil, "--config", confB, "--state-dir", filepath.Join(dir, "state-b"))
	if code != exitFailed {
		t.Fatalf("second node on WAL %s: exit %d, want 1; output:\n%s", walDir, code, out)
	}
	lock := filepath.Join(walDir, "flowplane.lock")
	if !strings.Contains(out, lock+" is held by process "+strconv.Itoa(a.Process.Pid)) {
		t.Errorf("second node's message does not name %s and pid %d:\n%s", lock, a.Process.Pid, out)
	}
	stopChild(t, a.Process)
}

// TestOneHubPerStorage starts a second Hub process on the SQLite file of a
// running one: it exits 1 naming the file and the first Hub's pid. Once
// the first is SIGKILLed, a Hub starts on the file at once.
func TestOneHubPerStorage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	storage := filepath.Join(t.TempDir(), "hub.db")
	first := startHub(t, storage)
	code, out := runToExit(t, []string{"SVC_HUB_ADDRESS=127.0.0.1:0", "SVC_HUB_STORAGE=" + storage,
		"SVC_OPERATOR_TOKEN=" + hubOperatorToken, "SVC_NODE_TOKEN=" + hubNodeToken, "SVC_HUB_INSECURE_LOCAL="}, "hub")
	if code != exitFailed {
		t.Fatalf("second Hub on %s: exit %d, want 1; output:\n%s", storage, code, out)
	}
	if want := storage + ".lock is held by process " + strconv.Itoa(first.cmd.Process.Pid); !strings.Contains(out, want) {
		t.Errorf("second Hub's message does not say %q:\n%s", want, out)
	}
	if err := first.kill(); err != nil {
		t.Fatal(err)
	}
	startHub(t, storage)
}
