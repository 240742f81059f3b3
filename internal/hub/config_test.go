package hub

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// configSecret is the value of the Hub's SVC_SECRET_DB in these tests.
const configSecret = "hub-secret-value-9d2c"

func serveWithSecrets(t *testing.T, path string) *testHub {
	t.Helper()
	env := map[string]string{"SVC_SECRET_DB": configSecret}
	return serveOptions(t, true, Options{
		Settings:  Settings{Address: "127.0.0.1:0", Storage: path, NodeToken: nodeTokenFor("")},
		Logger:    slog.New(slog.DiscardHandler),
		Version:   "test",
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
}

func configBody(content string) string {
	b, _ := json.Marshal(wire.ConfigDocument{Format: "yaml", Content: content})
	return string(b)
}

const goodConfig = "streams:\n  - id: s1\n    input: {type: generate, context: '{\"pw\": \"${secret:DB}\"}'}\n    output: {type: drop}\n"

// reportConfig sends a report carrying the configuration object.
func (a *testAgent) reportConfig(t *testing.T, hubVersion string, gen int64) {
	t.Helper()
	a.seq++
	rep := wire.Report{BootID: a.bootID, ReportSeq: a.seq, ConfigurationVersion: "v9",
		Configuration: &wire.ReportConfiguration{NodeVersion: "v9", HubVersion: hubVersion, Generation: gen}}
	if r := a.call(t, "POST", "/report", rep, a.session); r.status != http.StatusNoContent {
		t.Fatalf("report: %d %s", r.status, r.body)
	}
}

func (th *testHub) nodeConfig(t *testing.T, id string) wire.NodeConfiguration {
	t.Helper()
	r := th.do(t, "GET", APIPrefix+"/nodes/"+id+"/configuration", "")
	if r.status != http.StatusOK {
		t.Fatalf("GET configuration: %d %s", r.status, r.body)
	}
	return decode[wire.NodeConfiguration](t, r)
}

func (th *testHub) operation(t *testing.T, id string) wire.Operation {
	t.Helper()
	r := th.do(t, "GET", APIPrefix+"/operations/"+id, "")
	if r.status != http.StatusOK {
		t.Fatalf("GET operation: %d %s", r.status, r.body)
	}
	return decode[wire.Operation](t, r)
}

func TestConfigurationRoutes(t *testing.T) {
	db := dbPath(t)
	th := serveWithSecrets(t, db)
	p := APIPrefix + "/nodes/n1/configuration"

	t.Run("unknown node", func(t *testing.T) {
		for _, c := range []struct{ method, path, body string }{
			{"GET", APIPrefix + "/nodes/nope/configuration", ""},
			{"GET", APIPrefix + "/nodes/nope/configuration/versions", ""},
			{"POST", APIPrefix + "/nodes/nope/configuration/validate", configBody(goodConfig)},
			{"GET", APIPrefix + "/nodes/nope/configuration/diff?from=v1&to=v2", ""},
			{"POST", APIPrefix + "/nodes/nope/configuration/apply", configBody(goodConfig)},
			{"POST", APIPrefix + "/nodes/nope/configuration/rollback/v1", ""},
		} {
			r := th.do(t, c.method, c.path, c.body)
			if r.status != http.StatusNotFound || r.problem(t).Code != CodeNodeNotFound {
				t.Errorf("%s %s: %d %s", c.method, c.path, r.status, r.body)
			}
		}
	})

	a := newTestAgent(th, "n1")
	a.register(t, nodeTokenFor(""), time.Minute, wire.CapabilityStreamControl, wire.CapabilityConfigControl)
	a.reportConfig(t, "", 0)

	t.Run("before any apply", func(t *testing.T) {
		c := th.nodeConfig(t, "n1")
		if c.Desired != nil || c.Convergence != wire.ConvergenceUnknown || c.Reported == nil || c.Reported.NodeVersion != "v9" {
			t.Fatalf("%+v", c)
		}
	})

	t.Run("bad bodies", func(t *testing.T) {
		for _, c := range []struct {
			path, body string
			status     int
			at         string
		}{
			{"/validate", configBody("health_check: {enabled: true}\n" + goodConfig), 422, "content: health_check"},
			{"/validate", `{"format": "xml", "content": "x"}`, 422, "format"},
			{"/validate", `{"format": "yaml", "content": "  "}`, 422, "content"},
			{"/validate", `{"format": "yaml", "content": "a: [1"}`, 422, "content"},
			{"/validate", `{"config_version": "v1"}`, 422, "config_version"},
			{"/apply", `{"config_version": "v1", "format": "yaml", "content": "a: 1"}`, 422, "config_version"},
			{"/apply", `{"format": "yaml", "content": "a: 1", "extra": 1}`, 400, ""},
		} {
			r := th.do(t, "POST", p+c.path, c.body)
			if r.status != c.status {
				t.Errorf("%s %s: %d %s", c.path, c.body, r.status, r.body)
				continue
			}
			if c.at != "" && !strings.Contains(string(r.body), `"path":"`+c.at+`"`) {
				t.Errorf("%s %s: no problem at %q: %s", c.path, c.body, c.at, r.body)
			}
		}
	})

	t.Run("validate is a read-only command with Hub secrets", func(t *testing.T) {
		r := th.do(t, "POST", p+"/validate", configBody(goodConfig))
		if r.status != http.StatusAccepted || r.header.Get("Location") == "" {
			t.Fatalf("validate: %d %s", r.status, r.body)
		}
		op := decode[wire.Operation](t, r)
		cmds := a.commands(t, 5*time.Second)
		if len(cmds) != 1 || cmds[0].Operation != wire.CommandConfigValidate || cmds[0].Payload.Content != goodConfig ||
			cmds[0].Payload.Secrets["DB"] != configSecret {
			t.Fatalf("commands %+v", cmds)
		}
		res := wire.CommandResult{AttemptID: cmds[0].AttemptID, State: wire.ResultSucceeded, Result: json.RawMessage(`{"valid":true,"errors":[]}`)}
		if r := a.call(t, "POST", "/commands/"+cmds[0].CommandID+"/result", res, a.session); r.status != http.StatusNoContent {
			t.Fatalf("result: %d %s", r.status, r.body)
		}
		got := th.operation(t, op.OperationID)
		if got.State != wire.OpSucceeded || string(mustJSON(t, got.Result)) != `{"errors":[],"valid":true}` || strings.Contains(string(mustJSON(t, got)), configSecret) {
			t.Fatalf("operation %+v", got)
		}
		if c := th.nodeConfig(t, "n1"); c.Desired != nil {
			t.Fatalf("validate changed the desire: %+v", c)
		}
	})

	var applied wire.Operation
	t.Run("apply converges from the report", func(t *testing.T) {
		if r := th.do(t, "POST", p+"/apply", configBody(goodConfig), "If-Match", `"generation-3"`); r.status != http.StatusPreconditionFailed {
			t.Fatalf("stale If-Match: %d %s", r.status, r.body)
		}
		r := th.do(t, "POST", p+"/apply", configBody(goodConfig), "If-Match", `"generation-0"`)
		if r.status != http.StatusAccepted || r.header.Get("ETag") != `"generation-1"` {
			t.Fatalf("apply: %d %s", r.status, r.body)
		}
		applied = decode[wire.Operation](t, r)
		cmds := a.commands(t, 5*time.Second)
		if len(cmds) != 1 || cmds[0].Operation != wire.CommandConfigApply || cmds[0].ConfigVersion != "v1" || cmds[0].Generation != 1 ||
			cmds[0].Payload.Content != goodConfig || cmds[0].Payload.Secrets["DB"] != configSecret {
			t.Fatalf("commands %+v", cmds)
		}
		if c := th.nodeConfig(t, "n1"); c.Convergence != wire.ConvergenceApplying {
			t.Fatalf("dispatched: %+v", c)
		}
		a.result(t, cmds[0], wire.ResultSucceeded)
		a.reportConfig(t, "v1", 1)
		evs := decode[wire.Page[wire.Event]](t, th.do(t, "GET", APIPrefix+"/events?kind=configuration_applied&node_id=n1", ""))
		if len(evs.Items) != 1 || evs.Items[0].OperationID != applied.OperationID || evs.Items[0].Data["config_version"] != "v1" {
			t.Fatalf("configuration_applied events %+v", evs.Items)
		}
		eventually(t, "in_sync", func() bool {
			c := th.nodeConfig(t, "n1")
			return c.Convergence == wire.ConvergenceInSync && c.Desired.ConfigVersion == "v1" && c.Desired.Content == goodConfig
		})
		// A local change on the node is drift.
		a.reportConfig(t, "", 0)
		eventually(t, "drift", func() bool {
			c := th.nodeConfig(t, "n1")
			return c.Convergence == wire.ConvergenceDegraded && c.ConvergenceReason == "drift"
		})
		a.reportConfig(t, "v1", 1)
	})

	t.Run("versions, diff and rollback", func(t *testing.T) {
		second := strings.Replace(goodConfig, "s1", "s2", 1)
		r := th.do(t, "POST", p+"/apply", configBody(second))
		if r.status != http.StatusAccepted {
			t.Fatalf("apply: %d %s", r.status, r.body)
		}
		for _, c := range a.commands(t, 5*time.Second) {
			a.result(t, c, wire.ResultSucceeded)
		}
		a.reportConfig(t, "v2", 2)
		r = th.do(t, "GET", p+"/versions", "")
		vs := decode[wire.Page[wire.ConfigVersion]](t, r)
		if vs.Total != 2 || vs.Items[0].Version != "v2" || vs.Items[1].Source != wire.ConfigSourceAPI || vs.Items[0].SHA256 == "" {
			t.Fatalf("versions %+v", vs)
		}
		if r := th.do(t, "GET", p+"/diff?from=v1&to=v7", ""); r.status != http.StatusNotFound || r.problem(t).Code != CodeConfigVersionNotFound {
			t.Fatalf("diff to an unknown version: %d %s", r.status, r.body)
		}
		r = th.do(t, "GET", p+"/diff?from=v1", "") // to: the desired one, v2
		if r.status != http.StatusAccepted {
			t.Fatalf("diff: %d %s", r.status, r.body)
		}
		cmds := a.commands(t, 5*time.Second)
		if len(cmds) != 1 || cmds[0].Operation != wire.CommandConfigDiff || cmds[0].Payload.From.Version != "v1" || cmds[0].Payload.To.Version != "v2" ||
			cmds[0].Payload.To.Content != second || cmds[0].Payload.Secrets != nil {
			t.Fatalf("diff command %+v", cmds)
		}
		a.result(t, cmds[0], wire.ResultSucceeded)
		if r := th.do(t, "POST", p+"/rollback/v5", ""); r.status != http.StatusNotFound || r.problem(t).Code != CodeConfigVersionNotFound {
			t.Fatalf("rollback to an unknown version: %d %s", r.status, r.body)
		}
		r = th.do(t, "POST", p+"/rollback/v1", "")
		if r.status != http.StatusAccepted || r.header.Get("ETag") != `"generation-3"` {
			t.Fatalf("rollback: %d %s", r.status, r.body)
		}
		cmds = a.commands(t, 5*time.Second)
		if len(cmds) != 1 || cmds[0].ConfigVersion != "v1" || cmds[0].Payload.Content != goodConfig {
			t.Fatalf("rollback command %+v", cmds)
		}
		a.result(t, cmds[0], wire.ResultSucceeded)
		if c := th.nodeConfig(t, "n1"); c.Desired.ConfigVersion != "v1" || c.Desired.Generation != 3 {
			t.Fatalf("after rollback: %+v", c)
		}
		// Nothing was deleted.
		if vs := decode[wire.Page[wire.ConfigVersion]](t, th.do(t, "GET", p+"/versions", "")); vs.Total != 2 {
			t.Fatalf("versions after rollback: %+v", vs)
		}
	})

	t.Run("a secret the Hub does not hold is left for the node", func(t *testing.T) {
		// Spec secrets rule 6: node-local secrets resolve on the node.
		doc := strings.Replace(goodConfig, "'{\"pw\"", "'{\"local\": \"${secret:NODE_LOCAL}\", \"pw\"", 1)
		r := th.do(t, "POST", p+"/validate", configBody(doc))
		if r.status != http.StatusAccepted {
			t.Fatalf("validate: %d %s", r.status, r.body)
		}
		cmds := a.commands(t, 5*time.Second)
		if len(cmds) != 1 || cmds[0].Payload.Content != doc || cmds[0].Payload.Secrets["DB"] != configSecret || len(cmds[0].Payload.Secrets) != 1 {
			t.Fatalf("commands %+v", cmds)
		}
		res := wire.CommandResult{AttemptID: cmds[0].AttemptID, State: wire.ResultSucceeded, Result: json.RawMessage(`{"valid":true,"errors":[]}`)}
		if r := a.call(t, "POST", "/commands/"+cmds[0].CommandID+"/result", res, a.session); r.status != http.StatusNoContent {
			t.Fatalf("result: %d %s", r.status, r.body)
		}
	})

	t.Run("a secret reference that cannot resolve anywhere fails the intent before dispatch", func(t *testing.T) {
		r := th.do(t, "POST", p+"/apply", configBody(strings.Replace(goodConfig, "${secret:DB}", "${secret:BAD-NAME}", 1)))
		if r.status != http.StatusAccepted {
			t.Fatalf("apply: %d %s", r.status, r.body)
		}
		op := decode[wire.Operation](t, r)
		eventually(t, "the intent failed", func() bool { return th.operation(t, op.OperationID).State == wire.OpFailed })
		got := th.operation(t, op.OperationID)
		if got.Failure == nil || got.Failure.Code != CodeSecretUnresolved || !strings.Contains(got.Failure.Message, "${secret:BAD-NAME}") {
			t.Fatalf("failure %+v", got.Failure)
		}
		if cmds := a.commands(t, 300*time.Millisecond); len(cmds) != 0 {
			t.Fatalf("dispatched anyway: %+v", cmds)
		}
	})

	t.Run("the secret value is stored nowhere", func(t *testing.T) {
		for _, q := range []string{"/events?page_size=100", "/audit?page_size=100", "/operations?page_size=100", "/nodes/n1/configuration/versions", "/nodes/n1/configuration"} {
			if r := th.do(t, "GET", APIPrefix+q, ""); strings.Contains(string(r.body), configSecret) {
				t.Errorf("GET %s shows the secret", q)
			}
		}
		if got := th.operation(t, applied.OperationID); strings.Contains(string(mustJSON(t, got)), configSecret) {
			t.Error("the apply operation shows the secret")
		}
		th.stop()
		files, _ := filepath.Glob(db + "*")
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), configSecret) {
				t.Errorf("%s holds the secret value", f)
			}
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
