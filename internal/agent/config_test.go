package agent_test

import (
	"encoding/json"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/agent"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/wire"
)

const (
	cfgSecretName  = "AGENT_CFG_TOKEN"
	cfgSecretValue = "agent-Hub-Resolved-9d2f-value-never-kept"
)

// hubConfig is a configuration with streams a and b; b's context holds
// a ${secret:} reference.
func hubConfig(extra string) string {
	return "logging: {level: error}\nhealth_check: {enabled: false}\nstreams:\n" + genStream("a") +
		`  - id: b
    input: {type: generate, context: '{"token": "${secret:` + cfgSecretName + `}"}', interval: 10ms, batch_size: 1}
    pipeline: {processors: []}
    output: {type: drop}
` + extra
}

func applyCommand(id, attempt, hubVersion string, generation int64, content string) wire.Command {
	return wire.Command{
		CommandID: id, AttemptID: attempt, Operation: wire.CommandConfigApply, NodeID: testNodeID, ResourceID: wire.ConfigResource,
		Generation: generation, ConfigVersion: hubVersion,
		Payload: wire.CommandPayload{ConfigCommand: wire.ConfigCommand{Format: "yaml", Content: content, Secrets: map[string]string{cfgSecretName: cfgSecretValue}}},
	}
}

// waitConfiguration waits for a report whose configuration is want.
func (h *testHub) waitConfiguration(t *testing.T, want wire.ReportConfiguration) {
	t.Helper()
	h.waitFor(t, "a report of configuration "+mustJSON(t, want), func() bool {
		rep, ok := h.lastReportLocked()
		return ok && rep.Configuration != nil && *rep.Configuration == want
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func decodeResult[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Result, &v); err != nil {
		t.Fatalf("result of %s: %v (%s)", r.CommandID, err, r.Result)
	}
	return v
}

// TestConfigApplyAndReport: a configuration_apply runs through the node's
// diff-apply with the Hub's secret, is recorded durably, and reports say
// which Hub version the node runs until a local apply makes it drift. The
// secret value reaches no file, report, result or log.
func TestConfigApplyAndReport(t *testing.T) {
	hub := newTestHub(t, testNodeToken)
	dir := t.TempDir()
	// Reports come from changes only: the period never elapses.
	tn := startNode(t, nodeOptions{stateDir: dir, hubURLs: []string{hub.URL}, streams: []string{"a"}, tune: func(o *agent.Options) { o.ReportPeriod = time.Hour }})
	hub.waitConfiguration(t, wire.ReportConfiguration{NodeVersion: "v1"})
	hub.mu.Lock()
	caps := hub.registers[0].Capabilities
	hub.mu.Unlock()
	if !slices.Contains(caps, wire.CapabilityConfigControl) {
		t.Errorf("capabilities %v lack %s", caps, wire.CapabilityConfigControl)
	}
	genA := tn.stream(t, "a").Desired.Generation

	hub.enqueue(applyCommand("cfg-1", "att-1", "v7", 3, hubConfig("")))
	r := hub.waitFinal(t, "cfg-1", "att-1")
	if r.State != wire.ResultSucceeded {
		t.Fatalf("apply: %+v", r)
	}
	want := wire.ConfigApplyResult{ConfigVersion: "v7", NodeVersion: "v2", Added: []string{"b"}, Removed: []string{}, Changed: []string{}, Unchanged: []string{"a"}}
	if d := cmp.Diff(want, decodeResult[wire.ConfigApplyResult](t, r)); d != "" {
		t.Errorf("apply result (-want +got):\n%s", d)
	}
	hub.waitConfiguration(t, wire.ReportConfiguration{NodeVersion: "v2", HubVersion: "v7", Generation: 3})
	if g := tn.stream(t, "a").Desired.Generation; g != genA {
		t.Errorf("unchanged stream a restarted: generation %d -> %d", genA, g)
	}
	if evs := tn.hubEvents(wire.EventConfigurationApplied, "cfg-1"); len(evs) != 1 || evs[0].Data["hub_version"] != "v7" {
		t.Errorf("configuration_applied events %+v, want one with hub_version v7", evs)
	}
	var file struct {
		Version       int                 `json:"version"`
		Configuration *agent.ConfigRecord `json:"configuration"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "agent", "hub-state.json"))
	if err == nil {
		err = json.Unmarshal(b, &file)
	}
	if err != nil {
		t.Fatal(err)
	}
	if c := file.Configuration; file.Version != 4 || c == nil || c.HubVersion != "v7" || c.Generation != 3 || c.NodeVersion != "v2" {
		t.Errorf("state file version %d, configuration %+v; want 4, v7 at 3 as v2", file.Version, c)
	}

	// A local apply through the Node API: the Hub sees drift.
	op, err := tn.n.Apply(node.Document{Format: config.YAML, Content: []byte("logging: {level: error}\nhealth_check: {enabled: false}\nstreams:\n" + genStream("a"))}, node.Request{Actor: "operator"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tn.n.WaitOperation(t.Context(), op.OperationID); err != nil {
		t.Fatal(err)
	}
	hub.waitConfiguration(t, wire.ReportConfiguration{NodeVersion: "v3"})

	tn.stop()
	hub.checkNoTokenLeak(t, testNodeToken)
	noSecret(t, dir, hub, tn)
}

// noSecret requires that the Hub's secret value is in no file under dir,
// no request the Hub received and no log line.
func noSecret(t *testing.T, dir string, hub *testHub, tn *testNode) {
	t.Helper()
	files := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		if strings.Contains(string(b), cfgSecretValue) {
			t.Errorf("%s holds the secret value", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 3 {
		t.Errorf("only %d files checked", files)
	}
	hub.mu.Lock()
	defer hub.mu.Unlock()
	for _, r := range hub.requests {
		if strings.Contains(string(r.Body), cfgSecretValue) {
			t.Errorf("%s %s sent the secret value", r.Method, r.Path)
		}
	}
	if strings.Contains(tn.logs.String(), cfgSecretValue) {
		t.Errorf("the logs hold the secret value")
	}
}

// TestConfigApplyRedelivery: the same command delivered again, or the
// same generation under another command id while the node still runs its
// version, is answered from the record: the configuration is applied once.
func TestConfigApplyRedelivery(t *testing.T) {
	hub := newTestHub(t, testNodeToken)
	dir := t.TempDir()
	tn := startNode(t, nodeOptions{stateDir: dir, hubURLs: []string{hub.URL}, streams: []string{"a"}})
	hub.waitConfiguration(t, wire.ReportConfiguration{NodeVersion: "v1"})
	first := applyCommand("cfg-1", "att-1", "v2", 5, hubConfig(""))
	again := first
	again.AttemptID = "att-2"
	hub.enqueue(first, again)
	r1, r2 := hub.waitFinal(t, "cfg-1", "att-1"), hub.waitFinal(t, "cfg-1", "att-2")
	if r1.State != wire.ResultSucceeded || string(r1.Result) != string(r2.Result) {
		t.Fatalf("attempts: %+v / %+v", r1, r2)
	}
	late := first
	late.AttemptID = "att-3"
	other := applyCommand("cfg-2", "att-1", "v2", 5, hubConfig(""))
	hub.enqueue(late, other)
	for _, r := range []result{hub.waitFinal(t, "cfg-1", "att-3"), hub.waitFinal(t, "cfg-2", "att-1")} {
		if r.State != wire.ResultSucceeded || string(r.Result) != string(r1.Result) {
			t.Errorf("%s/%s: %+v, want the recorded result %s", r.CommandID, r.AttemptID, r, r1.Result)
		}
	}
	if vs, _ := tn.n.Versions(); len(vs) != 2 {
		t.Errorf("%d versions, want 2: the configuration was applied more than once", len(vs))
	}
	if evs := tn.hubEvents(wire.EventConfigurationApplied, "cfg-2"); len(evs) != 0 {
		t.Errorf("cfg-2 applied again")
	}
	hub.waitConfiguration(t, wire.ReportConfiguration{NodeVersion: "v2", HubVersion: "v2", Generation: 5})

	// After a restart the record still answers, and the node still runs it
	// (its environment holds the secret now: cmd/flowplane falls back to
	// the file version when it does not, see its boot).
	tn.stop()
	t.Setenv("SVC_SECRET_"+cfgSecretName, cfgSecretValue)
	tn = startNode(t, nodeOptions{stateDir: dir, hubURLs: []string{hub.URL}, streams: []string{"a"}})
	hub.waitConfiguration(t, wire.ReportConfiguration{NodeVersion: "v2", HubVersion: "v2", Generation: 5})
	hub.enqueue(applyCommand("cfg-3", "att-1", "v2", 5, hubConfig("")))
	if r := hub.waitFinal(t, "cfg-3", "att-1"); r.State != wire.ResultSucceeded {
		t.Errorf("cfg-3: %+v", r)
	}
	if vs, _ := tn.n.Versions(); len(vs) != 2 {
		t.Errorf("%d versions after a restart, want 2", len(vs))
	}
}

// TestConfigCommands: validate and diff answer the node's report and diff;
// an invalid apply fails with its report; an unknown node version is
// config_version_unavailable; a Hub rollback to the node's own version is
// applied and reported without a Hub version.
func TestConfigCommands(t *testing.T) {
	hub := newTestHub(t, testNodeToken)
	dir := t.TempDir()
	tn := startNode(t, nodeOptions{stateDir: dir, hubURLs: []string{hub.URL}, streams: []string{"a"}})
	hub.waitConfiguration(t, wire.ReportConfiguration{NodeVersion: "v1"})
	cmd := func(id, op string, p wire.ConfigCommand) wire.Command {
		return wire.Command{CommandID: id, AttemptID: id + "-1", Operation: op, NodeID: testNodeID, ResourceID: wire.ConfigResource, Payload: wire.CommandPayload{ConfigCommand: p}}
	}
	secrets := map[string]string{cfgSecretName: cfgSecretValue}
	invalid := hubConfig("  - id: c\n    input: {type: generate, context: x, interval: 'soon'}\n    pipeline: {processors: []}\n    output: {type: nowhere}\n")
	badApply := applyCommand("apply-bad", "apply-bad-1", "v4", 2, invalid)
	badApply.Payload.Secrets = secrets
	unknown := cmd("apply-unknown", wire.CommandConfigApply, wire.ConfigCommand{NodeVersion: "v99"})
	unknown.Generation = 3
	from := &wire.ConfigDiffSide{Version: "node:v1", ConfigDocument: wire.ConfigDocument{Format: "yaml", Content: "streams:\n" + genStream("a")}}
	to := &wire.ConfigDiffSide{Version: "v4", ConfigDocument: wire.ConfigDocument{Format: "yaml", Content: hubConfig("")}}
	hub.enqueue(
		cmd("val-ok", wire.CommandConfigValidate, wire.ConfigCommand{Format: "yaml", Content: hubConfig(""), Secrets: secrets}),
		cmd("val-bad", wire.CommandConfigValidate, wire.ConfigCommand{Format: "yaml", Content: invalid, Secrets: secrets}),
		cmd("diff", wire.CommandConfigDiff, wire.ConfigCommand{From: from, To: to}),
		badApply, unknown,
	)
	if r := hub.waitFinal(t, "val-ok", "val-ok-1"); r.State != wire.ResultSucceeded || !decodeResult[node.Report](t, r).Valid {
		t.Errorf("val-ok: %+v %s", r, r.Result)
	}
	r := hub.waitFinal(t, "val-bad", "val-bad-1")
	if rep := decodeResult[node.Report](t, r); r.State != wire.ResultSucceeded || rep.Valid || len(rep.Errors) < 2 {
		t.Errorf("val-bad: %+v %s, want succeeded with valid false", r, r.Result)
	}
	r = hub.waitFinal(t, "diff", "diff-1")
	if d := decodeResult[node.DiffReport](t, r); r.State != wire.ResultSucceeded || d.From != "node:v1" || d.To != "v4" || !slices.Equal(d.Summary.Added, []string{"b"}) || !strings.Contains(d.Unified, "+  - id: b") {
		t.Errorf("diff: %+v %s", r, r.Result)
	}
	r = hub.waitFinal(t, "apply-bad", "apply-bad-1")
	if f := r.Failure; r.State != wire.ResultFailed || f == nil || f.Class != "permanent" || f.Code != "validation_failed" || !strings.HasPrefix(f.Message, "configuration has ") || !strings.Contains(f.Message, " problems; the first: ") {
		t.Errorf("apply-bad: %+v", r)
	}
	if rep := decodeResult[node.Report](t, r); rep.Valid || len(rep.Errors) < 2 {
		t.Errorf("apply-bad result %s, want the report", r.Result)
	}
	r = hub.waitFinal(t, "apply-unknown", "apply-unknown-1")
	if f := r.Failure; r.State != wire.ResultFailed || f == nil || f.Class != "permanent" || f.Code != "config_version_unavailable" {
		t.Errorf("apply-unknown: %+v", r)
	}
	if vs, _ := tn.n.Versions(); len(vs) != 1 {
		t.Errorf("%d versions after commands that change nothing, want 1", len(vs))
	}

	// Apply a Hub version, then roll back to the node's own v1.
	hub.enqueue(applyCommand("apply", "apply-1", "v4", 4, hubConfig("")))
	if r := hub.waitFinal(t, "apply", "apply-1"); r.State != wire.ResultSucceeded {
		t.Fatalf("apply: %+v", r)
	}
	hub.waitConfiguration(t, wire.ReportConfiguration{NodeVersion: "v2", HubVersion: "v4", Generation: 4})
	back := cmd("rollback", wire.CommandConfigApply, wire.ConfigCommand{NodeVersion: "v1"})
	back.Generation = 5
	hub.enqueue(back)
	r = hub.waitFinal(t, "rollback", "rollback-1")
	if res := decodeResult[wire.ConfigApplyResult](t, r); r.State != wire.ResultSucceeded || res.NodeVersion != "v3" || res.ConfigVersion != "" || !slices.Equal(res.Removed, []string{"b"}) {
		t.Errorf("rollback: %+v %s", r, r.Result)
	}
	hub.waitConfiguration(t, wire.ReportConfiguration{NodeVersion: "v3", Generation: 5})
	tn.stop()
	noSecret(t, dir, hub, tn)
}

// TestConfigApplyStreamFails: a version whose new stream fails to start
// is applied all the same: the command succeeds and the report shows the
// stream failed.
func TestConfigApplyStreamFails(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taken.Close() })
	hub := newTestHub(t, testNodeToken)
	tn := startNode(t, nodeOptions{stateDir: t.TempDir(), hubURLs: []string{hub.URL}, streams: []string{"a"}})
	hub.waitConfiguration(t, wire.ReportConfiguration{NodeVersion: "v1"})
	in := "  - id: in\n    input: {type: http, address: '" + taken.Addr().String() + "', path: /ingest}\n    pipeline: {processors: []}\n    output: {type: drop}\n"
	hub.enqueue(applyCommand("cfg", "att", "v2", 2, hubConfig(in)))
	r := hub.waitFinal(t, "cfg", "att")
	if res := decodeResult[wire.ConfigApplyResult](t, r); r.State != wire.ResultSucceeded || !slices.Contains(res.Added, "in") {
		t.Fatalf("apply: %+v %s", r, r.Result)
	}
	hub.waitConfiguration(t, wire.ReportConfiguration{NodeVersion: "v2", HubVersion: "v2", Generation: 2})
	hub.waitStream(t, "in", "failed", func(s wire.ReportStream) bool { return s.State == "failed" })
	_ = tn
}
