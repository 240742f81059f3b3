package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/hub"
	"github.com/flowplane/flowplane/internal/wire"
)

// The rollout test runs a Hub and five Agents as child processes and
// changes the fleet's configuration from the Hub alone: validate and diff
// on one node, a good rollout in waves of two, a bad one that fails its
// first wave and is rolled back, pause and resume, and a Hub killed with
// SIGKILL in the middle of a wave.

// rolloutSecret is the value of the Hub's SVC_SECRET_ROLLOUT_TOKEN: it
// must reach the nodes' running configuration and nothing else.
const rolloutSecret = "s3cr3t-rollout-value-5b1e"

// rolloutNode writes an Agent's --config file (one stream, "base") and
// returns it unstarted.
func rolloutNode(t *testing.T, dir, id, hubURL string) *fleetNode {
	t.Helper()
	return policyNode(t, dir, id, hubURL, tempRootsPolicy())
}

// policyNode is rolloutNode with the remote_policy section given (a YAML
// line ending in a newline).
func policyNode(t *testing.T, dir, id, hubURL, remotePolicy string) *fleetNode {
	t.Helper()
	n := &fleetNode{owner: t, id: id, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), conf: filepath.Join(dir, id+".yaml"), state: filepath.Join(dir, id)}
	conf := fmt.Sprintf(`logging: {level: info}
health_check:
  address: %q
  hub_urls: [%q]
  node_id: %s
  node_token: "${env:%s}"
  agent_lease_ttl_ms: 3000
%sstreams:
  - id: base
    input: {type: generate, context: '{"n": 1}', interval: 200ms}
    pipeline: {processors: []}
    output: {type: drop}
`, n.addr, hubURL, id, hub.EnvNodeToken, remotePolicy)
	if err := os.WriteFile(n.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return n
}

// fleetDoc is a configuration for the Hub to roll out (no health_check:
// each node keeps its own). streams maps ids to an input line.
func fleetDoc(streams ...string) string {
	var b strings.Builder
	b.WriteString("logging: {level: info}\nstreams:\n")
	for _, s := range streams {
		id, input, _ := strings.Cut(s, "=")
		fmt.Fprintf(&b, "  - id: %s\n    input: %s\n    pipeline: {processors: []}\n    output: {type: drop}\n", id, input)
	}
	return b.String()
}

const generateInput = `{type: generate, context: '{"n": 1}', interval: 200ms}`

// jsonDoc is the {format, content} body of a YAML document.
func jsonDoc(content string) string {
	b, _ := json.Marshal(wire.ConfigDocument{Format: "yaml", Content: content})
	return string(b)
}

// waitLong is waitUntil with a deadline fit for rollouts of several waves.
func waitLong(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (h *fleetHub) rollout(t *testing.T, id string) wire.Rollout {
	t.Helper()
	var r wire.Rollout
	waitLong(t, "the Hub to answer", 30*time.Second, func() bool {
		_, err := h.try("GET", "/rollouts/"+id, "", &r)
		return err == nil
	})
	return r
}

func (h *fleetHub) waitRollout(t *testing.T, id, state string, d time.Duration) wire.Rollout {
	t.Helper()
	var r wire.Rollout
	waitLong(t, "rollout "+state, d, func() bool {
		r = h.rollout(t, id)
		if r.State != state && (r.State == wire.RolloutFailed || r.State == wire.RolloutSucceeded) {
			t.Fatalf("rollout %s, want %s: %+v", r.State, state, r)
		}
		return r.State == state
	})
	return r
}

func (h *fleetHub) nodeConfig(t *testing.T, id string) wire.NodeConfiguration {
	t.Helper()
	var c wire.NodeConfiguration
	h.call(t, "GET", "/nodes/"+id+"/configuration", "", http.StatusOK, &c)
	return c
}

// succeeded waits until an operation finished and checks it succeeded.
func (h *fleetHub) succeeded(t *testing.T, id string) fleetOperation {
	t.Helper()
	op := h.waitOperation(t, id)
	if op.State != wire.OpSucceeded {
		t.Fatalf("operation %s: %s (%s)", id, op.State, op.Result)
	}
	return op
}

// procLogs is what a child process wrote so far.
func procLogs(c *exec.Cmd) string {
	if b, ok := c.Stdout.(*logBuffer); ok {
		return b.tail(1 << 30)
	}
	return ""
}

// getJSONStatus GETs url into v; an error for anything but 200.
// sameVersion checks that node id runs the Hub's configuration version
// want by the Hub's node view (config_version, config_source hub) and by
// the node's own API (GET /configuration's hub_version).
func sameVersion(t *testing.T, h *fleetHub, n *fleetNode, id, want string) {
	t.Helper()
	var last string
	waitLong(t, id+" shows "+want, 20*time.Second, func() bool {
		var v wire.NodeView
		_, err := h.try("GET", "/nodes/"+id, "", &v)
		var own struct {
			ID         string `json:"id"`
			HubVersion string `json:"hub_version"`
		}
		_, err2 := getJSONStatus(n.base()+"/configuration", &own)
		last = fmt.Sprintf("hub view %s (%s, node's %s) %v; node's API %+v %v", v.ConfigVersion, v.ConfigSource, v.NodeConfigVersion, err, own, err2)
		return err == nil && err2 == nil && v.ConfigVersion == want && v.ConfigSource == wire.ConfigSourceHub &&
			v.NodeConfigVersion == own.ID && own.HubVersion == want
	})
	t.Logf("%s: %s", id, last)
}

func getJSONStatus(url string, v any) (int, error) {
	resp, err := fleetHTTP.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(v)
}

func TestRolloutFleet(t *testing.T) {
	t.Parallel() // independent: own ports, own directories, own processes
	if testing.Short() {
		t.Skip("starts a Hub and five Agents as child processes")
	}
	dir := t.TempDir()
	h := &fleetHub{owner: t, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), storage: filepath.Join(dir, "hub.db"),
		env: []string{"SVC_SECRET_ROLLOUT_TOKEN=" + rolloutSecret}}
	h.start(t)
	defer func() {
		if t.Failed() {
			h.dumpEvents(t)
		}
	}()
	var ids []string
	nodes := map[string]*fleetNode{}
	for i := 1; i <= 5; i++ {
		id := fmt.Sprintf("node-%d", i)
		n := rolloutNode(t, dir, id, h.url())
		n.start(t)
		ids, nodes[id] = append(ids, id), n
	}
	for _, id := range ids {
		h.waitStatus(t, id, "online")
	}
	nodeIDs, _ := json.Marshal(ids)
	// good uses a Hub secret, as a real pipeline's credentials would.
	good := fleetDoc("base="+generateInput, `tokened={type: generate, context: '{"token": "${secret:ROLLOUT_TOKEN}"}', interval: 200ms}`)

	t.Run("validate and diff on one node", func(t *testing.T) {
		var op wire.Operation
		h.call(t, "POST", "/nodes/node-1/configuration/validate", jsonDoc(good), http.StatusAccepted, &op)
		res := h.succeeded(t, op.OperationID)
		var rep struct {
			Valid  bool              `json:"valid"`
			Errors []json.RawMessage `json:"errors"`
		}
		if err := json.Unmarshal(res.Result, &rep); err != nil || !rep.Valid {
			t.Fatalf("validate result %s (%v)", res.Result, err)
		}
		bad := fleetDoc("base={type: no_such_input}")
		h.call(t, "POST", "/nodes/node-1/configuration/validate", jsonDoc(bad), http.StatusAccepted, &op)
		res = h.succeeded(t, op.OperationID)
		if err := json.Unmarshal(res.Result, &rep); err != nil || rep.Valid || len(rep.Errors) == 0 {
			t.Fatalf("validate of a bad candidate: %s (%v)", res.Result, err)
		}
		// health_check is node-local: the Hub refuses it before any node sees it.
		if status, _ := h.try("POST", "/nodes/node-1/configuration/validate", jsonDoc("health_check: {enabled: true}\n"+good), nil); status != http.StatusUnprocessableEntity {
			t.Fatalf("a document with health_check: %d, want 422", status)
		}
	})

	var first wire.Rollout
	t.Run("a good version in waves of two succeeds", func(t *testing.T) {
		body := fmt.Sprintf(`{"configuration": %s, "node_ids": %s, "batch_size": 2, "gate_timeout_ms": 30000}`, jsonDoc(good), nodeIDs)
		h.call(t, "POST", "/rollouts", body, http.StatusCreated, &first)
		if len(first.Waves) != 3 || len(first.Waves[0]) != 2 {
			t.Fatalf("waves %v", first.Waves)
		}
		first = h.waitRollout(t, first.RolloutID, wire.RolloutSucceeded, 60*time.Second)
		for _, rn := range first.Nodes {
			// Each node ran its --config file before: version_before is its own id, labelled so.
			if rn.Phase != wire.RolloutNodePassed || rn.VersionTarget != "v1" || rn.NodeVersionBefore == "" ||
				rn.VersionBefore != wire.NodeVersionLabel+rn.NodeVersionBefore {
				t.Fatalf("node %+v", rn)
			}
		}
		for _, id := range ids {
			c := h.nodeConfig(t, id)
			if c.Convergence != wire.ConvergenceInSync || c.Desired == nil || c.Desired.ConfigVersion != "v1" || c.Reported == nil || c.Reported.HubVersion != "v1" {
				t.Fatalf("%s configuration %+v", id, c)
			}
			// One content, one version: the Hub's node view and the node's own API say v1 too.
			sameVersion(t, h, nodes[id], id, "v1")
			// The stream's view carries its definition in v1: references as written, no value.
			waitLong(t, id+" tokened's configuration", 20*time.Second, func() bool {
				var s wire.Stream
				if _, err := h.try("GET", "/nodes/"+id+"/streams/tokened", "", &s); err != nil || s.Configuration == nil {
					return false
				}
				def, _ := json.Marshal(s.Configuration.Definition)
				if s.Configuration.ConfigVersion != "v1" || !strings.Contains(string(def), "${secret:ROLLOUT_TOKEN}") || strings.Contains(string(def), rolloutSecret) {
					t.Fatalf("%s tokened's configuration %s %s", id, s.Configuration.ConfigVersion, def)
				}
				return true
			})
			// The node runs the new stream, with the secret resolved.
			waitLong(t, id+" runs tokened", 20*time.Second, func() bool {
				var s wire.Stream
				_, err := getJSONStatus(nodes[id].base()+"/streams/tokened", &s)
				return err == nil && s.Observed.State == "running"
			})
		}
		// Waves ran in order: every node of wave k was applied after wave k-1 passed.
		evs := h.events(t, "kind=rollout_changed&resource_id="+first.RolloutID)
		if len(evs) == 0 {
			t.Fatal("no rollout_changed events")
		}
	})

	t.Run("diff two versions", func(t *testing.T) {
		changed := fleetDoc("base=" + generateInput)
		var op wire.Operation
		h.call(t, "POST", "/nodes/node-5/configuration/apply", jsonDoc(changed), http.StatusAccepted, &op)
		waitLong(t, "node-5 in_sync at v2", 30*time.Second, func() bool {
			c := h.nodeConfig(t, "node-5")
			return c.Convergence == wire.ConvergenceInSync && c.Reported != nil && c.Reported.HubVersion == "v2"
		})
		h.call(t, "GET", "/nodes/node-5/configuration/diff?from=v1&to=v2", "", http.StatusAccepted, &op)
		res := h.succeeded(t, op.OperationID)
		var d struct {
			Unified string `json:"unified"`
			Summary struct {
				Removed []string `json:"removed"`
			} `json:"summary"`
		}
		if err := json.Unmarshal(res.Result, &d); err != nil || !slices.Equal(d.Summary.Removed, []string{"tokened"}) || !strings.Contains(d.Unified, "-  - id: tokened") {
			t.Fatalf("diff result %s (%v)", res.Result, err)
		}
		// Back to v1 by a rollback intent.
		h.call(t, "POST", "/nodes/node-5/configuration/rollback/v1", "", http.StatusAccepted, &op)
		waitLong(t, "node-5 back on v1", 30*time.Second, func() bool {
			c := h.nodeConfig(t, "node-5")
			return c.Convergence == wire.ConvergenceInSync && c.Reported != nil && c.Reported.HubVersion == "v1"
		})
		var vs wire.Page[wire.ConfigVersion]
		h.call(t, "GET", "/nodes/node-5/configuration/versions", "", http.StatusOK, &vs)
		if vs.Total != 2 || vs.Items[0].Version != "v2" {
			t.Fatalf("versions %+v", vs)
		}
	})

	t.Run("a breaking version fails wave one and rolls back", func(t *testing.T) {
		// The http input cannot bind the Hub's own port: the stream fails on start.
		broken := fleetDoc("base="+generateInput, fmt.Sprintf("listener={type: http, address: %q, path: /in}", h.addr))
		var r wire.Rollout
		body := fmt.Sprintf(`{"configuration": %s, "node_ids": %s, "batch_size": 2, "gate_timeout_ms": 6000, "soak_ms": 1000}`, jsonDoc(broken), nodeIDs)
		h.call(t, "POST", "/rollouts", body, http.StatusCreated, &r)
		r = h.waitRollout(t, r.RolloutID, wire.RolloutFailed, 60*time.Second)
		wave1 := r.Waves[0]
		for _, rn := range r.Nodes {
			switch {
			case slices.Contains(wave1, rn.NodeID) && rn.Phase != wire.RolloutNodeFailed:
				t.Fatalf("wave 1 node %+v", rn)
			case !slices.Contains(wave1, rn.NodeID) && (rn.Phase != wire.RolloutNodeSkipped || rn.OperationID != ""):
				t.Fatalf("later node touched: %+v", rn)
			}
		}
		for _, id := range ids {
			if c := h.nodeConfig(t, id); !slices.Contains(wave1, id) && (c.Desired.ConfigVersion != "v1" || c.Reported.HubVersion != "v1") {
				t.Fatalf("%s changed: %+v", id, c)
			}
		}
		// The broken content is v3 on every node it reached (node-5 alone
		// had v2): numbered once for the fleet; each ran v1 before.
		for _, rn := range r.Nodes {
			if slices.Contains(wave1, rn.NodeID) && (rn.VersionTarget != "v3" || rn.VersionBefore != "v1") {
				t.Fatalf("wave 1 node %+v: want v1 -> v3", rn)
			}
		}
		h.call(t, "POST", "/rollouts/"+r.RolloutID+"/actions", `{"action": "rollback"}`, http.StatusOK, &r)
		if r.State != wire.RolloutRolledBack {
			t.Fatalf("after rollback: %s", r.State)
		}
		for _, id := range wave1 {
			waitLong(t, id+" back on v1", 30*time.Second, func() bool {
				c := h.nodeConfig(t, id)
				return c.Convergence == wire.ConvergenceInSync && c.Reported != nil && c.Reported.HubVersion == "v1"
			})
		}
		waitLong(t, "wave 1 rolled_back", 30*time.Second, func() bool {
			r = h.rollout(t, r.RolloutID)
			for _, rn := range r.Nodes {
				if slices.Contains(wave1, rn.NodeID) && rn.Phase != wire.RolloutNodeRolledBack {
					return false
				}
			}
			return true
		})
		// A second rollback is refused; nothing was deleted.
		if status, _ := h.try("POST", "/rollouts/"+r.RolloutID+"/actions", `{"action": "rollback"}`, nil); status != http.StatusConflict {
			t.Fatalf("second rollback: %d, want 409", status)
		}
	})

	t.Run("pause, resume, and a Hub killed mid-wave", func(t *testing.T) {
		third := fleetDoc("base="+generateInput, "extra="+generateInput)
		var r wire.Rollout
		body := fmt.Sprintf(`{"configuration": %s, "node_ids": %s, "batch_size": 1, "gate_timeout_ms": 30000, "pause_ms": 1500}`, jsonDoc(third), nodeIDs)
		h.call(t, "POST", "/rollouts", body, http.StatusCreated, &r)
		waitLong(t, "wave 1 running", 30*time.Second, func() bool {
			r = h.rollout(t, r.RolloutID)
			return r.State == wire.RolloutRunning && r.CurrentWave >= 1
		})
		h.call(t, "POST", "/rollouts/"+r.RolloutID+"/actions", `{"action": "pause"}`, http.StatusOK, &r)
		wave := r.CurrentWave
		holds(t, "no wave starts while paused", 4*time.Second, func() bool {
			x := h.rollout(t, r.RolloutID)
			return x.State == wire.RolloutPaused && x.CurrentWave == wave
		})
		h.call(t, "POST", "/rollouts/"+r.RolloutID+"/actions", `{"action": "resume"}`, http.StatusOK, &r)
		waitLong(t, "a later wave", 30*time.Second, func() bool {
			r = h.rollout(t, r.RolloutID)
			return r.CurrentWave > wave
		})
		h.kill(t)
		h.start(t)
		r = h.waitRollout(t, r.RolloutID, wire.RolloutSucceeded, 90*time.Second)
		for _, rn := range r.Nodes {
			if rn.Phase != wire.RolloutNodePassed {
				t.Fatalf("node %+v", rn)
			}
		}
	})

	t.Run("the secret value is nowhere but the running nodes", func(t *testing.T) {
		for _, q := range []string{"/events?page_size=100", "/audit?page_size=100", "/operations?page_size=100", "/rollouts?page_size=100", "/nodes/node-1/configuration/versions"} {
			var raw json.RawMessage
			h.call(t, "GET", q, "", http.StatusOK, &raw)
			if strings.Contains(string(raw), rolloutSecret) {
				t.Fatalf("GET %s shows the secret", q)
			}
		}
		logs := procLogs(h.proc)
		for _, n := range nodes {
			logs += procLogs(n.proc)
		}
		if strings.Contains(logs, rolloutSecret) {
			t.Error("a process log shows the secret")
		}
		h.kill(t) // SQLite's files are read whole, WAL included
		// The Hub's database and every node's state directory (history,
		// Agent state) and configuration file.
		var files []string
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, p)
			}
			return nil
		})
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err == nil && strings.Contains(string(b), rolloutSecret) {
				t.Errorf("%s holds the secret value", f)
			}
		}
	})
}
