package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/hub"
	"github.com/flowplane/flowplane/internal/wire"
)

// fakeSecret is the secret every fake configuration_apply carries: it must
// appear in nothing the agents send and nothing this program prints.
const fakeSecret = "s3cr3t-value-hubload"

// fakeHub speaks just enough of the agent protocol and the rollout API for
// rollout mode: it queues commands per node, long-polls, records every
// result and report, and drives each rollout wave by wave from the
// agents' reports (a wave passes when all its nodes report the target).
type fakeHub struct {
	t     *testing.T
	mu    sync.Mutex
	nodes map[string]*fakeNode // by node id
	byTok map[string]string    // session token -> node id
	ros   map[string]*wire.Rollout
	gens  map[string]int64 // node -> configuration generation
	cmdN  int
	// bodies are every agent result and report body, raw.
	bodies []string
	// results["any"] are the results of succeeded commands, in order.
	results map[string][]json.RawMessage
}

type fakeNode struct {
	queue  []wire.Command
	wake   chan struct{} // closed and replaced when a command is queued
	report wire.ReportConfiguration
	caps   []string
}

func newFakeHub(t *testing.T) *fakeHub {
	return &fakeHub{t: t, nodes: map[string]*fakeNode{}, byTok: map[string]string{}, ros: map[string]*wire.Rollout{},
		gens: map[string]int64{}, results: map[string][]json.RawMessage{}}
}

func (f *fakeHub) node(id string) *fakeNode {
	n := f.nodes[id]
	if n == nil {
		n = &fakeNode{wake: make(chan struct{})}
		f.nodes[id] = n
	}
	return n
}

// enqueue queues a command for node (f.mu held).
func (f *fakeHub) enqueue(node, op string, gen int64, version string, payload wire.CommandPayload) {
	f.cmdN++
	n := f.node(node)
	n.queue = append(n.queue, wire.Command{CommandID: "cmd-" + strconv.Itoa(f.cmdN), AttemptID: "att-" + strconv.Itoa(f.cmdN),
		Operation: op, NodeID: node, ResourceID: wire.ConfigResource, Generation: gen, ConfigVersion: version, Payload: payload})
	close(n.wake)
	n.wake = make(chan struct{})
}

func (f *fakeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	path := strings.TrimPrefix(r.URL.Path, apiPrefix)
	f.mu.Lock()
	self := f.byTok[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	f.mu.Unlock()
	reply := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	switch {
	case path == "/agent/register":
		var req wire.RegisterRequest
		_ = json.Unmarshal(body, &req)
		tok := "sess-" + req.NodeID
		f.mu.Lock()
		f.byTok[tok] = req.NodeID
		f.node(req.NodeID).caps = req.Capabilities
		f.mu.Unlock()
		reply(wire.RegisterResponse{SessionToken: tok, LeaseTTLMS: 15000, HeartbeatIntervalMS: 1000})
	case self == "" && strings.HasPrefix(path, "/agent/"):
		w.WriteHeader(http.StatusUnauthorized)
	case path == "/agent/heartbeat":
		w.WriteHeader(http.StatusNoContent)
	case path == "/agent/report":
		var rep wire.Report
		if err := json.Unmarshal(body, &rep); err != nil {
			f.t.Errorf("report: %v", err)
		}
		f.mu.Lock()
		f.bodies = append(f.bodies, string(body))
		if rep.Configuration != nil {
			f.node(self).report = *rep.Configuration
		}
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case path == "/agent/commands":
		wait, _ := strconv.Atoi(r.URL.Query().Get("wait_ms"))
		timer := time.NewTimer(time.Duration(wait) * time.Millisecond)
		defer timer.Stop()
		for {
			f.mu.Lock()
			n := f.node(self)
			q, wake := n.queue, n.wake
			n.queue = nil
			f.mu.Unlock()
			if len(q) > 0 {
				reply(wire.Page[wire.Command]{Items: q})
				return
			}
			select {
			case <-wake:
			case <-timer.C:
				reply(wire.Page[wire.Command]{Items: []wire.Command{}})
				return
			case <-r.Context().Done():
				return
			}
		}
	case strings.HasPrefix(path, "/agent/commands/"):
		var res wire.CommandResult
		_ = json.Unmarshal(body, &res)
		f.mu.Lock()
		f.bodies = append(f.bodies, string(body))
		if res.State == wire.ResultSucceeded {
			f.results["any"] = append(f.results["any"], res.Result)
		}
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case path == "/status":
		f.mu.Lock()
		n := len(f.nodes)
		f.mu.Unlock()
		reply(hub.Status{Ready: true, Nodes: hub.NodeTotals{Total: n, Online: n}})
	case path == "/rollouts" && r.Method == "POST":
		var req wire.RolloutCreateRequest
		if err := json.Unmarshal(body, &req); err != nil || req.Configuration == nil || req.BatchSize < 1 {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		ro := &wire.Rollout{RolloutID: "ro-" + strconv.Itoa(len(f.ros)+1), State: wire.RolloutRunning, NodeIDs: req.NodeIDs,
			GateTimeoutMS: req.GateTimeoutMS, CreatedAt: wire.At(time.Now()), Configuration: req.Configuration}
		for i := 0; i < len(req.NodeIDs); i += req.BatchSize {
			ro.Waves = append(ro.Waves, req.NodeIDs[i:min(i+req.BatchSize, len(req.NodeIDs))])
		}
		for i, id := range req.NodeIDs {
			ro.Nodes = append(ro.Nodes, wire.RolloutNode{NodeID: id, Wave: 1 + i/req.BatchSize, Phase: wire.RolloutNodeWaiting})
		}
		f.ros[ro.RolloutID] = ro
		f.stepLocked(ro)
		out := *ro
		f.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		reply(out)
	case strings.HasPrefix(path, "/rollouts/") && r.Method == "GET":
		f.mu.Lock()
		ro := f.ros[strings.TrimPrefix(path, "/rollouts/")]
		if ro != nil {
			f.stepLocked(ro)
		}
		var out wire.Rollout
		if ro != nil {
			out = *ro
			out.Nodes = append([]wire.RolloutNode(nil), ro.Nodes...)
		}
		f.mu.Unlock()
		if ro == nil {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		reply(out)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// stepLocked advances ro as far as the reports allow (f.mu held): it
// starts the next wave (apply commands, with a secret) once the current
// one passed, and passes a node once it reports the target version.
func (f *fakeHub) stepLocked(ro *wire.Rollout) {
	for ro.State == wire.RolloutRunning {
		if ro.CurrentWave > 0 {
			done := true
			for i := range ro.Nodes {
				x := &ro.Nodes[i]
				if x.Wave != ro.CurrentWave || x.Phase == wire.RolloutNodePassed {
					continue
				}
				rep := f.node(x.NodeID).report
				if rep.HubVersion == x.VersionTarget && rep.Generation == f.gens[x.NodeID] {
					x.Phase = wire.RolloutNodePassed
				} else {
					done = false
				}
			}
			if !done {
				return
			}
		}
		if ro.CurrentWave == len(ro.Waves) {
			ro.State, ro.FinishedAt = wire.RolloutSucceeded, wire.At(time.Now())
			return
		}
		ro.CurrentWave++
		for i := range ro.Nodes {
			x := &ro.Nodes[i]
			if x.Wave != ro.CurrentWave {
				continue
			}
			f.gens[x.NodeID]++
			x.VersionTarget, x.Phase = "v"+strconv.FormatInt(f.gens[x.NodeID], 10), wire.RolloutNodeApplying
			f.enqueue(x.NodeID, wire.CommandConfigApply, f.gens[x.NodeID], x.VersionTarget, wire.CommandPayload{
				ConfigCommand: wire.ConfigCommand{Format: "yaml", Content: ro.Configuration.Content, Secrets: map[string]string{"TOKEN": fakeSecret}}})
		}
	}
}

// captureStdout runs fn with os.Stdout going to a pipe and returns what it printed.
func captureStdout(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	out := make(chan string)
	go func() { b, _ := io.ReadAll(r); out <- string(b) }()
	defer func() { os.Stdout = old }()
	fn()
	w.Close()
	os.Stdout = old
	return <-out
}

func TestRolloutModeAgainstFakeHub(t *testing.T) {
	f := newFakeHub(t)
	srv := httptest.NewServer(f)
	defer srv.Close()
	hut := &hubUnderTest{base: srv.URL, opToken: "op", nodeToken: "node", pid: os.Getpid(), logPath: "(fake)"}
	o := options{agents: 12, batch: 5, runs: 2, ramp: 50 * time.Millisecond, streams: 2, reportEvery: 2 * time.Second,
		waitMS: 1000, conns: connsShared, gateTimeoutMS: 60000, rolloutTimeout: 5 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	var err error
	printed := captureStdout(t, func() { err = runRollout(ctx, o, hut) })
	if err != nil {
		t.Fatalf("runRollout: %v\n%s", err, printed)
	}
	for _, want := range []string{"== hub rollout benchmark", "ro-1 succeeded", "ro-2 succeeded", "3 waves, 12 applies", "create -> succeeded over 2 run(s)"} {
		if !strings.Contains(printed, want) {
			t.Errorf("output lacks %q:\n%s", want, printed)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.nodes) != o.agents {
		t.Fatalf("%d nodes registered, want %d", len(f.nodes), o.agents)
	}
	for id, n := range f.nodes {
		if !strings.Contains(strings.Join(n.caps, ","), wire.CapabilityConfigControl) {
			t.Errorf("%s capabilities %v lack %s", id, n.caps, wire.CapabilityConfigControl)
		}
		// Two applies: Hub versions v1, v2; node versions v2, v3 (v1 booted).
		if want := (wire.ReportConfiguration{NodeVersion: "v3", HubVersion: "v2", Generation: 2}); n.report != want {
			t.Errorf("%s reported %+v, want %+v", id, n.report, want)
		}
	}
	for _, b := range append(f.bodies, printed) {
		if strings.Contains(b, fakeSecret) || strings.Contains(b, "hubload rollout run") {
			t.Fatalf("a payload leaked into a body or the output: %s", b)
		}
	}
	var r wire.ConfigApplyResult
	if err := json.Unmarshal(f.results["any"][0], &r); err != nil || r.ConfigVersion == "" || r.NodeVersion == "" || r.Added == nil {
		t.Errorf("apply result %s: %+v, %v", f.results["any"][0], r, err)
	}
}

func TestSimAgentConfigCommands(t *testing.T) {
	f := newFakeHub(t)
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := &client{base: srv.URL, hc: &http.Client{Timeout: 5 * time.Second}}
	a := newSimAgent(c, newRecorder(), "node", agentConfig{streams: 1, reportEvery: time.Second, waitMS: 1000, configControl: true}, "n1")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.register(ctx); err != nil {
		t.Fatal(err)
	}
	apply := wire.Command{CommandID: "c1", AttemptID: "a1", Operation: wire.CommandConfigApply, ResourceID: wire.ConfigResource,
		Generation: 4, ConfigVersion: "v7", Payload: wire.CommandPayload{ConfigCommand: wire.ConfigCommand{Content: "x", Secrets: map[string]string{"T": fakeSecret}}}}
	rollback := wire.Command{CommandID: "c2", AttemptID: "a2", Operation: wire.CommandConfigApply, ResourceID: wire.ConfigResource,
		Generation: 5, Payload: wire.CommandPayload{ConfigCommand: wire.ConfigCommand{NodeVersion: "v1"}}}
	tests := []struct {
		name   string
		cmd    wire.Command
		result string // JSON of the succeeded result
		report wire.ReportConfiguration
	}{
		{"validate", wire.Command{CommandID: "v", AttemptID: "av", Operation: wire.CommandConfigValidate}, string(validateResult), wire.ReportConfiguration{NodeVersion: "v1"}},
		{"diff", wire.Command{CommandID: "d", AttemptID: "ad", Operation: wire.CommandConfigDiff}, string(diffResult), wire.ReportConfiguration{NodeVersion: "v1"}},
		{"apply", apply, `{"config_version":"v7","node_version":"v2","added":[],"removed":[],"changed":[],"unchanged":[]}`, wire.ReportConfiguration{NodeVersion: "v2", HubVersion: "v7", Generation: 4}},
		{"apply redelivered", apply, `{"config_version":"v7","node_version":"v2","added":[],"removed":[],"changed":[],"unchanged":[]}`, wire.ReportConfiguration{NodeVersion: "v2", HubVersion: "v7", Generation: 4}},
		{"rollback to the node's v1", rollback, `{"config_version":"","node_version":"v1","added":[],"removed":[],"changed":[],"unchanged":[]}`, wire.ReportConfiguration{NodeVersion: "v1", Generation: 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.mu.Lock()
			before := len(f.results["any"])
			f.mu.Unlock()
			a.execute(ctx, tc.cmd)
			f.mu.Lock()
			defer f.mu.Unlock()
			if got := len(f.results["any"]); got != before+1 {
				t.Fatalf("%d succeeded results, want %d", got, before+1)
			}
			if got := string(f.results["any"][before]); got != tc.result {
				t.Errorf("result %s, want %s", got, tc.result)
			}
			if got := f.node("n1").report; got != tc.report && tc.cmd.Operation == wire.CommandConfigApply {
				t.Errorf("report %+v, want %+v", got, tc.report)
			}
		})
	}
	if n := a.configApplies(); n != 2 {
		t.Errorf("configApplies %d, want 2 (a redelivery is not an apply)", n)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.bodies {
		if strings.Contains(b, fakeSecret) {
			t.Fatalf("secret in a body: %s", b)
		}
	}
}
