package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/hub"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// policyTestNode writes a Hub-managed node's --config file: its own
// streams (written by the node's owner, never restricted) and the
// remote_policy section given (empty: the defaults).
func policyTestNode(t *testing.T, dir, id, hubURL, remotePolicy, streams string) *fleetNode {
	t.Helper()
	n := &fleetNode{owner: t, id: id, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), conf: filepath.Join(dir, id+".yaml"), state: filepath.Join(dir, id)}
	conf := fmt.Sprintf("logging: {level: info}\nhealth_check:\n  address: %q\n  hub_urls: [%q]\n  node_id: %s\n  node_token: \"${env:%s}\"\n  agent_lease_ttl_ms: 3000\n%sstreams:\n%s",
		n.addr, hubURL, id, hub.EnvNodeToken, remotePolicy, streams)
	if err := os.WriteFile(n.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return n
}

// policyJob is a Hub job spec: one source feeding one sink.
func policyJob(id, inputType, inputConfig, outputType, outputConfig string) string {
	return fmt.Sprintf(`{"id": %q, "version": 1, "parallelism": 1,
  "operators": [{"id": "src", "kind": "source"}, {"id": "out", "kind": "sink"}],
  "edges": [{"from": "src", "to": "out"}],
  "sources": [{"operator_id": "src", "input_type": %q, "config": %s}],
  "sinks": [{"operator_id": "out", "output_type": %q, "config": %s}]}`, id, inputType, inputConfig, outputType, outputConfig)
}

// failedWith waits for operation id to fail and returns its failure,
// failing the test unless its code is code.
func (h *fleetHub) failedWith(t *testing.T, id, code string) wire.Failure {
	t.Helper()
	var op wire.Operation
	waitUntil(t, "operation "+id+" to finish", func() bool {
		h.call(t, "GET", "/operations/"+id, "", http.StatusOK, &op)
		return op.State == wire.OpSucceeded || op.State == wire.OpFailed || op.State == wire.OpCancelled
	})
	if op.State != wire.OpFailed || op.Failure == nil || op.Failure.Code != code {
		t.Fatalf("operation %s: state %s, failure %+v; want failed with %s", id, op.State, op.Failure, code)
	}
	return *op.Failure
}

// TestPolicyRemoteWork reproduces issue 29's exfiltration and file access
// through a real Hub and a real node with the default remote policy: a
// Hub job whose generate context holds ${env:SVC_NODE_TOKEN} and a
// ${file:} with an http sink is refused and the (loopback) sink receives
// nothing; a file input reading /etc/passwd, an sqlite input reading the
// Hub's database, a configuration appending to an authorized_keys file
// outside the roots (left unchanged), a path leaving the state directory
// through a symbolic link or "..", and an http output to a metadata
// address are refused with policy_denied naming the path and the rule.
// The node's own --config file reads /etc/hostname; the same stream from
// the Hub is refused.
func TestPolicyRemoteWork(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Hub and an Agent as child processes")
	}
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "node-secret.txt")
	if err := os.WriteFile(secretFile, []byte("node-file-secret-3e1f"), 0o600); err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
	}))
	defer sink.Close()

	h := startFleetHub(t, dir)
	hostStream := "  - id: local-host\n    input: {type: file, path: /etc/hostname}\n    pipeline: {processors: []}\n    output: {type: drop}\n"
	n := policyTestNode(t, dir, "node-p", h.url(), "", hostStream)
	n.start(t)
	h.waitStatus(t, "node-p", "online")

	t.Run("local configuration is not restricted", func(t *testing.T) {
		waitUntil(t, "the local stream reading /etc/hostname to run or complete", func() bool {
			var s wire.Stream
			resp, err := fleetHTTP.Get(n.base() + "/streams/local-host")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			if json.NewDecoder(resp.Body).Decode(&s) != nil {
				return false
			}
			if s.Observed.State == "failed" {
				t.Fatalf("the node's own stream failed: %+v", s)
			}
			return s.Observed.State == "running" || s.Observed.State == "completed"
		})
	})

	jobs := []struct {
		name, spec, wantPath, wantRule string
	}{
		{"exfiltration through a generate context and an http sink",
			policyJob("exfil", "generate", `{"context": "{\"t\": \"${env:SVC_NODE_TOKEN}\", \"f\": \"${file:`+secretFile+`}\"}", "count": 5, "interval": "10ms"}`,
				"http", fmt.Sprintf(`{"url": %q}`, sink.URL)),
			"spec.sources[0].config.context", "remote_policy.env"},
		{"file input reading /etc/passwd",
			policyJob("passwd", "file", `{"path": "/etc/passwd"}`, "drop", `{}`),
			"spec.sources[0].config.path: /etc/passwd is outside the allowed file roots", "remote_policy.file_roots"},
		{"sqlite input reading the Hub's database",
			policyJob("hubdb", "sql", fmt.Sprintf(`{"select_sql": "select * from audit", "input_type": {"type": "sqlite", "path": %q}}`, h.storage), "drop", `{}`),
			"spec.sources[0].config.input_type.path: " + h.storage + " is outside the allowed file roots", "remote_policy.file_roots"},
	}
	for _, tt := range jobs {
		t.Run(tt.name, func(t *testing.T) {
			var created wire.JobDesiredResponse
			h.call(t, "POST", "/jobs", `{"spec": `+tt.spec+`, "desired_state": "running", "node_ids": ["node-p"]}`, http.StatusAccepted, &created)
			f := h.failedWith(t, created.OperationID, "policy_denied")
			if !strings.Contains(f.Message, tt.wantPath) || !strings.Contains(f.Message, tt.wantRule) {
				t.Errorf("failure %q does not name %q and %s", f.Message, tt.wantPath, tt.wantRule)
			}
			// job_validate is refused the same way.
			var val wire.JobValidateResponse
			h.call(t, "POST", "/jobs/validate", `{"spec": `+tt.spec+`, "node_ids": ["node-p"]}`, http.StatusOK, &val)
			for _, opID := range val.Operations {
				h.failedWith(t, opID, "policy_denied")
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the http sink received %d requests", n)
	}
	// The Hub's audit keeps the node's refusal.
	var audit wire.Page[store.AuditRecord]
	h.call(t, "GET", "/audit?resource_id=passwd", "", http.StatusOK, &audit)
	if !slices.ContainsFunc(audit.Items, func(r store.AuditRecord) bool {
		return r.Outcome == store.OutcomeRejected && r.FailureCode == "policy_denied" && r.NodeID == "node-p"
	}) {
		t.Errorf("no rejected audit record with policy_denied for job passwd: %+v", audit.Items)
	}

	// Configuration commands.
	outside := filepath.Join(dir, "home", ".ssh")
	keys := filepath.Join(outside, "authorized_keys")
	if err := os.MkdirAll(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keys, []byte("ssh-ed25519 AAAA owner\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(n.state, "ssh")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	stream := func(input, output string) string {
		return "logging: {level: info}\nstreams:\n  - id: remote\n    input: " + input + "\n    pipeline: {processors: []}\n    output: " + output + "\n"
	}
	gen := `{type: generate, context: '"ssh-ed25519 AAAA attacker"', count: 1, interval: 10ms}`
	configs := []struct {
		name, doc, want string
	}{
		{"append to a file outside the roots", stream(gen, "{type: file, path: "+mustMarshal(keys)+"}"),
			"streams[0].output.path: " + keys + " is outside the allowed file roots (remote_policy.file_roots)"},
		{"a symbolic link in the state directory", stream(gen, "{type: file, path: "+mustMarshal(filepath.Join(link, "authorized_keys"))+"}"),
			"leaves its root through .. or a symbolic link (remote_policy.file_roots)"},
		{"dot-dot out of the state directory", stream(gen, "{type: file, path: "+mustMarshal(n.state+"/../home/.ssh/authorized_keys")+"}"),
			"is outside the allowed file roots (remote_policy.file_roots)"},
		{"the cloud metadata address", stream(gen, "{type: http, url: 'http://169.254.169.254/latest/meta-data/'}"),
			"streams[0].output.url: destination 169.254.169.254 is a link-local or cloud metadata address (remote_policy.outbound_allow)"},
		{"/etc/hostname from the Hub", stream("{type: file, path: /etc/hostname}", "{type: drop}"),
			"streams[0].input.path: /etc/hostname is outside the allowed file roots (remote_policy.file_roots)"},
		{"an env reference", stream("{type: generate, context: '\"${env:SVC_NODE_TOKEN}\"', interval: 1s}", "{type: drop}"),
			"streams[0].input.context: ${env:SVC_NODE_TOKEN} reads the node's environment, which the node does not let the Hub's work read (remote_policy.env)"},
	}
	for _, tt := range configs {
		t.Run(tt.name, func(t *testing.T) {
			var op wire.Operation
			h.call(t, "POST", "/nodes/node-p/configuration/validate", jsonDoc(tt.doc), http.StatusAccepted, &op)
			if f := h.failedWith(t, op.OperationID, "policy_denied"); !strings.Contains(f.Message, tt.want) {
				t.Errorf("validate failure %q does not hold %q", f.Message, tt.want)
			}
			h.call(t, "POST", "/nodes/node-p/configuration/apply", jsonDoc(tt.doc), http.StatusAccepted, &op)
			if f := h.failedWith(t, op.OperationID, "policy_denied"); !strings.Contains(f.Message, tt.want) {
				t.Errorf("apply failure %q does not hold %q", f.Message, tt.want)
			}
		})
	}
	if b, err := os.ReadFile(keys); err != nil || string(b) != "ssh-ed25519 AAAA owner\n" {
		t.Errorf("authorized_keys is now %q (%v)", b, err)
	}

	t.Run("within the state directory", func(t *testing.T) {
		var op wire.Operation
		doc := stream(gen, "{type: file, path: "+mustMarshal(filepath.Join(n.state, "out", "remote.jsonl"))+"}")
		h.call(t, "POST", "/nodes/node-p/configuration/apply", jsonDoc(doc), http.StatusAccepted, &op)
		h.succeeded(t, op.OperationID)
		waitUntil(t, "the Hub's stream to write beneath the state directory", func() bool {
			b, err := os.ReadFile(filepath.Join(n.state, "out", "remote.jsonl"))
			return err == nil && strings.Contains(string(b), "attacker")
		})
	})

	t.Run("a delivered remote_policy", func(t *testing.T) {
		// The Hub refuses it first; the node would as well.
		status, err := h.try("POST", "/nodes/node-p/configuration/apply", jsonDoc("remote_policy: {file_roots: [/]}\n"+stream(gen, "{type: drop}")), nil)
		if status != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(err), "remote_policy") {
			t.Errorf("apply with remote_policy: %d %v", status, err)
		}
	})
}

// TestPolicyCapabilitiesOff: a node whose remote policy switches job and
// configuration control off does not advertise them, and the Hub's
// configuration commands for it fail with incompatible_capability.
func TestPolicyCapabilitiesOff(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Hub and an Agent as child processes")
	}
	dir := t.TempDir()
	h := startFleetHub(t, dir)
	n := policyTestNode(t, dir, "node-q", h.url(), "remote_policy: {job_control: false, config_control: false}\n",
		"  - id: base\n    input: {type: generate, context: '{}', interval: 1s}\n    pipeline: {processors: []}\n    output: {type: drop}\n")
	n.start(t)
	v := h.waitStatus(t, "node-q", "online")
	for _, c := range []string{wire.CapabilityJobControl, wire.CapabilityConfigControl} {
		if slices.Contains(v.Capabilities, c) {
			t.Errorf("node-q advertises %s: %v", c, v.Capabilities)
		}
	}
	if !slices.Contains(v.Capabilities, wire.CapabilityStreamControl) {
		t.Errorf("node-q does not advertise stream_control: %v", v.Capabilities)
	}
	var op wire.Operation
	status, err := h.try("POST", "/nodes/node-q/configuration/validate", jsonDoc("streams: []\n"), &op)
	switch {
	case status == http.StatusAccepted:
		h.failedWith(t, op.OperationID, "incompatible_capability")
	case status == http.StatusConflict && strings.Contains(fmt.Sprint(err), "incompatible_capability"):
	default:
		t.Fatalf("validate on node-q: %d %v", status, err)
	}
	// Stream control still works.
	w := h.put(t, "node-q", "base", "stopped")
	deadline := time.Now().Add(30 * time.Second)
	for h.operation(t, w.OperationID).State != wire.OpSucceeded {
		if time.Now().After(deadline) {
			t.Fatalf("stop of node-q/base did not succeed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
