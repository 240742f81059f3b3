package hub

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/wire"
)

// TestDesiredKeepsConfigVersion: a desired-state write without
// config_version keeps the stream's current one; an explicit "" clears it
// (any version will do).
func TestDesiredKeepsConfigVersion(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	put := func(body string) wire.DesiredStateResponse {
		t.Helper()
		r := th.do(t, "PUT", streamPath+"/desired-state", body)
		if r.status != 202 {
			t.Fatalf("PUT %s: %d %s", body, r.status, r.body)
		}
		return decode[wire.DesiredStateResponse](t, r)
	}
	desired := func() wire.StreamDesired {
		t.Helper()
		return decode[wire.Stream](t, th.do(t, "GET", streamPath, "")).Desired
	}
	put(`{"state":"running","config_version":"v7"}`)
	if got := put(`{"state":"stopped"}`); got.ConfigVersion != "v7" || got.Generation != 2 {
		t.Fatalf("202 of a write without config_version: %+v", got)
	}
	if d := cmp.Diff(wire.StreamDesired{State: "stopped", Generation: 2, ConfigVersion: "v7"}, desired()); d != "" {
		t.Fatalf("desired after a write without config_version (-want +got):\n%s", d)
	}
	if got := put(`{"state":"running","config_version":""}`); got.ConfigVersion != "" {
		t.Fatalf("an explicit empty config_version: %+v", got)
	}
	if d := cmp.Diff(wire.StreamDesired{State: "running", Generation: 3}, desired()); d != "" {
		t.Fatalf("desired after config_version \"\" (-want +got):\n%s", d)
	}
	// A first write without config_version accepts any version.
	r := th.do(t, "PUT", "/api/v1/nodes/n1/streams/fresh/desired-state", `{"state":"running"}`)
	if got := decode[wire.DesiredStateResponse](t, r); r.status != 202 || got.ConfigVersion != "" {
		t.Fatalf("first write without config_version: %d %s", r.status, r.body)
	}
}

// TestWriteForUnknownNodeWarns: a write for a node id the Hub has never
// seen is accepted (spec rule 3), and its 202 says the node is unknown;
// GET /nodes lists that node as unknown until it registers. A registered
// node's write carries its status and no warning.
func TestWriteForUnknownNodeWarns(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	r := th.do(t, "PUT", "/api/v1/nodes/typo-node/streams/s1/desired-state", `{"state":"running"}`)
	got := decode[wire.DesiredStateResponse](t, r)
	if r.status != 202 || got.NodeStatus != "unknown" || len(got.Warnings) != 1 || got.Warnings[0].Code != wire.WarningNodeUnknown {
		t.Fatalf("write for an unknown node: %d %s", r.status, r.body)
	}
	nodes := decode[wire.Page[NodeView]](t, th.do(t, "GET", "/api/v1/nodes?status=unknown", ""))
	if nodes.Total != 1 || nodes.Items[0].NodeID != "typo-node" {
		t.Fatalf("GET /nodes?status=unknown: %+v", nodes.Items)
	}

	a := newTestAgent(th, "n1")
	a.register(t, "", 15*time.Second)
	r = th.do(t, "PUT", streamPath+"/desired-state", `{"state":"running"}`)
	if got := decode[wire.DesiredStateResponse](t, r); got.NodeStatus != "online" || got.Warnings != nil {
		t.Fatalf("write for a registered node: %s", r.body)
	}
	// The unknown node registers: its write is no longer warned about.
	b := newTestAgent(th, "typo-node")
	b.register(t, "", 15*time.Second)
	r = th.do(t, "POST", "/api/v1/nodes/typo-node/streams/s1/stop", "")
	if got := decode[wire.DesiredStateResponse](t, r); r.status != 202 || got.NodeStatus != "online" || got.Warnings != nil {
		t.Fatalf("write after the node registered: %d %s", r.status, r.body)
	}
}
