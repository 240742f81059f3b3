package hub

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
	"github.com/google/go-cmp/cmp"
)

// splitJobSpec is testJobSpec with the keyed aggregate and its sink at
// parallelism 2: three tasks, src#0, counts#0 and counts#1.
func splitJobSpec(id string, v int) string {
	return strings.Replace(strings.Replace(testJobSpec(id, v, 128),
		`{"id": "counts", "kind": "aggregate",`, `{"id": "counts", "kind": "aggregate", "parallelism": 2,`, 1),
		`{"id": "out", "kind": "sink"}`, `{"id": "out", "kind": "sink", "parallelism": 2}`, 1)
}

// newSplitAgent is a jobAgent that advertises network_shuffle and a data
// address, as an Agent with health_check.data_port does.
func newSplitAgent(t *testing.T, th *testHub, nodeID string) *jobAgent {
	t.Helper()
	a := &jobAgent{testAgent: newTestAgent(th, nodeID), jobs: map[string]wire.JobObservation{}}
	r := a.call(t, "POST", "/register", wire.RegisterRequest{NodeID: nodeID, BootID: a.bootID, Version: "test",
		ProtocolVersion: wire.ProtocolVersion, Capabilities: append(slices.Clone(jobCaps), wire.CapabilityNetworkShuffle),
		DataAddress: dataAddr(nodeID), DataFingerprint: dataFingerprint(nodeID), LeaseTTLMS: time.Minute.Milliseconds(), NodeCredential: credentialOf(nodeID)}, nodeTokenFor(testToken))
	if r.status != http.StatusOK {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	a.session = decode[wire.RegisterResponse](t, r).SessionToken
	a.report(t)
	return a
}

func dataAddr(nodeID string) string { return "127.0.0.1:7" + strings.TrimPrefix(nodeID, "n") + "00" }

// dataFingerprint is a fingerprint of the node's own, as its data plane's
// certificate would give it.
func dataFingerprint(nodeID string) string {
	sum := sha256.Sum256([]byte(nodeID))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// only returns the commands of job id among cmds.
func only(cmds []wire.Command, id string) []wire.Command {
	return slices.DeleteFunc(slices.Clone(cmds), func(c wire.Command) bool { return c.ResourceID != id })
}

func TestJobSplit(t *testing.T) {
	path := dbPath(t)
	th := serve(t, path, testToken, true)
	agents := map[string]*jobAgent{}
	for _, id := range []string{"n1", "n2", "n3"} {
		agents[id] = newSplitAgent(t, th, id)
	}
	plain := newJobAgent(t, th, "n4") // no data plane
	spec := splitJobSpec("j1", 1)

	// Refused: a bad placement, a named node without a data plane.
	p := th.op(t, "POST", "/jobs", `{"spec": `+spec+`, "desired_state": "running", "placement": "spread"}`, 422).problem(t)
	if b := fmt.Sprint(p.Details); p.Code != "validation_failed" || !strings.Contains(b, "placement") {
		t.Fatalf("bad placement: %+v", p)
	}
	p = th.op(t, "POST", "/jobs", `{"spec": `+spec+`, "desired_state": "running", "placement": "split", "node_ids": ["n1", "n4"]}`,
		http.StatusConflict).problem(t)
	if nodes, _ := p.Details["nodes"].(map[string]any); p.Code != "incompatible_capability" || len(nodes) != 1 ||
		nodes["n4"] != "missing capability network_shuffle" {
		t.Fatalf("ineligible node: %+v", p)
	}
	p = th.op(t, "POST", "/jobs", `{"spec": `+spec+`, "desired_state": "running", "placement": "split", "node_ids": ["n9"]}`,
		http.StatusConflict).problem(t)
	if p.Code != "node_unavailable" {
		t.Fatalf("unknown node: %+v", p)
	}
	audit := decode[wire.Page[map[string]any]](t, th.op(t, "GET", "/audit?page_size=100", "", http.StatusOK))
	var codes []any
	for _, rec := range audit.Items {
		if rec["action"] == ActionJobCreate && rec["outcome"] == "rejected" {
			codes = append(codes, rec["failure_code"])
		}
	}
	if !slices.Contains(codes, any("incompatible_capability")) || !slices.Contains(codes, any("node_unavailable")) {
		t.Fatalf("audit failure codes %v", codes)
	}

	// Split over every eligible node: n4 is not one.
	created := decode[wire.JobDesiredResponse](t, th.op(t, "POST", "/jobs",
		`{"spec": `+spec+`, "desired_state": "running", "placement": "split"}`, http.StatusAccepted))
	wantTasks := map[string]string{"src#0": "n1", "counts#0": "n2", "counts#1": "n3"}
	wantPorts := map[string]string{"n1": dataAddr("n1"), "n2": dataAddr("n2"), "n3": dataAddr("n3")}
	wantFingerprints := map[string]string{"n1": dataFingerprint("n1"), "n2": dataFingerprint("n2"), "n3": dataFingerprint("n3")}
	if created.NodeID != "n1" {
		t.Fatalf("coordinator %s, want n1 (the node of src#0)", created.NodeID)
	}
	var secret string
	var opIDs []string
	for _, id := range []string{"n1", "n2", "n3"} {
		cmds := agents[id].commands(t, 5*time.Second)
		if len(cmds) != 1 || cmds[0].Operation != wire.CommandJobStart {
			t.Fatalf("%s: commands %+v", id, cmds)
		}
		c := cmds[0].Payload
		if !cmp.Equal(c.TaskNodes, wantTasks) || !cmp.Equal(c.NodeDataPorts, wantPorts) || len(c.DataSecret) != 43 {
			t.Fatalf("%s: job_start payload task_nodes %v node_data_ports %v secret length %d", id, c.TaskNodes, c.NodeDataPorts, len(c.DataSecret))
		}
		if !cmp.Equal(c.NodeDataFingerprints, wantFingerprints) {
			t.Fatalf("%s: job_start node_data_fingerprints %v, want %v", id, c.NodeDataFingerprints, wantFingerprints)
		}
		if secret != "" && c.DataSecret != secret {
			t.Fatalf("%s: another data secret", id)
		}
		secret = c.DataSecret
		opIDs = append(opIDs, cmds[0].CommandID)
	}
	if cmds := plain.commands(t, 50*time.Millisecond); len(cmds) != 0 {
		t.Fatalf("n4 got %+v", cmds)
	}

	// Converged only when every node is: n1 alone is not enough.
	agents["n1"].jobs["j1"] = wire.JobObservation{ID: "j1", State: wire.JobRunning, Generation: 1, Version: 1,
		Tasks: []wire.JobTask{{ID: "src#0", State: "running"}}}
	agents["n1"].observe(t)
	j := th.job(t, "j1")
	if j.Convergence == wire.ConvergenceInSync || (j.ConvergenceNode != "n2" && j.ConvergenceNode != "n3") {
		t.Fatalf("one node of three observed: %s (%s at %s)", j.Convergence, j.ConvergenceReason, j.ConvergenceNode)
	}
	for _, id := range []string{"n2", "n3"} {
		o := wire.JobObservation{ID: "j1", State: wire.JobRunning, Generation: 1, Version: 1}
		for task, n := range wantTasks {
			if n == id {
				o.Tasks = append(o.Tasks, wire.JobTask{ID: task, State: "running"})
			}
		}
		agents[id].jobs["j1"] = o
		agents[id].observe(t)
	}
	j = th.waitJobConvergence(t, "j1", wire.ConvergenceInSync)
	if j.ConvergenceNode != "" || j.Placement.Mode != wire.PlacementSplit || !cmp.Equal(j.Placement.Nodes, []string{"n1", "n2", "n3"}) ||
		!cmp.Equal(j.Placement.TaskNodes, wantTasks) || j.NodeID != "n1" {
		t.Fatalf("job: %+v", j)
	}
	d := decode[wire.JobDetail](t, th.op(t, "GET", "/jobs/j1/detail", "", http.StatusOK))
	if d.TasksTotal != 3 || d.TasksObserved != 3 {
		t.Fatalf("detail: %+v", d)
	}
	for _, a := range d.Assignment {
		if a.NodeID != wantTasks[a.TaskID] || !a.Observed || a.State != "running" {
			t.Errorf("assignment %+v", a)
		}
	}

	// A checkpoint goes to the coordinator only.
	ck := decode[wire.JobCommandResponse](t, th.op(t, "POST", "/jobs/j1/checkpoints", "", http.StatusAccepted))
	if ck.NodeID != "n1" {
		t.Fatalf("checkpoint on %s", ck.NodeID)
	}
	if cmds := agents["n1"].runAll(t); len(cmds) != 1 || cmds[0].Operation != wire.CommandJobCheckpoint {
		t.Fatalf("n1: %+v", cmds)
	}
	for _, id := range []string{"n2", "n3"} {
		if cmds := agents[id].commands(t, 50*time.Millisecond); len(cmds) != 0 {
			t.Fatalf("%s got %+v", id, cmds)
		}
	}

	// A stop reaches every node, without the placement; every node is told
	// of the savepoint (the coordinator takes it, the others wait for it).
	th.op(t, "PUT", "/jobs/j1/desired-state", `{"state": "stopped", "savepoint": true}`, http.StatusAccepted)
	for _, id := range []string{"n1", "n2", "n3"} {
		cmds := only(agents[id].runAll(t), "j1")
		if len(cmds) != 1 || cmds[0].Operation != wire.CommandJobStop || cmds[0].Payload.DataSecret != "" || cmds[0].Payload.TaskNodes != nil ||
			!cmds[0].Payload.Savepoint {
			t.Fatalf("%s: %+v", id, cmds)
		}
		opIDs = append(opIDs, cmds[0].CommandID)
	}
	th.waitJobConvergence(t, "j1", wire.ConvergenceInSync)

	// Move over n2 and n3: n1 gets the fence stop, the others a start with
	// a new secret.
	mv := decode[wire.JobDesiredResponse](t, th.op(t, "POST", "/jobs/j1/actions/move", `{"node_ids": ["n3", "n2"]}`, http.StatusAccepted))
	if mv.NodeID != "n3" {
		t.Fatalf("move: coordinator %s, want n3 (first named)", mv.NodeID)
	}
	if cmds := only(agents["n1"].runAll(t), "j1"); len(cmds) != 1 || cmds[0].Operation != wire.CommandJobStop {
		t.Fatalf("n1 after the move: %+v", cmds)
	}
	for _, id := range []string{"n2", "n3"} { // the moved job stays stopped
		if cmds := only(agents[id].runAll(t), "j1"); len(cmds) != 1 || cmds[0].Operation != wire.CommandJobStop {
			t.Fatalf("%s after the move: %+v", id, cmds)
		}
	}
	th.op(t, "POST", "/jobs/j1/actions/start", "", http.StatusAccepted)
	for _, id := range []string{"n2", "n3"} {
		cmds := only(agents[id].commands(t, 5*time.Second), "j1")
		last := cmds[len(cmds)-1]
		if len(cmds) != 1 || last.Operation != wire.CommandJobStart || last.Payload.DataSecret == secret || len(last.Payload.DataSecret) != 43 ||
			len(last.Payload.NodeDataPorts) != 2 || last.Payload.TaskNodes["src#0"] != "n3" {
			t.Fatalf("%s after the move: %+v", id, cmds)
		}
	}

	// The secrets are nowhere but in the commands.
	reads := []string{"/jobs/j1", "/jobs/j1/detail", "/jobs", "/events?page_size=100", "/audit?page_size=100", "/operations?page_size=100"}
	for _, id := range opIDs {
		reads = append(reads, "/operations/"+id)
	}
	for _, r := range reads {
		body := string(th.op(t, "GET", r, "", http.StatusOK).body)
		if strings.Contains(body, secret) || strings.Contains(body, "data_secret") {
			t.Errorf("GET %s shows the data secret", r)
		}
	}
	th.stop()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM intents WHERE instr(payload, ?) > 0 OR instr(payload, 'data_secret') > 0`, secret).Scan(&n); err != nil {
		t.Fatal(err)
	}
	var stored int
	if err := db.QueryRow(`SELECT COUNT(*) FROM jobs WHERE job_id = 'j1' AND length(data_secret) = 43 AND data_secret != ?`, secret).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if n != 0 || stored != 1 {
		t.Fatalf("intents holding the secret: %d; jobs rows with the new one: %d", n, stored)
	}
}

// TestJobSplitOneNode: without names a split needs two eligible nodes;
// naming one splits over it alone. Validation checks the data plane per
// node for a split placement.
func TestJobSplitOneNode(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	a := newSplitAgent(t, th, "n1")
	newJobAgent(t, th, "n4")
	spec := splitJobSpec("j1", 1)

	p := th.op(t, "POST", "/jobs", `{"spec": `+spec+`, "desired_state": "running", "placement": "split"}`, http.StatusConflict).problem(t)
	if nodes, _ := p.Details["nodes"].(map[string]any); p.Code != "incompatible_capability" || len(nodes) != 1 || nodes["n4"] == nil {
		t.Fatalf("one eligible node, none named: %+v", p)
	}
	th.op(t, "POST", "/jobs", `{"spec": `+spec+`, "desired_state": "running", "placement": "split", "node_ids": ["n1"]}`, http.StatusAccepted)
	cmds := a.commands(t, 5*time.Second)
	if len(cmds) != 1 || len(cmds[0].Payload.TaskNodes) != 3 || len(cmds[0].Payload.NodeDataPorts) != 1 || cmds[0].Payload.DataSecret == "" {
		t.Fatalf("split over one node: %+v", cmds)
	}

	th.op(t, "POST", "/jobs/validate", `{"spec": `+spec+`, "node_ids": ["n1"], "placement": "mesh"}`, 422)
	for _, tc := range []struct {
		placement string
		want      map[string]string // node -> network_shuffle status
	}{
		{"split", map[string]string{"n1": checkPassed, "n4": checkFailed, "n9": checkFailed}},
		{"colocated", map[string]string{"n1": checkSkipped, "n4": checkSkipped, "n9": checkSkipped}},
	} {
		v := decode[wire.JobValidateResponse](t, th.op(t, "POST", "/jobs/validate",
			`{"spec": `+spec+`, "node_ids": ["n1", "n4", "n9"], "placement": "`+tc.placement+`"}`, http.StatusOK))
		got := map[string]string{}
		for _, n := range v.Nodes {
			for _, c := range n.Checks {
				if c.Check == checkNetworkShuffle {
					got[n.NodeID] = c.Status
				}
			}
		}
		if !cmp.Equal(got, tc.want) {
			t.Errorf("%s: network_shuffle checks %v, want %v", tc.placement, got, tc.want)
		}
	}
}

// TestDataFingerprintChecked: a data_fingerprint that is not "sha256:" and
// 64 lowercase hex digits is a 422 at register and heartbeat; a valid one
// is the node's, in its view, and follows a heartbeat's change.
func TestDataFingerprintChecked(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	a := newTestAgent(th, "n1")
	bad := []string{"sha256:XYZ", "md5:" + strings.Repeat("0", 64), strings.Repeat("a", 71), "sha256:" + strings.Repeat("A", 64)}
	for _, fp := range bad {
		r := a.call(t, "POST", "/register", wire.RegisterRequest{NodeID: "n1", BootID: a.bootID, Version: "test",
			ProtocolVersion: wire.ProtocolVersion, DataAddress: dataAddr("n1"), DataFingerprint: fp}, nodeTokenFor(testToken))
		if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "data_fingerprint") {
			t.Fatalf("register with data_fingerprint %q: %d %s", fp, r.status, r.body)
		}
	}
	a2 := newSplitAgent(t, th, "n1")
	nodeView := func() NodeView {
		t.Helper()
		r := th.do(t, "GET", APIPrefix+"/nodes/n1", "", "Authorization", "Bearer "+testToken)
		if r.status != http.StatusOK {
			t.Fatalf("GET node: %d %s", r.status, r.body)
		}
		return decode[NodeView](t, r)
	}
	if view := nodeView(); view.DataFingerprint != dataFingerprint("n1") {
		t.Fatalf("node view data_fingerprint %q, want %q", view.DataFingerprint, dataFingerprint("n1"))
	}
	hb := wire.HeartbeatRequest{BootID: a2.bootID, Capabilities: append(slices.Clone(jobCaps), wire.CapabilityNetworkShuffle), DataAddress: dataAddr("n1")}
	hb.DataFingerprint = bad[0]
	if r := a2.call(t, "POST", "/heartbeat", hb, a2.session); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("heartbeat with a bad data_fingerprint: %d %s", r.status, r.body)
	}
	hb.DataFingerprint = dataFingerprint("n1-rekeyed")
	if r := a2.call(t, "POST", "/heartbeat", hb, a2.session); r.status != http.StatusOK {
		t.Fatalf("heartbeat: %d %s", r.status, r.body)
	}
	if view := nodeView(); view.DataFingerprint != hb.DataFingerprint {
		t.Fatalf("node view data_fingerprint %q after the heartbeat, want %q", view.DataFingerprint, hb.DataFingerprint)
	}
}
