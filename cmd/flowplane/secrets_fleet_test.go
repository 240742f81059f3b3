package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	n := rolloutNode(t, dir, "node-1", h.url())
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
		{stream(", batch_size: \""+fileRef+"\""), map[string]string{"streams[0].input.batch_size": fileRef}},
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
