package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/hub"
	"github.com/flowplane/flowplane/internal/wire"
)

// Values of references that must come back from no surface of the Hub:
// none of them is English, so no fixed text can hold a piece of one.
const (
	leakFileValue   = "k3y-LINE-1-Qx9w\nk3y-LINE-2-Qx9w\n57340b-LINE-3"
	leakEnvValue    = "57340bfe2a9c-T0KEN-Qx9w"
	leakSecretValue = "Hub5ecret-9f8e7d-Qx9w"
)

// secretPieces lists what of value no text may hold: each line and each
// 6-byte piece (the redactor's MinFragmentLen), raw and JSON-escaped.
func secretPieces(value string) []string {
	var out []string
	for _, f := range []string{value, strings.Trim(mustMarshal(value), `"`)} {
		for i := 0; i+6 <= len(f); i++ {
			out = append(out, f[i:i+6])
		}
	}
	return append(out, strings.Split(value, "\n")...)
}

func mustMarshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestSecretFragmentsNotInHubValidateResult reproduces issue 29's leak
// through a Hub: a configuration_validate whose candidate has a multi-line
// ${file:} value, an ${env:} value and a Hub secret inside expressions
// (whose compiler quotes the source line and a piece of a number) and in a
// number field. The result stored at the Hub names each path and
// reference; no surface of the Hub (the operation, its events, its log)
// holds a line or a piece of any value.
func TestSecretFragmentsNotInHubValidateResult(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Hub and an Agent as child processes")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(file, []byte(leakFileValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &fleetHub{owner: t, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), storage: filepath.Join(dir, "hub.db"),
		env: []string{"SVC_SECRET_LEAK_HUB=" + leakSecretValue}}
	h.start(t)
	// The node lets the Hub's work read this environment variable and
	// file: what is checked is that their values never come back.
	n := policyNode(t, dir, "node-1", h.url(), fmt.Sprintf("remote_policy: {env: [FLOWPLANE_LEAK_ENV], files: [%q]}\n", file))
	n.env = []string{"FLOWPLANE_LEAK_ENV=" + leakEnvValue}
	n.start(t)
	h.waitStatus(t, "node-1", "online")

	fileRef, envRef, secretRef := "${file:"+file+"}", "${env:FLOWPLANE_LEAK_ENV}", "${secret:LEAK_HUB}"
	// The deep build (expressions) runs only on a candidate the schema
	// accepts: two candidates.
	stream := func(input string, processors ...string) string {
		return "logging: {level: info}\nstreams:\n  - id: leak\n    input: {type: generate, context: '{}', interval: 1s" + input + "}\n" +
			"    pipeline:\n      processors: [" + strings.Join(processors, ", ") + "]\n    output: {type: drop}\n"
	}
	candidates := []struct {
		doc  string
		want map[string]string // path -> reference named
	}{
		{stream(", batch_size: \"" + fileRef + "\""), map[string]string{"streams[0].input.batch_size": fileRef}},
		{stream("", "{type: filter, condition: 'this.x > "+fileRef+"'}",
			"{type: mapping, expression: 'this.x + "+envRef+"'}",
			"{type: mapping, expression: 'this.y + "+secretRef+"'}"),
			map[string]string{
				"streams[0].pipeline.processors[0].condition":  fileRef,
				"streams[0].pipeline.processors[1].expression": envRef,
				"streams[0].pipeline.processors[2].expression": secretRef,
			}},
	}
	surfaces := map[string]string{}
	for i, c := range candidates {
		var op wire.Operation
		h.call(t, "POST", "/nodes/node-1/configuration/validate", jsonDoc(c.doc), http.StatusAccepted, &op)
		res := h.succeeded(t, op.OperationID)
		var rep struct {
			Valid  bool `json:"valid"`
			Errors []struct{ Path, Message string }
		}
		if err := json.Unmarshal(res.Result, &rep); err != nil || rep.Valid {
			t.Fatalf("validate result %s (%v)", res.Result, err)
		}
		for _, e := range rep.Errors {
			if ref, ok := c.want[e.Path]; ok && strings.HasPrefix(e.Message, "value of "+ref+" is not valid") {
				delete(c.want, e.Path)
			}
		}
		if len(c.want) > 0 {
			t.Errorf("no error naming %v in %s", c.want, res.Result)
		}
		var raw json.RawMessage
		h.call(t, "GET", "/operations/"+op.OperationID, "", http.StatusOK, &raw)
		surfaces[fmt.Sprintf("GET /operations/{id} of candidate %d", i)] = string(raw)
	}
	var raw json.RawMessage
	h.call(t, "GET", "/events?page_size=100", "", http.StatusOK, &raw)
	surfaces["GET /events"] = string(raw)
	surfaces["hub log"] = procLogs(h.proc)
	surfaces["node log"] = procLogs(n.proc)
	for name, text := range surfaces {
		for _, value := range []string{leakFileValue, leakEnvValue, leakSecretValue} {
			for _, p := range secretPieces(value) {
				if strings.Contains(text, p) {
					t.Errorf("%s holds %q of a secret: %.2000s", name, p, text)
					break
				}
			}
		}
	}
}

// nodeLocalSecret is node-1's SVC_SECRET_NODE_LOCAL; the Hub and node-2
// hold none.
const nodeLocalSecret = "node-local-secret-7c4e"

// TestNodeLocalSecretResolvesOnTheNode: spec secrets rule 6 through a real
// Hub and real nodes. A ${secret:NAME} the Hub does not hold is left for
// the node: node-1, which holds it, validates and applies the
// configuration (its stream writes the value); a reference neither holds
// fails at the node, naming the path and the reference; a rollout to
// node-1 and node-2 (which lacks it) passes on node-1 and fails on node-2
// with the same error.
func TestNodeLocalSecretResolvesOnTheNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Hub and two Agents as child processes")
	}
	dir := t.TempDir()
	h := startFleetHub(t, dir)
	// Both nodes let the Hub's work resolve their own secrets
	// (remote_policy's default refuses them).
	local := fmt.Sprintf("remote_policy: {file_roots: [%q], allow_local_secrets: true}\n", os.TempDir())
	n1 := policyNode(t, dir, "node-1", h.url(), local)
	n1.env = []string{"SVC_SECRET_NODE_LOCAL=" + nodeLocalSecret}
	n1.start(t)
	n2 := policyNode(t, dir, "node-2", h.url(), local)
	n2.start(t)
	h.waitStatus(t, "node-1", "online")
	h.waitStatus(t, "node-2", "online")

	out := filepath.Join(dir, "out", "local.jsonl")
	doc := func(ref string) string {
		return "logging: {level: info}\nstreams:\n  - id: local\n" +
			"    input: {type: generate, context: '{\"k\": \"" + ref + "\"}', interval: 100ms}\n" +
			"    pipeline: {processors: []}\n    output: {type: file, path: " + mustMarshal(out) + "}\n"
	}
	type report struct {
		Valid  bool `json:"valid"`
		Errors []struct{ Path, Message string }
	}
	validate := func(t *testing.T, content string) report {
		t.Helper()
		var op wire.Operation
		h.call(t, "POST", "/nodes/node-1/configuration/validate", jsonDoc(content), http.StatusAccepted, &op)
		res := h.succeeded(t, op.OperationID)
		var rep report
		if err := json.Unmarshal(res.Result, &rep); err != nil {
			t.Fatalf("result %s: %v", res.Result, err)
		}
		return rep
	}
	const path = "streams[0].input.context"

	t.Run("validated and applied on the node that holds it", func(t *testing.T) {
		if rep := validate(t, doc("${secret:NODE_LOCAL}")); !rep.Valid {
			t.Fatalf("validate: %+v", rep)
		}
		var op wire.Operation
		h.call(t, "POST", "/nodes/node-1/configuration/apply", jsonDoc(doc("${secret:NODE_LOCAL}")), http.StatusAccepted, &op)
		h.succeeded(t, op.OperationID)
		waitUntil(t, "the stream to write the node's secret", func() bool {
			b, _ := os.ReadFile(out)
			return strings.Contains(string(b), nodeLocalSecret)
		})
	})

	t.Run("a reference neither holds fails at the node", func(t *testing.T) {
		rep := validate(t, doc("${secret:NEITHER}"))
		if rep.Valid || len(rep.Errors) != 1 || rep.Errors[0].Path != path || !strings.Contains(rep.Errors[0].Message, "${secret:NEITHER}") {
			t.Fatalf("validate: %+v", rep)
		}
		var op wire.Operation
		h.call(t, "POST", "/nodes/node-1/configuration/apply", jsonDoc(doc("${secret:NEITHER}")), http.StatusAccepted, &op)
		var raw json.RawMessage
		waitUntil(t, "the apply to fail", func() bool { return h.operation(t, op.OperationID).State == wire.OpFailed })
		h.call(t, "GET", "/operations/"+op.OperationID, "", http.StatusOK, &raw)
		if !strings.Contains(string(raw), path) || !strings.Contains(string(raw), "${secret:NEITHER}") || strings.Contains(string(raw), "secret_unresolved") {
			t.Fatalf("operation %s", raw)
		}
	})

	t.Run("a rollout's preflight resolves it on each node", func(t *testing.T) {
		// node-1 holds the secret, node-2 does not: node-2's validation
		// refuses the configuration and the rollout fails in its
		// preflight, before any node changes.
		var ro wire.Rollout
		body := fmt.Sprintf(`{"configuration": %s, "node_ids": ["node-1", "node-2"], "batch_size": 1, "gate_timeout_ms": 30000}`,
			jsonDoc(doc("${secret:NODE_LOCAL}")))
		h.call(t, "POST", "/rollouts", body, http.StatusCreated, &ro)
		ro = h.waitRollout(t, ro.RolloutID, wire.RolloutFailed, 60*time.Second)
		if f := ro.Failure; f == nil || f.Code != hub.CodePreflightFailed || !strings.Contains(f.Message, "node-2: "+path) ||
			!strings.Contains(f.Message, "${secret:NODE_LOCAL}") || strings.Contains(f.Message, "node-1") {
			t.Fatalf("rollout failure %+v", ro.Failure)
		}
		for _, rn := range ro.Nodes {
			if rn.Phase != wire.RolloutNodeWaiting || rn.OperationID != "" {
				t.Errorf("node %s changed by a rollout refused in preflight: %+v", rn.NodeID, rn)
			}
		}
		want := map[string]string{"node-1": wire.PreflightValid, "node-2": wire.PreflightInvalid}
		if len(ro.Preflight) != 2 {
			t.Fatalf("preflight %+v", ro.Preflight)
		}
		for _, p := range ro.Preflight {
			if p.State != want[p.NodeID] {
				t.Errorf("preflight of %s: %+v", p.NodeID, p)
			}
		}
	})
	for name, text := range map[string]string{"hub log": procLogs(h.proc), "node-1 log": procLogs(n1.proc), "node-2 log": procLogs(n2.proc)} {
		if strings.Contains(text, nodeLocalSecret) {
			t.Errorf("%s holds the node's secret", name)
		}
	}
}
