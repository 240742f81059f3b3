package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// TestContainerFleet builds flowplane's image from this checkout and walks
// the fleet of docs/deploy.md with podman: a Hub and two Agents in
// containers on a user network, the host's flowplane ctl logging in through
// the Hub's published loopback port, both nodes online, a stream stopped with
// --wait, and a restarted Agent container back online under the same
// identity (its state volume) with the stream still in_sync and no third node.
func TestContainerFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds flowplane and runs containers with podman")
	}
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatal("podman is not installed (apt-get install podman); .ci/run installs it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()

	// A static binary: CGO_ENABLED=0 as make test's go vet compiled every
	// package, so this is a link; the same flags as cmd/flowplane's tests.
	bin := filepath.Join(dir, "flowplane")
	build := exec.CommandContext(ctx, "go", "build", "-buildvcs=false", "-ldflags=-s -w", "-o", bin, "../../cmd/flowplane")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := fmt.Sprintf("%d-%s", os.Getpid(), randomHex(t, 3))
	tag := "localhost/flowplane-test:" + run
	archive := filepath.Join(dir, "image.oci.tar")
	if err := writeImage(archive, imageSpec{binary: bin, caCerts: "testdata/ca.pem", arch: runtime.GOARCH,
		version: "test", revision: strings.Repeat("0", 40), source: "https://github.com/flowplane/flowplane",
		tag: tag, date: time.Now().UTC().Truncate(time.Second)}); err != nil {
		t.Fatal(err)
	}
	p := &podman{t: t, ctx: ctx}
	p.run("load", "-i", archive)
	t.Cleanup(func() { p.quiet("rmi", "-f", tag) })
	network := "flowplane-test-" + run
	p.run("network", "create", network)
	t.Cleanup(func() { p.quiet("network", "rm", "-f", network) })
	p.pickRuntime(tag)

	operator, node := randomHex(t, 32), randomHex(t, 32)
	port := freeLoopbackPort(t)
	hub, nodeA, nodeB := "hub-"+run, "node-a-"+run, "node-b-"+run
	for _, c := range []string{hub, nodeA, nodeB} {
		t.Cleanup(func() {
			if t.Failed() {
				out, _ := exec.Command("podman", "logs", "--tail", "40", c).CombinedOutput()
				t.Logf("%s, last lines:\n%s", c, out)
			}
			p.quiet("rm", "-f", "-t", "1", c)
			p.quiet("volume", "rm", "-f", c)
		})
	}
	p.env = []string{"SVC_OPERATOR_TOKEN=" + operator, "SVC_NODE_TOKEN=" + node}
	p.start(hub, "--network", network, "-p", fmt.Sprintf("127.0.0.1:%d:8090", port), "-v", hub+":/var/lib/flowplane",
		"-e", "SVC_OPERATOR_TOKEN", "-e", "SVC_NODE_TOKEN", "-e", "SVC_HUB_ADDRESS=0.0.0.0:8090", tag, "hub")
	hubIP := strings.TrimSpace(p.run("inspect", hub, "--format", "{{(index .NetworkSettings.Networks \""+network+"\").IPAddress}}"))
	if net.ParseIP(hubIP) == nil {
		t.Fatalf("the Hub container's address on %s is %q", network, hubIP)
	}
	for id, name := range map[string]string{"node-a": nodeA, "node-b": nodeB} {
		conf := filepath.Join(dir, id+".yaml")
		if err := os.WriteFile(conf, []byte(strings.ReplaceAll(nodeConfig, "NODE_ID", id)), 0o644); err != nil {
			t.Fatal(err)
		}
		// The Hub by its address: not every network here has DNS.
		p.start(name, "--network", network, "--add-host", "hub:"+hubIP, "-v", conf+":/etc/flowplane/node.yaml:ro",
			"-v", name+":/var/lib/flowplane", "-e", "SVC_NODE_TOKEN",
			tag, "--config", "/etc/flowplane/node.yaml", "--state-dir", "/var/lib/flowplane")
	}

	// The walkthrough's ctl, from the host.
	ctl := &ctlRun{t: t, ctx: ctx, bin: bin, env: append(os.Environ(), "SVC_OPERATOR_TOKEN="+operator,
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_STATE_HOME="+filepath.Join(dir, "state"), "HOME="+dir)}
	hubURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	ctl.eventually("the Hub answers", func() error { return ctl.try("ctl", "login", "--hub", hubURL, "--token-env", "SVC_OPERATOR_TOKEN") })
	ctl.eventually("node-a and node-b online", func() error { return ctl.nodesOnline("node-a", "node-b") })
	ctl.eventually("the Agents report their streams", func() error { return ctl.stream("node-a", "orders", "running") })
	ctl.must("ctl", "stream", "stop", "node-a/orders", "--wait", "--timeout", "60s")
	if err := ctl.stream("node-a", "orders", "stopped"); err != nil {
		t.Fatalf("after ctl stream stop --wait: %v", err)
	}

	p.run("restart", "-t", "5", nodeA)
	ctl.eventually("node-a online again", func() error { return ctl.nodesOnline("node-a", "node-b") })
	ctl.eventually("node-a/orders stopped and in_sync after the restart", func() error { return ctl.stream("node-a", "orders", "stopped") })
	var nodes []wire.NodeView
	ctl.getJSON(&nodes, "nodes")
	if len(nodes) != 2 {
		t.Errorf("after node-a's restart the Hub knows %d nodes, want 2 (the same identity): %v", len(nodes), nodes)
	}
	if logs := p.run("logs", hub); strings.Contains(logs, operator) || strings.Contains(logs, node) {
		t.Error("the Hub's log holds a token")
	}
}

// nodeConfig is the Agents' configuration of docs/deploy.md.
const nodeConfig = `health_check:
  address: 127.0.0.1:8081
  hub_urls: ["http://hub:8090"]
  node_id: NODE_ID
  node_token: ${env:SVC_NODE_TOKEN}
streams:
  - id: orders
    input: {type: generate, context: '{"id": {{count}}}', interval: 100ms}
    pipeline: {processors: [{type: json}]}
    output: {type: drop}
`

// podman runs podman commands for a test; runtimeFlags are what the first
// container needed (see pickRuntime), env the environment the containers
// take their -e variables from.
type podman struct {
	t            *testing.T
	ctx          context.Context
	runtimeFlags []string
	env          []string
}

func (p *podman) command(args ...string) *exec.Cmd {
	cmd := exec.CommandContext(p.ctx, "podman", args...)
	cmd.Env = append(os.Environ(), p.env...)
	return cmd
}

// run runs podman and returns its standard output; a failure ends the test.
func (p *podman) run(args ...string) string {
	p.t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := p.command(args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		p.t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// quiet runs podman for a cleanup, whatever comes of it.
func (p *podman) quiet(args ...string) {
	_ = exec.Command("podman", args...).Run()
}

// start starts a detached container named name with args (options, image,
// command) and the flags of pickRuntime.
func (p *podman) start(name string, args ...string) {
	p.t.Helper()
	p.run(append(append([]string{"run", "-d", "--name", name}, p.runtimeFlags...), args...)...)
}

// pickRuntime runs `flowplane version` in the image with podman's defaults,
// then, if that fails, with the flags some sandboxes need (runc, limits the
// runtime may not raise; docs/deploy.md), and keeps what worked.
func (p *podman) pickRuntime(tag string) {
	p.t.Helper()
	var tried []string
	for _, flags := range [][]string{nil,
		{"--ulimit", "nofile=16384:16384", "--ulimit", "nproc=4096:4096"},
		{"--runtime", "runc", "--ulimit", "nofile=16384:16384", "--ulimit", "nproc=4096:4096"}} {
		out, err := p.command(append(append([]string{"run", "--rm"}, flags...), tag, "version")...).CombinedOutput()
		if err == nil && strings.Contains(string(out), "flowplane") {
			p.runtimeFlags = flags
			return
		}
		tried = append(tried, fmt.Sprintf("podman run %v: %v\n%s", flags, err, out))
	}
	p.t.Fatalf("no container runs here:\n%s", strings.Join(tried, "\n"))
}

// ctlRun runs the host's flowplane (ctl) for a test.
type ctlRun struct {
	t   *testing.T
	ctx context.Context
	bin string
	env []string
}

func (c *ctlRun) output(args ...string) (string, error) {
	cmd := exec.CommandContext(c.ctx, c.bin, args...)
	cmd.Env = c.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("flowplane %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

func (c *ctlRun) try(args ...string) error {
	_, err := c.output(args...)
	return err
}

func (c *ctlRun) must(args ...string) {
	c.t.Helper()
	if err := c.try(args...); err != nil {
		c.t.Fatal(err)
	}
}

// getJSON reads `ctl get what -o json` into v.
func (c *ctlRun) getJSON(v any, what string) {
	c.t.Helper()
	out, err := c.output("ctl", "get", what, "-o", "json")
	if err == nil {
		err = json.Unmarshal([]byte(out), v)
	}
	if err != nil {
		c.t.Fatal(err)
	}
}

// nodesOnline is nil when every id is an online node.
func (c *ctlRun) nodesOnline(ids ...string) error {
	out, err := c.output("ctl", "get", "nodes", "-o", "json")
	if err != nil {
		return err
	}
	var nodes []wire.NodeView
	if err := json.Unmarshal([]byte(out), &nodes); err != nil {
		return err
	}
	status := map[string]string{}
	for _, n := range nodes {
		status[n.NodeID] = n.Status
	}
	for _, id := range ids {
		if status[id] != "online" {
			return fmt.Errorf("node %s is %q", id, status[id])
		}
	}
	return nil
}

// stream is nil when node/id is observed in state and in_sync or, for a
// stream nobody wrote a desired state for yet, observed in state.
func (c *ctlRun) stream(node, id, state string) error {
	out, err := c.output("ctl", "get", "streams", "-o", "json")
	if err != nil {
		return err
	}
	var streams []wire.Stream
	if err := json.Unmarshal([]byte(out), &streams); err != nil {
		return err
	}
	for _, s := range streams {
		if s.NodeID != node || s.ID != id {
			continue
		}
		obs, des := s.Observed.State, s.Desired.State
		if obs != state || (des != "" && (des != state || s.Convergence != "in_sync")) {
			return fmt.Errorf("%s/%s: observed %q, desired %q, %s", node, id, obs, des, s.Convergence)
		}
		return nil
	}
	return fmt.Errorf("the Hub lists no stream %s/%s", node, id)
}

// eventually retries f every half second until it is nil or the test's
// context ends.
func (c *ctlRun) eventually(what string, f func() error) {
	c.t.Helper()
	for {
		err := f()
		if err == nil {
			return
		}
		select {
		case <-c.ctx.Done():
			c.t.Fatalf("%s: not by the deadline: %v", what, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func freeLoopbackPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
