package agent_test

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/agent"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/dataplane"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/secretref"
	"github.com/flowplane/flowplane/internal/wire"
)

// testDataSecret is a job's data secret as the Hub sends it: 32 bytes,
// base64url.
var testDataSecret = base64.RawURLEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

// planTasks is every task of a Hub job spec's plan, placed on node.
func planTasks(t *testing.T, spec json.RawMessage, node string) map[string]string {
	t.Helper()
	doc, _ := json.Marshal(map[string]any{"streams": []any{}, "jobs": []json.RawMessage{spec}})
	cfg, err := config.Materialize(doc, config.JSON, component.Default, secretref.Resolver{})
	if err != nil {
		t.Fatal(err)
	}
	p, ps := job.Build("spec", cfg.Jobs[0])
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	tasks := map[string]string{}
	for _, tk := range p.Tasks {
		tasks[tk.ID] = node
	}
	return tasks
}

// checkNoDataSecret fails when the data secret shows in the node's logs,
// in anything the Agent sent the Hub (reports, job observations, results)
// or, when inState, in the Agent's state file.
func checkNoDataSecret(t *testing.T, hub *testHub, tn *testNode, stateDir string, inState bool) {
	t.Helper()
	if strings.Contains(tn.logs.String(), testDataSecret) {
		t.Error("the data secret is in the logs")
	}
	hub.mu.Lock()
	for _, r := range hub.requests {
		if strings.Contains(string(r.Body), testDataSecret) {
			t.Errorf("the data secret is in the body of %s %s", r.Method, r.Path)
		}
	}
	hub.mu.Unlock()
	b, _ := os.ReadFile(filepath.Join(stateDir, "agent", "hub-state.json"))
	if strings.Contains(string(b), testDataSecret) != inState {
		t.Errorf("the data secret in hub-state.json: %v, want %v", !inState, inState)
	}
}

// TestSplitJobWithoutDataPlane: a node whose engine has no data plane
// advertises neither network_shuffle nor its configured data address; a
// job_start for a split placement reaches the engine with its task_nodes
// and fails incompatible_capability; a data secret that is not base64url
// fails invalid_payload; the secret is never logged, sent or kept.
func TestSplitJobWithoutDataPlane(t *testing.T) {
	hub := newTestHub(t, testNodeToken)
	dir, stateDir := t.TempDir(), t.TempDir()
	tn := startNode(t, nodeOptions{stateDir: stateDir, hubURLs: []string{hub.URL + "/api/v1"}, jobs: true,
		tune: func(o *agent.Options) { o.DataAddress = "127.0.0.1:7000" }})
	hub.waitFor(t, "register", func() bool { return len(hub.registers) > 0 })
	hub.mu.Lock()
	reg := hub.registers[0]
	hub.mu.Unlock()
	if slices.Contains(reg.Capabilities, wire.CapabilityNetworkShuffle) || reg.DataAddress != "" {
		t.Errorf("register without a data plane: capabilities %v, data_address %q", reg.Capabilities, reg.DataAddress)
	}

	spec := hubJobSpec(t, "split", dir, nil)
	tasks := planTasks(t, spec, testNodeID)
	hub.enqueue(jobCmd("c-split", "a1", wire.CommandJobStart, "split", 1, wire.JobCommand{Spec: spec, JobVersion: 1,
		TaskNodes: tasks, NodeDataPorts: map[string]string{testNodeID: "127.0.0.1:7000"}, DataSecret: testDataSecret}))
	r := hub.waitFinal(t, "c-split", "a1")
	if r.State != wire.ResultFailed || r.Failure == nil || r.Failure.Class != "permanent" || r.Failure.Code != "incompatible_capability" ||
		!strings.Contains(r.Failure.Message, "no data plane (health_check.data_port)") {
		t.Errorf("split start without a data plane: %s %+v, want permanent incompatible_capability", r.State, r.Failure)
	}
	st, err := tn.eng.Job("split")
	if err != nil || !maps.Equal(st.TaskNodes, tasks) || st.State != engine.JobFailed {
		t.Errorf("engine's job: %v, task nodes %v, state %s; want the command's task nodes, failed", err, st.TaskNodes, st.State)
	}

	hub.enqueue(jobCmd("c-badsecret", "a1", wire.CommandJobStart, "split", 2, wire.JobCommand{Spec: spec, JobVersion: 1,
		TaskNodes: tasks, NodeDataPorts: map[string]string{testNodeID: "127.0.0.1:7000"}, DataSecret: "not*base64url*" + testDataSecret}))
	r = hub.waitFinal(t, "c-badsecret", "a1")
	if r.State != wire.ResultFailed || r.Failure == nil || r.Failure.Code != "invalid_payload" || !strings.Contains(r.Failure.Message, "data_secret is not base64url") {
		t.Errorf("bad data secret: %s %+v, want invalid_payload", r.State, r.Failure)
	}
	tn.stop()
	checkNoDataSecret(t, hub, tn, stateDir, false)
}

// TestSplitJobStartPersists needs the real data plane
// (internal/dataplane). A node with a data plane advertises it; a
// job_start for a split placement starts the node's share on the engine,
// joined to the job's mesh; the placement and secret are kept in
// hub-state.json (0600), and a restarted Agent starts the split job again
// on it. The secret shows nowhere else.
func TestSplitJobStartPersists(t *testing.T) {
	hub := newTestHub(t, testNodeToken)
	dir, stateDir := t.TempDir(), t.TempDir()
	opts := nodeOptions{stateDir: stateDir, hubURLs: []string{hub.URL + "/api/v1"}, jobs: true, dataPlane: true}
	tn := startNode(t, opts)
	hub.waitFor(t, "register", func() bool { return len(hub.registers) > 0 })
	hub.mu.Lock()
	reg := hub.registers[0]
	hub.mu.Unlock()
	if !slices.Contains(reg.Capabilities, wire.CapabilityNetworkShuffle) || reg.DataAddress != tn.dp.Addr() {
		t.Errorf("register with a data plane: capabilities %v, data_address %q; want network_shuffle at %s", reg.Capabilities, reg.DataAddress, tn.dp.Addr())
	}

	spec := hubJobSpec(t, "split", dir, nil)
	tasks := planTasks(t, spec, testNodeID)
	ports := map[string]string{testNodeID: tn.dp.Addr()}
	hub.enqueue(jobCmd("c-split", "a1", wire.CommandJobStart, "split", 1, wire.JobCommand{Spec: spec, JobVersion: 1,
		TaskNodes: tasks, NodeDataPorts: ports, DataSecret: testDataSecret}))
	succeeded(t, hub.waitFinal(t, "c-split", "a1"))
	joined := func(dp *engine.DataPlane) bool {
		return slices.ContainsFunc(dp.Status().Jobs, func(m dataplane.MeshStatus) bool { return m.Job == "split" })
	}
	if st, _ := tn.eng.Job("split"); !maps.Equal(st.TaskNodes, tasks) || !joined(tn.dp) {
		t.Errorf("engine's job task nodes %v, data plane %+v; want the command's, joined", st.TaskNodes, tn.dp.Status())
	}
	hub.waitJobObs(t, "split", "running at generation 1", func(o wire.JobObservation) bool {
		return o.State == wire.JobRunning && o.Generation == 1
	})
	path := filepath.Join(stateDir, "agent", "hub-state.json")
	var file struct {
		Version int                        `json:"version"`
		Jobs    map[string]agent.JobDesire `json:"jobs"`
	}
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &file)
	}
	if err != nil {
		t.Fatal(err)
	}
	d := file.Jobs["split"]
	if file.Version != 4 || !maps.Equal(d.TaskNodes, tasks) || !maps.Equal(d.NodeDataPorts, ports) || d.DataSecret != testDataSecret {
		t.Errorf("state file version %d, desire %v %v (secret kept: %v)", file.Version, d.TaskNodes, d.NodeDataPorts, d.DataSecret == testDataSecret)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("hub-state.json mode: %v %v, want 0600", fi.Mode(), err)
	}
	tn.stop()
	checkNoDataSecret(t, hub, tn, stateDir, true)

	// The data plane's address changes with the restart; the recorded
	// placement names only this node, whose own address is not dialled.
	tn = startNode(t, opts)
	eventually(t, "the split job running again", func() bool {
		st, err := tn.eng.Job("split")
		return err == nil && st.State == engine.JobRunning
	})
	if st, _ := tn.eng.Job("split"); !maps.Equal(st.TaskNodes, tasks) || st.Generation != 1 || !joined(tn.dp) {
		t.Errorf("re-applied job: task nodes %v, generation %d, data plane %+v", st.TaskNodes, st.Generation, tn.dp.Status())
	}
	tn.stop()
	checkNoDataSecret(t, hub, tn, stateDir, true)
}
