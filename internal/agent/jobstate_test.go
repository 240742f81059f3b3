package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/engine"
)

// TestStoreMigratesVersion1: a version 1 file (streams only) is read,
// holds no jobs, and is written back as the current version with its
// streams and outcomes kept.
func TestStoreMigratesVersion1(t *testing.T) {
	dir := t.TempDir()
	v1 := `{"version":1,"node_id":"n1","streams":{"a":{"state":"stopped","generation":4}},"outcomes":[{"command_id":"c1","state":"succeeded"}]}`
	if err := os.WriteFile(filepath.Join(dir, stateFileName), []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := openStore(dir, "n1", discard())
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := st.streams.get("a"); !ok || d.Generation != 4 || len(st.jobs.all()) != 0 {
		t.Errorf("desire %+v %v, jobs %v", d, ok, st.jobs.all())
	}
	if _, ok := st.outcome("c1"); !ok {
		t.Error("outcome c1 lost")
	}
	var f stateFile
	b, _ := os.ReadFile(filepath.Join(dir, stateFileName))
	if err := json.Unmarshal(b, &f); err != nil || f.Version != stateVersion || f.Streams["a"].Generation != 4 {
		t.Fatalf("migrated file %s (%v)", b, err)
	}
	// A job desire survives a reopen.
	if err := st.jobs.record(Outcome{CommandID: "c2", State: "succeeded"}, "j", &JobDesire{State: "running", Generation: 2, Version: 3, Spec: json.RawMessage(`{"id":"j"}`)}); err != nil {
		t.Fatal(err)
	}
	again, err := openStore(dir, "n1", discard())
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := again.jobs.get("j"); !ok || d.Generation != 2 || d.Version != 3 || string(d.Spec) != `{"id":"j"}` {
		t.Errorf("job desire after reopen %+v %v", d, ok)
	}
	// A newer version than this Agent knows is moved aside.
	if err := os.WriteFile(filepath.Join(dir, stateFileName), []byte(`{"version":99,"node_id":"n1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openStore(dir, "n1", discard()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, stateFileName+".discarded")); err != nil {
		t.Errorf("a newer version was not moved aside: %v", err)
	}
}

// TestStoreSplitDesire: a version 2 file (jobs, no split placements)
// loads and is rewritten as version 3; a split job's placement and secret
// survive a reopen, in a file only its owner reads.
func TestStoreSplitDesire(t *testing.T) {
	dir := t.TempDir()
	v2 := `{"version":2,"node_id":"n1","streams":{},"jobs":{"j":{"state":"running","generation":2,"version":1,"spec":{"id":"j"}}},"outcomes":[]}`
	path := filepath.Join(dir, stateFileName)
	if err := os.WriteFile(path, []byte(v2), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := openStore(dir, "n1", discard())
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := st.jobs.get("j"); !ok || d.Generation != 2 || d.TaskNodes != nil || d.DataSecret != "" {
		t.Errorf("version 2 job desire %+v %v", d, ok)
	}
	var f stateFile
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &f); err != nil || f.Version != stateVersion {
		t.Fatalf("migrated file %s (%v)", b, err)
	}
	want := JobDesire{State: "running", Generation: 3, Version: 1, Spec: json.RawMessage(`{"id":"s"}`),
		TaskNodes: map[string]string{"src#0": "n1", "src#1": "n2"}, NodeDataPorts: map[string]string{"n1": "10.0.0.1:7000", "n2": "10.0.0.2:7000"},
		DataSecret: "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"}
	if err := st.jobs.record(Outcome{CommandID: "c1", State: "succeeded"}, "s", &want); err != nil {
		t.Fatal(err)
	}
	again, err := openStore(dir, "n1", discard())
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := again.jobs.get("s"); !jsonEq(d, want) {
		t.Errorf("split desire after reopen %+v, want %+v", d, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v (%v), want 0600", fi.Mode(), err)
	}
}

// TestApplySplit: the secret decodes from base64url padded or not; one
// that does not decode is refused without its value in the error; a
// colocated desire leaves the HubJob whole.
func TestApplySplit(t *testing.T) {
	tasks := map[string]string{"src#0": "n1"}
	for _, c := range []struct {
		name, secret string
		ok           bool
	}{
		{"unpadded", "AAECAwQ", true},
		{"padded", "AAECAwQ=", true},
		{"standard alphabet", "+/+/", false},
		{"garbage", "not base64!", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var h engine.HubJob
			err := JobDesire{TaskNodes: tasks, NodeDataPorts: map[string]string{"n1": "a:1"}, DataSecret: c.secret}.applySplit(&h)
			if (err == nil) != c.ok {
				t.Fatalf("applySplit = %v, want ok %v", err, c.ok)
			}
			if err != nil && strings.Contains(err.Error(), c.secret) {
				t.Errorf("error %q holds the secret", err)
			}
			if c.ok && (string(h.DataSecret) != "\x00\x01\x02\x03\x04" || h.TaskNodes["src#0"] != "n1" || h.DataAddresses["n1"] != "a:1") {
				t.Errorf("HubJob %+v", h)
			}
		})
	}
	var h engine.HubJob
	if err := (JobDesire{DataSecret: "ignored"}).applySplit(&h); err != nil || h.TaskNodes != nil || h.DataSecret != nil {
		t.Errorf("colocated desire: %v, %+v", err, h)
	}
}

func jsonEq(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestStoreMigratesVersion3: a version 3 file (no configuration record)
// loads with its streams, jobs and outcomes, holds no configuration, and
// is rewritten as version 4; a configuration record then survives a
// reopen.
func TestStoreMigratesVersion3(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, stateFileName)
	v3 := `{"version":3,"node_id":"n1","streams":{"a":{"state":"running","generation":7}},` +
		`"jobs":{"j":{"state":"running","generation":2,"version":1,"spec":{"id":"j"},"task_nodes":{"src#0":"n1"}}},` +
		`"outcomes":[{"command_id":"c1","state":"succeeded"}]}`
	if err := os.WriteFile(path, []byte(v3), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := openStore(dir, "n1", discard())
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := st.streams.get("a"); !ok || d.Generation != 7 {
		t.Errorf("stream desire %+v %v", d, ok)
	}
	if d, ok := st.jobs.get("j"); !ok || d.TaskNodes["src#0"] != "n1" {
		t.Errorf("job desire %+v %v", d, ok)
	}
	if _, ok := st.outcome("c1"); !ok {
		t.Error("outcome c1 lost")
	}
	if c, ok := st.configuration(); ok {
		t.Errorf("a version 3 file has configuration %+v", c)
	}
	var f stateFile
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &f); err != nil || f.Version != 4 || f.Configuration != nil || f.Streams["a"].Generation != 7 {
		t.Fatalf("migrated file %s (%v)", b, err)
	}
	rec := ConfigRecord{HubVersion: "v3", Generation: 9, NodeVersion: "v5", CommandID: "c2"}
	if err := st.recordConfig(Outcome{CommandID: "c2", State: "succeeded", Result: json.RawMessage(`{"node_version":"v5"}`)}, &rec); err != nil {
		t.Fatal(err)
	}
	// A failed command keeps the record.
	if err := st.recordConfig(Outcome{CommandID: "c3", State: "failed"}, nil); err != nil {
		t.Fatal(err)
	}
	again, err := openStore(dir, "n1", discard())
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := again.configuration(); !ok || c != rec {
		t.Errorf("configuration after reopen %+v %v, want %+v", c, ok, rec)
	}
	if o, ok := again.outcome("c2"); !ok || string(o.Result) != `{"node_version":"v5"}` {
		t.Errorf("outcome c2 after reopen %+v %v", o, ok)
	}
}
