package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
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
	if d, ok := st.desire("a"); !ok || d.Generation != 4 || len(st.allJobs()) != 0 {
		t.Errorf("desire %+v %v, jobs %v", d, ok, st.allJobs())
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
	if err := st.recordJob(Outcome{CommandID: "c2", State: "succeeded"}, "j", &JobDesire{State: "running", Generation: 2, Version: 3, Spec: json.RawMessage(`{"id":"j"}`)}); err != nil {
		t.Fatal(err)
	}
	again, err := openStore(dir, "n1", discard())
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := again.job("j"); !ok || d.Generation != 2 || d.Version != 3 || string(d.Spec) != `{"id":"j"}` {
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
