package node_test

import (
	"encoding/json"
	"testing"

	"github.com/flowplane/flowplane/internal/node"
)

// TestStatusDataPlane: /status has no data_plane on a node without one.
func TestStatusDataPlane(t *testing.T) {
	h := newHarness(t, doc("", genStream("s", `{"a": 1}`)))
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(h.expect(t, 200, "GET", "/status", "").Body, &raw); err != nil {
		t.Fatal(err)
	}
	if v, ok := raw["data_plane"]; ok {
		t.Errorf("/status of a node without a data plane has data_plane %s", v)
	}
}

// TestStatusDataPlaneListening needs the real data plane
// (internal/dataplane): /status shows data_plane with its address and no
// jobs (a list, not null) while no split job runs.
func TestStatusDataPlaneListening(t *testing.T) {
	h := newHarness(t, doc("", genStream("s", `{"a": 1}`)), harnessOptions{dataPlane: true})
	r := h.expect(t, 200, "GET", "/status", "")
	st := decode[node.Status](t, r)
	if st.DataPlane == nil || st.DataPlane.Address != h.dp.Addr() || st.DataPlane.Jobs == nil || len(st.DataPlane.Jobs) != 0 {
		t.Fatalf("/status data_plane = %+v (%s), want address %s and no jobs", st.DataPlane, r.Body, h.dp.Addr())
	}
}
