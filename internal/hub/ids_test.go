package hub

import (
	"net/http"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/wire"
)

// TestIDsValidated: node and stream ids with NUL, CR/LF, invalid UTF-8,
// spaces or more than 128 bytes are refused with 422 validation_failed
// naming the parameter, on operator routes and in the agent protocol.
func TestIDsValidated(t *testing.T) {
	th := serve(t, "", testToken, true)
	auth := []string{"Authorization", "Bearer " + testToken}
	long := strings.Repeat("a", 129)
	bad := []string{"a%00b", "a%0D%0Ab", "a%FFb", "a%20b", "-a", long}
	for _, id := range bad {
		for _, rt := range []struct{ method, path, body, param string }{
			{"GET", "/nodes/" + id, "", "node_id"},
			{"GET", "/nodes/" + id + "/streams/s", "", "node_id"},
			{"GET", "/nodes/n/streams/" + id, "", "stream_id"},
			{"PUT", "/nodes/" + id + "/streams/s/desired-state", `{"state":"running"}`, "node_id"},
			{"PUT", "/nodes/n/streams/" + id + "/desired-state", `{"state":"running"}`, "stream_id"},
			{"POST", "/nodes/n/streams/" + id + "/actions/restart", "", "stream_id"},
			{"POST", "/nodes/" + id + "/drain", "", "node_id"},
			{"POST", "/streams/" + id + "/start", "", "stream_id"},
		} {
			r := th.do(t, rt.method, APIPrefix+rt.path, rt.body, auth...)
			if r.status != http.StatusUnprocessableEntity {
				t.Errorf("%s %s: %d %s, want 422", rt.method, rt.path, r.status, r.body)
				continue
			}
			p := r.problem(t)
			errs, _ := p.Details["errors"].([]any)
			if p.Code != "validation_failed" || len(errs) != 1 || !strings.Contains(string(r.body), `"path":"`+rt.param+`"`) {
				t.Errorf("%s %s: problem %s, want validation_failed at %s", rt.method, rt.path, r.body, rt.param)
			}
		}
	}
	// A valid id that does not exist is still a 404.
	if r := th.do(t, "GET", APIPrefix+"/nodes/node-1.a_b", "", auth...); r.status != http.StatusNotFound {
		t.Errorf("unknown valid node: %d", r.status)
	}

	for _, id := range []string{"a\x00b", "a\r\nb", "a\xffb", "", long} {
		a := newTestAgent(th, id)
		r := a.call(t, "POST", "/register", wire.RegisterRequest{NodeID: id, BootID: "b", ProtocolVersion: wire.ProtocolVersion,
			Capabilities: []string{wire.CapabilityStreamControl}, NodeCredential: credentialOf("n")}, nodeTokenFor(testToken))
		if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), `"path":"node_id"`) {
			t.Errorf("register node_id %q: %d %s, want 422 at node_id", id, r.status, r.body)
		}
	}
	a := newTestAgent(th, "node-a")
	a.register(t, nodeTokenFor(testToken), 0)
	r := a.call(t, "POST", "/report", wire.Report{BootID: a.bootID, ReportSeq: 1,
		Streams: []wire.ReportStream{{ID: "ok", State: "running"}, {ID: "bad\nid", State: "running"}}}, a.session)
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), `"path":"streams[1].id"`) {
		t.Errorf("report with a bad stream id: %d %s, want 422 at streams[1].id", r.status, r.body)
	}
}
