package hub

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/access"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// registerAs registers a's node with cred and the given node token.
func registerAs(t *testing.T, a *testAgent, nodeToken, cred string, sessionTTL time.Duration) resp {
	t.Helper()
	return a.call(t, "POST", "/register", wire.RegisterRequest{NodeID: a.nodeID, BootID: a.bootID, Version: "test",
		ProtocolVersion: wire.ProtocolVersion, Capabilities: []string{wire.CapabilityStreamControl},
		SessionTTLMS: sessionTTL.Milliseconds(), NodeCredential: cred}, nodeToken)
}

// operatorGet is a GET of the operator API, decoded as T.
func operatorGet[T any](t *testing.T, th *testHub, path string) T {
	t.Helper()
	r := th.do(t, "GET", APIPrefix+path, "", "Authorization", "Bearer "+testToken)
	if r.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, r.status, r.body)
	}
	return decode[T](t, r)
}

// TestRegisterKnownNodeWithAnotherCredential: the shared node token alone
// no longer takes over a known node id. The refusal is 403
// node_identity_mismatch with the fix in its message, audited and
// evented; the first node's session keeps working.
func TestRegisterKnownNodeWithAnotherCredential(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	owner := newTestAgent(th, "node-a")
	first := owner.register(t, nodeTokenFor(testToken), 15*time.Second)
	intruder := newTestAgent(th, "node-a")
	r := registerAs(t, intruder, nodeTokenFor(testToken), credentialOf("someone-else"), 0)
	if r.status != http.StatusForbidden || r.problem(t).Code != CodeNodeIdentityMismatch {
		t.Fatalf("another credential: %d %s, want 403 %s", r.status, r.body, CodeNodeIdentityMismatch)
	}
	if msg := r.problem(t).Message; !strings.Contains(msg, "flowplane ctl node forget node-a") {
		t.Fatalf("the refusal does not say the fix: %q", msg)
	}
	if strings.Contains(string(r.body), credentialOf("someone-else")) || strings.Contains(string(r.body), credentialOf("node-a")) {
		t.Fatal("the refusal echoes a credential")
	}
	if r := owner.call(t, "POST", "/heartbeat", wire.HeartbeatRequest{BootID: owner.bootID}, first.SessionToken); r.status != http.StatusOK {
		t.Fatalf("the owner's session after the refusal: %d %s", r.status, r.body)
	}
	audit := operatorGet[wire.Page[store.AuditRecord]](t, th, "/audit?action="+actionNodeRegister)
	if len(audit.Items) != 1 || audit.Items[0].Outcome != store.OutcomeRejected || audit.Items[0].FailureCode != CodeNodeIdentityMismatch ||
		audit.Items[0].NodeID != "node-a" || audit.Items[0].ActorKind != string(access.KindNode) {
		t.Fatalf("audit: %+v", audit.Items)
	}
	evs := operatorGet[wire.Page[wire.Event]](t, th, "/events?kind="+wire.EventNodeIdentityMismatch)
	if len(evs.Items) != 1 || evs.Items[0].NodeID != "node-a" {
		t.Fatalf("events: %+v", evs.Items)
	}
	// A credential too short to be one is refused before anything.
	if r := registerAs(t, newTestAgent(th, "node-b"), nodeTokenFor(testToken), "short", 0); r.status != http.StatusUnprocessableEntity ||
		!strings.Contains(string(r.body), `"path":"node_credential"`) {
		t.Fatalf("a short credential: %d %s", r.status, r.body)
	}
}

// TestForgetNode: DELETE /nodes/{node_id} is 404 for an unknown node, 409
// while the node is online, 204 with ?force=true; the session ends at
// once (a parked long poll is answered, the next call is 401), the desired
// state stays, and the id can be registered with another credential.
func TestForgetNode(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	del := func(path string) resp {
		return th.do(t, "DELETE", APIPrefix+"/nodes/"+path, "", "Authorization", "Bearer "+testToken)
	}
	if r := del("nobody"); r.status != http.StatusNotFound || r.problem(t).Code != CodeNodeNotFound {
		t.Fatalf("unknown node: %d %s", r.status, r.body)
	}
	a := newTestAgent(th, "n1")
	reg := a.register(t, nodeTokenFor(testToken), time.Minute)
	if r := th.do(t, "PUT", APIPrefix+"/nodes/n1/streams/s1/desired-state", `{"state":"running"}`, "Authorization", "Bearer "+testToken); r.status != http.StatusAccepted {
		t.Fatalf("desired: %d %s", r.status, r.body)
	}
	if r := del("n1"); r.status != http.StatusConflict || r.problem(t).Code != CodeNodeOnline {
		t.Fatalf("online node: %d %s", r.status, r.body)
	}
	if r := del("n1?force=maybe"); r.status != http.StatusBadRequest {
		t.Fatalf("force=maybe: %d %s", r.status, r.body)
	}
	// Take the command the desired state made, then park a poll.
	eventually(t, "the command", func() bool {
		r := a.call(t, "GET", "/commands?wait_ms=0", nil, reg.SessionToken)
		return r.status == http.StatusOK && len(decode[wire.Page[wire.Command]](t, r).Items) > 0
	})
	polled := make(chan resp, 1)
	go func() {
		req := th.request(t, context.Background(), "GET", APIPrefix+"/agent/commands?wait_ms=30000", "", "Authorization", "Bearer "+reg.SessionToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			polled <- resp{status: -1}
			return
		}
		defer res.Body.Close()
		var b json.RawMessage
		_ = json.NewDecoder(res.Body).Decode(&b)
		polled <- resp{status: res.StatusCode, body: b}
	}()
	eventually(t, "the poll to wait", func() bool { n, _ := th.h.fleet.Node("n1"); return n.Pollers > 0 })
	if r := del("n1?force=true"); r.status != http.StatusNoContent {
		t.Fatalf("force: %d %s", r.status, r.body)
	}
	select {
	case r := <-polled:
		if r.status != http.StatusOK {
			t.Fatalf("the parked poll: %d %s", r.status, r.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the parked poll was not answered by the forget")
	}
	if r := a.call(t, "POST", "/heartbeat", wire.HeartbeatRequest{BootID: a.bootID}, reg.SessionToken); r.status != http.StatusUnauthorized {
		t.Fatalf("the forgotten node's session: %d %s", r.status, r.body)
	}
	if r := del("n1"); r.status != http.StatusNotFound {
		t.Fatalf("forget twice: %d %s", r.status, r.body)
	}
	// The desired state stays: the node shows unknown.
	if v := operatorGet[NodeView](t, th, "/nodes/n1"); v.Status != "unknown" {
		t.Fatalf("node after forget: %+v", v)
	}
	audit := operatorGet[wire.Page[store.AuditRecord]](t, th, "/audit?action="+store.ActionNodeForget)
	var accepted, rejected int
	for _, a := range audit.Items {
		switch a.Outcome {
		case store.OutcomeAccepted:
			accepted++
		case store.OutcomeRejected:
			rejected++
		}
	}
	if accepted != 1 || rejected < 2 {
		t.Fatalf("audit: %+v", audit.Items)
	}
	// Another credential may take the id now, and gets the node's commands.
	b := newTestAgent(th, "n1")
	r := registerAs(t, b, nodeTokenFor(testToken), credentialOf("new-n1"), 0)
	if r.status != http.StatusOK {
		t.Fatalf("register after forget: %d %s", r.status, r.body)
	}
	tok := decode[wire.RegisterResponse](t, r).SessionToken
	eventually(t, "the command redelivered", func() bool {
		r := b.call(t, "GET", "/commands?wait_ms=0", nil, tok)
		return r.status == http.StatusOK && len(decode[wire.Page[wire.Command]](t, r).Items) > 0
	})
}

// TestSessionBoundToNodeToken: a session made with one SVC_NODE_TOKEN is
// refused after the Hub restarts with another (401), and registering with
// the new token works.
func TestSessionBoundToNodeToken(t *testing.T) {
	path := dbPath(t)
	opts := func(nodeToken string) Options {
		return Options{Settings: Settings{Address: "127.0.0.1:0", Storage: path, OperatorToken: testToken, NodeToken: nodeToken},
			Logger: slog.New(slog.DiscardHandler), Version: "test"}
	}
	th := serveOptions(t, true, opts("old-node-token-0123456789"))
	a := newTestAgent(th, "n1")
	old := a.register(t, "old-node-token-0123456789", 15*time.Second)
	th.stop()
	// The same token again: the durable session survives the restart.
	th = serveOptions(t, true, opts("old-node-token-0123456789"))
	a.th = th
	if r := a.call(t, "POST", "/heartbeat", wire.HeartbeatRequest{BootID: a.bootID}, old.SessionToken); r.status != http.StatusOK {
		t.Fatalf("session after a restart with the same token: %d %s", r.status, r.body)
	}
	th.stop()
	th = serveOptions(t, true, opts("new-node-token-0123456789"))
	a.th = th
	r := a.call(t, "POST", "/heartbeat", wire.HeartbeatRequest{BootID: a.bootID}, old.SessionToken)
	if r.status != http.StatusUnauthorized || r.problem(t).Code != CodeSessionExpired {
		t.Fatalf("session after rotation: %d %s", r.status, r.body)
	}
	if r := registerAs(t, a, "old-node-token-0123456789", credentialOf("n1"), 0); r.status != http.StatusUnauthorized {
		t.Fatalf("register with the old token: %d %s", r.status, r.body)
	}
	fresh := a.register(t, "new-node-token-0123456789", 15*time.Second)
	if r := a.call(t, "POST", "/heartbeat", wire.HeartbeatRequest{BootID: a.bootID}, fresh.SessionToken); r.status != http.StatusOK {
		t.Fatalf("session with the new token: %d %s", r.status, r.body)
	}
}

// TestSessionTTLClamped: a session asked for beyond SVC_HUB_SESSION_TTL_MAX
// is granted the cap, and the answer says so.
func TestSessionTTLClamped(t *testing.T) {
	for _, tc := range []struct {
		name      string
		max, ask  time.Duration
		wantTTLMS int64
	}{
		{"default cap", 0, 7 * 24 * time.Hour, time.Hour.Milliseconds()},
		{"set cap", 10 * time.Minute, time.Hour, (10 * time.Minute).Milliseconds()},
		{"below the cap", 10 * time.Minute, 2 * time.Minute, (2 * time.Minute).Milliseconds()},
		{"default ask", 0, 0, time.Hour.Milliseconds()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := serveOptions(t, true, Options{Settings: Settings{Address: "127.0.0.1:0", Storage: dbPath(t), OperatorToken: testToken,
				NodeToken: nodeTokenFor(testToken), SessionTTLMax: tc.max}, Logger: slog.New(slog.DiscardHandler), Version: "test"})
			r := registerAs(t, newTestAgent(th, "n1"), nodeTokenFor(testToken), credentialOf("n1"), tc.ask)
			if r.status != http.StatusOK {
				t.Fatalf("register: %d %s", r.status, r.body)
			}
			got := decode[wire.RegisterResponse](t, r)
			if got.SessionTTLMS != tc.wantTTLMS {
				t.Fatalf("session_ttl_ms %d, want %d", got.SessionTTLMS, tc.wantTTLMS)
			}
			v := operatorGet[NodeView](t, th, "/nodes/n1")
			if d := v.SessionExpiresAt.Sub(v.RegisteredAt.Time); d != time.Duration(tc.wantTTLMS)*time.Millisecond {
				t.Fatalf("session lives %v, want %v", d, time.Duration(tc.wantTTLMS)*time.Millisecond)
			}
		})
	}
}

// TestCertNames: the one rule a client certificate names a node by.
func TestCertNames(t *testing.T) {
	for _, tc := range []struct {
		uri  string
		want bool
	}{
		{"spiffe://fleet.example/node/node-a", true},
		{"spiffe://other.domain/node/node-a", true},
		{"spiffe://fleet.example/node/node-b", false},
		{"spiffe://fleet.example/node/node-a/x", false},
		{"spiffe://fleet.example/nodes/node-a", false},
		{"spiffe:///node/node-a", false},
		{"https://fleet.example/node/node-a", false},
		{"spiffe://fleet.example/node/node-a?x=1", false},
		{"spiffe://user@fleet.example/node/node-a", false},
	} {
		u, err := url.Parse(tc.uri)
		if err != nil {
			t.Fatal(err)
		}
		if got := certNames(&x509.Certificate{URIs: []*url.URL{u}}, "node-a"); got != tc.want {
			t.Errorf("%s names node-a: %v, want %v", tc.uri, got, tc.want)
		}
	}
	if certNames(&x509.Certificate{DNSNames: []string{"node-a"}}, "node-a") {
		t.Error("a DNS SAN names the node; only the URI SAN does")
	}
}

// TestNodeGC: with a tiny SVC_HUB_NODE_GC_AFTER, a node whose lease lapsed
// and that holds no desired state is forgotten by the reconciler (audited
// with actor hub, evented); one with desired state stays.
func TestNodeGC(t *testing.T) {
	th := serveOptions(t, true, Options{Settings: Settings{Address: "127.0.0.1:0", Storage: dbPath(t), OperatorToken: testToken,
		NodeToken: nodeTokenFor(testToken), NodeGCAfter: 300 * time.Millisecond}, Logger: slog.New(slog.DiscardHandler), Version: "test"})
	idle, busy := newTestAgent(th, "idle"), newTestAgent(th, "busy")
	idleReg := idle.register(t, nodeTokenFor(testToken), 200*time.Millisecond)
	busy.register(t, nodeTokenFor(testToken), 200*time.Millisecond)
	if r := th.do(t, "PUT", APIPrefix+"/nodes/busy/streams/s1/desired-state", `{"state":"running"}`, "Authorization", "Bearer "+testToken); r.status != http.StatusAccepted {
		t.Fatalf("desired: %d %s", r.status, r.body)
	}
	eventually(t, "the idle node forgotten", func() bool {
		r := th.do(t, "GET", APIPrefix+"/nodes/idle", "", "Authorization", "Bearer "+testToken)
		return r.status == http.StatusNotFound
	})
	if r := idle.call(t, "POST", "/heartbeat", wire.HeartbeatRequest{BootID: idle.bootID}, idleReg.SessionToken); r.status != http.StatusUnauthorized {
		t.Fatalf("the forgotten node's session: %d %s", r.status, r.body)
	}
	audit := operatorGet[wire.Page[store.AuditRecord]](t, th, "/audit?action="+store.ActionNodeForget)
	if len(audit.Items) != 1 || audit.Items[0].Actor != actorHub || audit.Items[0].NodeID != "idle" {
		t.Fatalf("audit: %+v", audit.Items)
	}
	evs := operatorGet[wire.Page[wire.Event]](t, th, "/events?kind="+wire.EventNodeForgotten)
	if len(evs.Items) != 1 || evs.Items[0].NodeID != "idle" || evs.Items[0].Actor != actorHub {
		t.Fatalf("events: %+v", evs.Items)
	}
	var v NodeView
	eventually(t, "the busy node unavailable", func() bool {
		v = operatorGet[NodeView](t, th, "/nodes/busy")
		return v.Status == "unavailable"
	})
	// Passes go on; the node with desired state stays registered.
	pass := th.h.lastPass.Load()
	eventually(t, "two more passes", func() bool { return th.h.lastPass.Load() >= pass+2000 })
	if v = operatorGet[NodeView](t, th, "/nodes/busy"); v.RegisteredAt.IsZero() {
		t.Fatalf("the node with desired state was forgotten: %+v", v)
	}
}
