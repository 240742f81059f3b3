package hub

import (
	"net/http"
	"slices"
	"testing"

	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// TestUnmanageStream: a desired-state write to a typo'd node leaves a
// phantom node and a stream nobody can run; DELETE of its desired state
// removes both, audited, with a convergence_changed to unknown; If-Match
// is honoured and a stream without desired state is 404.
func TestUnmanageStream(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	path := APIPrefix + "/nodes/typo-node/streams/s1/desired-state"
	for range 2 {
		if r := th.do(t, "PUT", path, `{"state":"running"}`, bearer...); r.status != http.StatusAccepted {
			t.Fatalf("desired: %d %s", r.status, r.body)
		}
	}
	if r := th.do(t, "PUT", APIPrefix+"/nodes/typo-node/streams/s2/desired-state", `{"state":"stopped"}`, bearer...); r.status != http.StatusAccepted {
		t.Fatalf("desired s2: %d %s", r.status, r.body)
	}
	if nodes := operatorGet[wire.Page[NodeView]](t, th, "/nodes"); nodes.Total != 1 {
		t.Fatalf("the phantom node is not listed: %+v", nodes)
	}
	// Its streams count agrees with its streams list (the console's Facts
	// card and its table).
	n := operatorGet[NodeView](t, th, "/nodes/typo-node")
	if list := operatorGet[wire.Page[wire.Stream]](t, th, "/streams?node_id=typo-node"); n.Streams != 2 || list.Total != 2 {
		t.Fatalf("phantom node streams %d, its list %d; want 2 and 2", n.Streams, list.Total)
	}
	if r := th.do(t, "DELETE", APIPrefix+"/nodes/typo-node/streams/s2/desired-state", "", bearer...); r.status != http.StatusNoContent {
		t.Fatalf("unmanage s2: %d %s", r.status, r.body)
	}
	tests := []struct {
		name     string
		ifMatch  string
		status   int
		code     string
		endpoint string
	}{
		{"malformed If-Match", "generation-2", http.StatusBadRequest, "invalid_header", path},
		{"stale If-Match", `"generation-1"`, http.StatusPreconditionFailed, "generation_conflict", path},
		{"no desired state", "", http.StatusNotFound, CodeStreamNotFound, APIPrefix + "/nodes/typo-node/streams/other/desired-state"},
		{"current If-Match", `"generation-2"`, http.StatusNoContent, "", path},
		{"deleted twice", "", http.StatusNotFound, CodeStreamNotFound, path},
	}
	for _, tc := range tests {
		hdr := slices.Clone(bearer)
		if tc.ifMatch != "" {
			hdr = append(hdr, "If-Match", tc.ifMatch)
		}
		r := th.do(t, "DELETE", tc.endpoint, "", hdr...)
		if r.status != tc.status || (tc.code != "" && r.problem(t).Code != tc.code) {
			t.Fatalf("%s: %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
	}
	if r := th.do(t, "GET", APIPrefix+"/nodes/typo-node/streams/s1", "", bearer...); r.status != http.StatusNotFound {
		t.Fatalf("the stream after the delete: %d %s", r.status, r.body)
	}
	if nodes := operatorGet[wire.Page[NodeView]](t, th, "/nodes"); nodes.Total != 0 {
		t.Fatalf("the phantom node stays: %+v", nodes)
	}
	if ops := operatorGet[wire.Page[wire.Operation]](t, th, "/operations?state=pending"); ops.Total != 0 {
		t.Fatalf("pending operations stay: %+v", ops.Items)
	}
	ev := operatorGet[wire.Page[wire.Event]](t, th, "/events?kind="+wire.EventConvergenceChanged+"&resource_id=s1")
	if !slices.ContainsFunc(ev.Items, func(e wire.Event) bool {
		return e.Data["convergence"] == wire.ConvergenceUnknown && e.Data["reason"] == store.ReasonNotManaged && e.Actor != ""
	}) {
		t.Fatalf("no convergence_changed to unknown: %+v", ev.Items)
	}
	audit := operatorGet[wire.Page[store.AuditRecord]](t, th, "/audit?action="+store.ActionStreamUnmanage)
	var outcomes []string
	for _, a := range audit.Items {
		outcomes = append(outcomes, a.Outcome)
	}
	slices.Sort(outcomes)
	// The refusals (412, two 404s; the 400 is refused before the handler
	// reads the stream) are audited too.
	if !slices.Contains(outcomes, store.OutcomeAccepted) || len(outcomes) < 2 {
		t.Fatalf("audit outcomes %v", outcomes)
	}
	// Managed again, from generation 1.
	if r := th.do(t, "PUT", path, `{"state":"stopped"}`, bearer...); r.status != http.StatusAccepted || decode[wire.DesiredStateResponse](t, r).Generation != 1 {
		t.Fatalf("managed again: %d %s", r.status, r.body)
	}
}
