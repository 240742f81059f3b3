package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/dataplane"
	"github.com/flowplane/flowplane/internal/hub"
	"github.com/flowplane/flowplane/internal/netlab"
	"github.com/flowplane/flowplane/internal/wire"
)

// The split test runs a real Hub and three real Agents, each in its own
// network namespace with its own address (netnsLab), and runs one job split
// across the three: generate -> partitioned keyed tumbling window ->
// exactly-once file sink, checkpointing to a file:// store on the shared
// filesystem. Its output must equal the oracle computed from the
// generator's definition (oracle, readParts: job_crash_test.go) when the
// job runs undisturbed, when one node is SIGKILLed mid-run and restarted,
// and when one node's link carries 200 ms of latency (memory measured).
// A connection presenting a wrong job secret is refused and counted.

const (
	splitHubPort  = 8080
	splitNodePort = 8080
	splitDataPort = 7070
	splitAPIToken = "node-api-token-for-the-split-test"
	// splitRecords is how many records each run generates: at 6,000 a
	// second (three subtasks of 2,000) a run takes some 8 s undisturbed.
	splitRecords = 48000
	// splitDelay is the latency added to one node's link.
	splitDelay = 200 * time.Millisecond
	// splitMemoryBound is the generous bound on a node's peak RSS.
	splitMemoryBound = 1 << 30
)

var splitNodes = []string{"n1", "n2", "n3"}

// splitSource is the generated input of a run: users, pages and event
// times 5 ms apart, deterministic for the oracle.
func splitSource(seed int) map[string]any {
	return map[string]any{
		"context":            `{"user": "u{{random:7}}", "page": {{random:10}}, "ts": {{timestamp_ms}}}`,
		"seed":               seed,
		"timestamp_start_ms": 1767225600000,
		"timestamp_step_ms":  5,
		"count":              splitRecords,
		"interval":           "10ms",
		"batch_size":         20,
	}
}

// splitJobSpec is the job of one run, parallelism 3 throughout.
func splitJobSpec(t *testing.T, id string, src map[string]any, out, store string) string {
	t.Helper()
	spec := map[string]any{
		"id": id, "version": 1, "parallelism": 3,
		"operators": []any{
			map[string]any{"id": "clicks", "kind": "source"},
			map[string]any{"id": "counts", "kind": "window", "config": map[string]any{
				"key":    "this.user",
				"window": map[string]any{"type": "tumbling", "size_ms": 1000},
				"aggregations": []any{
					map[string]any{"name": "clicks", "function": "count"},
					map[string]any{"name": "pages", "function": "sum", "expression": "this.page"},
				},
			}},
			map[string]any{"id": "files", "kind": "sink"},
		},
		"edges": []any{
			map[string]any{"from": "clicks", "to": "counts", "partitioned": true},
			map[string]any{"from": "counts", "to": "files"},
		},
		"sources": []any{map[string]any{"operator_id": "clicks", "input_type": "generate", "config": src,
			"time": map[string]any{"mode": "event_time", "timestamp_field": "ts"}}},
		"sinks":      []any{map[string]any{"operator_id": "files", "output_type": "file", "config": map[string]any{"path": out}}},
		"state":      map[string]any{"backend": "embedded_kv"},
		"checkpoint": map[string]any{"interval_ms": 400, "retention": 3, "object_store_uri": store},
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// splitNode is an Agent in its namespace, with a data plane.
type splitNode struct {
	*fleetNode
	lab      *netnsLab
	host     *netlab.Host
	dataHost string // the advertised data host: its own address, or a relay's
}

func newSplitNode(t *testing.T, lab *netnsLab, dir, id, hubURL string) *splitNode {
	t.Helper()
	h := lab.host(t, id)
	n := &splitNode{lab: lab, host: h, dataHost: h.IP, fleetNode: &fleetNode{owner: t, id: id, addr: h.Addr(splitNodePort),
		conf: filepath.Join(dir, id+".yaml"), state: filepath.Join(dir, id)}}
	n.writeConfig(t, hubURL)
	return n
}

// writeConfig writes the node's configuration with its current data host.
func (n *splitNode) writeConfig(t *testing.T, hubURL string) {
	t.Helper()
	conf := fmt.Sprintf(`logging: {level: info}
health_check:
  address: %q
  api_token: %q
  hub_urls: [%q]
  node_id: %s
  node_token: "${env:%s}"
  agent_lease_ttl_ms: 2000
  data_port: %d
  data_host: %q
%sstreams: []
`, n.addr, splitAPIToken, hubURL, n.id, hub.EnvNodeToken, splitDataPort, n.dataHost, tempRootsPolicy())
	if err := os.WriteFile(n.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (n *splitNode) start(t *testing.T) {
	t.Helper()
	n.proc = n.lab.start(t, n.owner, n.host, n.id, append([]string{hub.EnvNodeToken + "=" + fleetNodeToken}, n.env...),
		"--config", n.conf, "--state-dir", n.state)
	waitListening(t, n.addr)
}

// stop ends the node with SIGTERM, SIGKILL after 15 s.
func (n *splitNode) stop(t *testing.T) {
	t.Helper()
	if err := n.proc.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = n.proc.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = n.proc.Process.Kill()
		<-done
		t.Logf("%s did not stop within 15 s of SIGTERM; killed", n.id)
	}
}

// dataAddress is the address its peers dial.
func (n *splitNode) dataAddress() string {
	return net.JoinHostPort(n.dataHost, strconv.Itoa(splitDataPort))
}

// get reads a Node API path (with the node's token); it returns the body
// of a 200 answer.
func (n *splitNode) get(path string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, n.base()+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+splitAPIToken)
	resp, err := fleetHTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s%s: %d %s", n.base(), path, resp.StatusCode, b)
	}
	return b, nil
}

// metric sums the samples of the node's metric name whose labels include
// want; ok is false when the node exposes no such sample.
func (n *splitNode) metric(t *testing.T, name string, want map[string]string) (v float64, ok bool) {
	t.Helper()
	b, err := n.get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return metricSum(string(b), name, want)
}

var promLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// metricSum sums the samples of name in a Prometheus text exposition whose
// labels include want.
func metricSum(text, name string, want map[string]string) (sum float64, ok bool) {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name) || strings.HasPrefix(line, "#") {
			continue
		}
		rest := line[len(name):]
		labels := map[string]string{}
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.LastIndex(rest, "}")
			if end < 0 {
				continue
			}
			for _, m := range promLabel.FindAllStringSubmatch(rest[1:end], -1) {
				labels[m[1]] = m[2]
			}
			rest = rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // another metric whose name starts with name
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		f := strings.Fields(rest)
		if !match || len(f) == 0 {
			continue
		}
		if x, err := strconv.ParseFloat(f[0], 64); err == nil {
			sum, ok = sum+x, true
		}
	}
	return sum, ok
}

// splitRun is one run of the split job: its id, source and output.
type splitRun struct {
	id, out string
	src     map[string]any
	created wire.JobDesiredResponse
	began   time.Time
}

// splitCluster is the Hub and the nodes of the test.
type splitCluster struct {
	lab   *netnsLab
	dir   string
	store string
	hub   *fleetHub
	nodes map[string]*splitNode
}

func (c *splitCluster) node(t *testing.T, id string) *splitNode {
	t.Helper()
	n, ok := c.nodes[id]
	if !ok {
		t.Fatalf("no node %s", id)
	}
	return n
}

// create creates a run of the job placed split over every node, running.
func (c *splitCluster) create(t *testing.T, id string, seed int) *splitRun {
	t.Helper()
	r := &splitRun{id: id, src: splitSource(seed), out: filepath.Join(c.dir, id, "out")}
	spec := splitJobSpec(t, id, r.src, filepath.Join(r.out, "counts.jsonl"), c.store)
	body := fmt.Sprintf(`{"spec": %s, "desired_state": "running", "node_ids": ["n1", "n2", "n3"], "placement": %q}`, spec, wire.PlacementSplit)
	r.began = time.Now()
	c.hub.call(t, "POST", "/jobs", body, http.StatusAccepted, &r.created)
	return r
}

// waitPlaced waits until the job's detail places its tasks on all three
// nodes and some task is observed, and returns the detail.
func (c *splitCluster) waitPlaced(t *testing.T, r *splitRun) wire.JobDetail {
	t.Helper()
	var d wire.JobDetail
	c.waitFor(t, r, "tasks on all three nodes, observed", 30*time.Second, func() bool {
		d = wire.JobDetail{}
		if _, err := c.hub.try("GET", "/jobs/"+r.id+"/detail", "", &d); err != nil {
			return false
		}
		nodes := map[string]bool{}
		observed := 0
		for _, task := range d.Assignment {
			nodes[task.NodeID] = true
			if task.Observed {
				observed++
			}
		}
		return len(nodes) == 3 && observed > 0
	})
	if d.Placement.Mode != wire.PlacementSplit || !slices.Equal(d.Placement.Nodes, splitNodes) {
		t.Fatalf("placement %+v, want split over %v", d.Placement, splitNodes)
	}
	for _, task := range d.Assignment {
		if !slices.Contains(splitNodes, task.NodeID) || d.Placement.TaskNodes[task.TaskID] != task.NodeID {
			t.Fatalf("task %s on %q; placement says %q", task.TaskID, task.NodeID, d.Placement.TaskNodes[task.TaskID])
		}
	}
	return d
}

// waitDone waits until the job completed and its output equals the
// oracle: every window once, with the right counts.
func (c *splitCluster) waitDone(t *testing.T, r *splitRun, d time.Duration) time.Duration {
	t.Helper()
	c.waitFor(t, r, "completed", d, func() bool {
		var j wire.Job
		_, err := c.hub.try("GET", "/jobs/"+r.id, "", &j)
		return err == nil && j.Observed.State == wire.JobCompleted
	})
	took := time.Since(r.began)
	// The oracle reads the same generator unpaced: its records do not
	// depend on the interval.
	unpaced := maps.Clone(r.src)
	unpaced["interval"] = "0s"
	want, got := oracle(t, unpaced), readParts(t, r.out)
	checkOracle(t, want, got)
	t.Logf("%s: %d windows of %d records, each committed exactly once, in %v", r.id, len(want), splitRecords, took.Round(time.Millisecond))
	return took
}

// waitFor polls cond every 100 ms until it holds or d passed; then it
// logs the job's detail and the Hub's events and fails.
func (c *splitCluster) waitFor(t *testing.T, r *splitRun, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			var detail json.RawMessage
			_, err := c.hub.try("GET", "/jobs/"+r.id+"/detail", "", &detail)
			t.Logf("job %s detail (%v): %s", r.id, err, detail)
			c.hub.dumpEvents(t)
			t.Fatalf("job %s: %s: not within %v", r.id, what, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// committedLines counts the lines of the committed part files so far.
func committedLines(dir string) int {
	files, _ := filepath.Glob(filepath.Join(dir, "counts-*.jsonl"))
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil {
			n += strings.Count(string(b), "\n")
		}
	}
	return n
}

// TestSplitJobNetns runs a split job across three nodes in network
// namespaces: undisturbed, with a node SIGKILLed mid-run, and with 200 ms
// on one link; and checks that a wrong job secret is refused.
func TestSplitJobNetns(t *testing.T) {
	t.Parallel() // independent: own ports, own directories, own processes
	if testing.Short() {
		t.Skip("starts a Hub and three Agents in network namespaces")
	}
	lab := newNetnsLab(t, append([]string{"hub"}, splitNodes...)...)
	dir := t.TempDir()
	hubHost := lab.host(t, "hub")
	c := &splitCluster{lab: lab, dir: dir, store: "file://" + filepath.Join(dir, "checkpoints"), nodes: map[string]*splitNode{},
		hub: &fleetHub{owner: t, addr: hubHost.Addr(splitHubPort), storage: filepath.Join(dir, "hub.db")}}
	h := c.hub
	h.proc = lab.start(t, t, hubHost, "hub", []string{hub.EnvAddress + "=" + h.addr, hub.EnvStorage + "=" + h.storage,
		hub.EnvOperatorToken + "=" + fleetOperatorToken, hub.EnvNodeToken + "=" + fleetNodeToken}, "hub")
	if !waitReadiness(h.url(), http.StatusOK, 20*time.Second) {
		t.Fatalf("the Hub in namespace %s never answered /readiness 200 at %s", hubHost.NS, h.url())
	}
	for _, id := range splitNodes {
		n := newSplitNode(t, lab, dir, id, h.url())
		c.nodes[id] = n
		n.start(t)
	}
	defer func() {
		if t.Failed() {
			h.dumpEvents(t)
		}
	}()

	t.Run("nodes register from their namespaces", func(t *testing.T) {
		for _, id := range splitNodes {
			n := c.node(t, id)
			v := h.waitStatus(t, id, "online")
			if v.DataAddress != n.dataAddress() {
				t.Errorf("%s advertises data address %q, want %q", id, v.DataAddress, n.dataAddress())
			}
			if !slices.Contains(v.Capabilities, "network_shuffle") {
				t.Logf("%s capabilities %v: no network_shuffle (yet)", id, v.Capabilities)
			}
		}
	})
	if t.Failed() {
		return
	}

	var baseline time.Duration
	t.Run("baseline equals the oracle; an unpinned key is refused", func(t *testing.T) {
		r := c.create(t, "split-baseline", 11)
		d := c.waitPlaced(t, r)
		t.Logf("placement: coordinator %s, tasks %v", d.Placement.NodeID, d.Placement.TaskNodes)
		t.Run("intruder refused", func(t *testing.T) { refuseIntruder(t, c, r.id) })
		baseline = c.waitDone(t, r, 90*time.Second)
	})
	if t.Failed() {
		return // the other runs need what the baseline showed broken
	}

	for _, kill := range []struct {
		name, job string
		victim    func(coordinator string) string
	}{
		{"a follower", "split-kill", func(c string) string { return lastOther(splitNodes, c) }},
		{"the coordinator", "split-kill-coordinator", func(c string) string { return c }},
	} {
		t.Run("SIGKILL of "+kill.name+" mid-run costs no record and duplicates none", func(t *testing.T) {
			r := c.create(t, kill.job, 12)
			d := c.waitPlaced(t, r)
			victim := c.node(t, kill.victim(d.Placement.NodeID))
			c.waitFor(t, r, "some committed output", 60*time.Second, func() bool { return committedLines(r.out) > 0 })
			before := committedLines(r.out)
			victim.kill(t)
			t.Logf("SIGKILLed %s (coordinator %s) with %d committed windows", victim.id, d.Placement.NodeID, before)
			victim.start(t)
			h.waitStatus(t, victim.id, "online")
			c.waitDone(t, r, 120*time.Second)
			var j wire.Job
			h.call(t, "GET", "/jobs/"+r.id, "", http.StatusOK, &j)
			t.Logf("after recovery: restarts %d, restored from %q", j.Observed.Restarts, j.Observed.RestoredFrom)
		})
	}

	t.Run("200 ms on one link keeps memory bounded", func(t *testing.T) {
		slow := c.node(t, "n3")
		how := delayLink(t, c, slow)
		r := c.create(t, "split-latency", 13)
		mem := watchMemory(t, c)
		c.waitPlaced(t, r)
		took := c.waitDone(t, r, 150*time.Second)
		peaks := mem()
		for _, id := range splitNodes {
			p := peaks[id]
			t.Logf("%s: peak RSS %.1f MiB (VmHWM %.1f MiB) over %d samples", id, mib(p.rss), mib(p.hwm), p.samples)
			if p.samples == 0 {
				t.Errorf("%s: no memory sample", id)
			}
			if p.hwm > splitMemoryBound || p.rss > splitMemoryBound {
				t.Errorf("%s: peak RSS %.1f MiB, VmHWM %.1f MiB: over %.0f MiB", id, mib(p.rss), mib(p.hwm), mib(splitMemoryBound))
			}
		}
		t.Logf("%s: %v with %v on %s's link (%s), %v without", r.id, took.Round(time.Millisecond), splitDelay, slow.id, how, baseline.Round(time.Millisecond))
	})
}

// lastOther is the last of ids other than skip.
func lastOther(ids []string, skip string) string {
	for _, id := range slices.Backward(ids) {
		if id != skip {
			return id
		}
	}
	return ids[len(ids)-1]
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// refuseIntruder dials a node of the running job from the test process
// as one of the job's other nodes, pinning the node's certificate but with
// a key of its own and a wrong secret: TLS refuses it (the node pins its
// peers' certificates), the link never comes up, and the node counts the
// refusal as tls.
func refuseIntruder(t *testing.T, c *splitCluster, job string) {
	// n3 is dialed by n1 and n2 (the lower id dials); claiming to be n1
	// makes this end dial it.
	target := c.node(t, "n3")
	refused := map[string]string{"reason": "tls"}
	before, _ := target.metric(t, "svc_dataplane_connections_refused_total", refused)
	sb, err := target.get("/status")
	if err != nil {
		t.Fatal(err)
	}
	var pre struct {
		DataPlane *dataplane.Status `json:"data_plane"`
	}
	if err := json.Unmarshal(sb, &pre); err != nil || pre.DataPlane == nil || pre.DataPlane.Fingerprint == "" {
		t.Fatalf("%s /status data_plane without a fingerprint: %s (%v)", target.id, sb, err)
	}
	srv, err := dataplane.Listen(dataplane.Options{Addr: net.JoinHostPort(c.lab.HostIP, "0"), NodeID: "n1",
		Logger: slog.New(slog.DiscardHandler), HeartbeatInterval: 200 * time.Millisecond, HeartbeatTimeout: time.Second})
	if err != nil {
		t.Fatalf("dataplane.Listen: %v", err)
	}
	defer srv.Close()
	wrong := make([]byte, 32)
	_, _ = rand.Read(wrong)
	m, err := srv.Join(job, wrong, map[string]dataplane.Peer{"n3": {Addr: target.dataAddress(), Fingerprint: pre.DataPlane.Fingerprint}})
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if s, err := m.Send(ctx, "n3", "intruder", "intruder"); err == nil {
		_ = s.Close()
		t.Fatal("a link with an unpinned key came up")
	} else if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, dataplane.ErrLinkBroken) {
		t.Logf("Send with an unpinned key: %v", err)
	}
	if m.Up("n3") {
		t.Fatal("the link to n3 is up with an unpinned key")
	}
	for _, ms := range srv.Status().Jobs {
		t.Logf("intruder's view of the mesh %s: %+v", ms.Job, ms.Links)
	}
	var after float64
	deadline := time.Now().Add(5 * time.Second)
	for after <= before {
		if time.Now().After(deadline) {
			b, _ := target.get("/metrics")
			var lines []string
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "svc_dataplane_connections_refused") {
					lines = append(lines, l)
				}
			}
			t.Fatalf("%s: svc_dataplane_connections_refused_total{reason=tls} %v, before %v; samples: %v", target.id, after, before, lines)
		}
		time.Sleep(100 * time.Millisecond)
		after, _ = target.metric(t, "svc_dataplane_connections_refused_total", refused)
	}
	b, err := target.get("/status")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		DataPlane *dataplane.Status `json:"data_plane"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.DataPlane == nil || st.DataPlane.Refused < 1 {
		t.Fatalf("%s /status data_plane %+v: want connections_refused >= 1 (%s)", target.id, st.DataPlane, b)
	}
	t.Logf("%s refused %v connection(s) from an unpinned key; /status data_plane: address %s, %d refused, jobs %+v",
		target.id, after-before, st.DataPlane.Address, st.DataPlane.Refused, st.DataPlane.Jobs)
}

// delayLink adds splitDelay to the traffic toward n on the data plane:
// with netem on n's veth when the kernel has it, else through a userspace
// relay on the bridge that n now advertises as its data host (n restarts
// for that). It returns how.
func delayLink(t *testing.T, c *splitCluster, n *splitNode) string {
	t.Helper()
	ms := strconv.Itoa(int(splitDelay.Milliseconds())) + "ms"
	out, err := exec.Command("tc", "qdisc", "add", "dev", n.host.Veth, "root", "netem", "delay", ms).CombinedOutput()
	if err == nil {
		t.Cleanup(func() { _ = exec.Command("tc", "qdisc", "del", "dev", n.host.Veth, "root").Run() })
		return "tc netem on " + n.host.Veth
	}
	t.Logf("tc netem unavailable (%v: %s); delaying through a relay", err, strings.TrimSpace(string(out)))
	relay := startDelayRelay(t, net.JoinHostPort(c.lab.HostIP, strconv.Itoa(splitDataPort)), net.JoinHostPort(n.host.IP, strconv.Itoa(splitDataPort)), splitDelay)
	n.stop(t)
	n.dataHost = c.lab.HostIP
	n.writeConfig(t, c.hub.url())
	n.start(t)
	c.hub.waitStatus(t, n.id, "online")
	waitUntil(t, n.id+" advertising the relay", func() bool {
		v, ok := c.hub.nodeView(n.id)
		return ok && v.DataAddress == n.dataAddress()
	})
	t.Cleanup(func() {
		t.Logf("relay carried %d bytes toward %s, %d back", relay.toTarget.Load(), n.id, relay.fromTarget.Load())
	})
	return "relay " + relay.ln.Addr().String() + " -> " + n.host.Addr(splitDataPort)
}

// nodePeak is a node's memory peak while watched.
type nodePeak struct {
	rss, hwm int64
	samples  int
}

// watchMemory samples the nodes' RSS every 100 ms until the returned
// function is called, which returns the peaks per node.
func watchMemory(t *testing.T, c *splitCluster) func() map[string]nodePeak {
	t.Helper()
	var mu sync.Mutex // guards peaks
	peaks := map[string]nodePeak{}
	done := make(chan struct{})
	stopped := make(chan struct{})
	pids := map[string]int{}
	for id, n := range c.nodes {
		pids[id] = n.proc.Process.Pid
	}
	go func() {
		defer close(stopped)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			for id, pid := range pids {
				rss, hwm, err := procMemory(pid)
				if err != nil {
					continue
				}
				mu.Lock()
				p := peaks[id]
				p.rss, p.hwm, p.samples = max(p.rss, rss), max(p.hwm, hwm), p.samples+1
				peaks[id] = p
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	stop := func() map[string]nodePeak {
		once.Do(func() { close(done); <-stopped })
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(peaks)
	}
	t.Cleanup(func() { stop() })
	return stop
}

// delayRelay forwards every TCP connection it accepts to target, holding
// each chunk read toward target for delay before writing it: latency on
// one side of a link, like netem on that side's interface. Each direction
// buffers at most relayChunks chunks of relayChunk bytes; past that the
// relay stops reading, and TCP's own flow control pushes back on the
// sender.
type delayRelay struct {
	ln                   net.Listener
	target               string
	delay                time.Duration
	toTarget, fromTarget atomic.Int64 // bytes carried

	mu    sync.Mutex // guards conns
	conns []net.Conn
	wg    sync.WaitGroup
}

const (
	relayChunk  = 32 << 10
	relayChunks = 64
)

func startDelayRelay(t *testing.T, listen, target string, delay time.Duration) *delayRelay {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatalf("relay: %v", err)
	}
	r := &delayRelay{ln: ln, target: target, delay: delay}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.close)
	return r
}

func (r *delayRelay) accept() {
	defer r.wg.Done()
	for {
		in, err := r.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.DialTimeout("tcp", r.target, 5*time.Second)
		if err != nil {
			in.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, in, out)
		r.mu.Unlock()
		r.wg.Add(2)
		go r.pipe(out, in, r.delay, &r.toTarget)
		go r.pipe(in, out, 0, &r.fromTarget)
	}
}

// pipe copies src to dst, each chunk delay after it was read.
func (r *delayRelay) pipe(dst, src net.Conn, delay time.Duration, n *atomic.Int64) {
	defer r.wg.Done()
	type chunk struct {
		b  []byte
		at time.Time
	}
	q := make(chan chunk, relayChunks)
	go func() {
		defer close(q)
		for {
			b := make([]byte, relayChunk)
			k, err := src.Read(b)
			if k > 0 {
				q <- chunk{b[:k], time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		time.Sleep(time.Until(c.at.Add(delay)))
		if _, err := dst.Write(c.b); err != nil {
			src.Close()
			dst.Close()
			for range q {
			}
			return
		}
		n.Add(int64(len(c.b)))
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

func (r *delayRelay) close() {
	r.ln.Close()
	r.mu.Lock()
	for _, c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// TestDelayRelay checks the relay the split test falls back to: bytes
// arrive intact and in order, toward the target no sooner than its delay.
func TestDelayRelay(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	const delay = 150 * time.Millisecond
	r := startDelayRelay(t, "127.0.0.1:0", echo.Addr().String(), delay)
	c, err := net.Dial("tcp", r.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := make([]byte, 4<<20) // more than the relay buffers
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	began := time.Now()
	go func() { _, _ = c.Write(msg); _ = c.(*net.TCPConn).CloseWrite() }()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < delay {
		t.Errorf("echo through the relay took %v, less than its delay %v", took, delay)
	}
	if !slices.Equal(got, msg) {
		t.Fatalf("echo through the relay: %d bytes, want the %d sent, in order", len(got), len(msg))
	}
	if r.toTarget.Load() != int64(len(msg)) || r.fromTarget.Load() != int64(len(msg)) {
		t.Fatalf("relay counted %d bytes toward the target, %d back; want %d each", r.toTarget.Load(), r.fromTarget.Load(), len(msg))
	}
}
