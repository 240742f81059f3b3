package hub

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/access"
	"github.com/flowplane/flowplane/internal/wire"
)

// principalHub is a Hub serving the bootstrap token and a tokens file.
type principalHub struct {
	*testHub
	tokens string // the tokens file
	token  map[string]string
}

// serveTokens starts a Hub whose tokens file holds one token per entry of
// specs: name -> "role[ scope,scope]".
func serveTokens(t *testing.T, specs map[string]string) *principalHub {
	t.Helper()
	ph := &principalHub{tokens: filepath.Join(t.TempDir(), "tokens"), token: map[string]string{}}
	var lines []string
	for name, spec := range specs {
		tok, sum, err := access.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		role, scopes, _ := strings.Cut(spec, " ")
		nt := access.NamedToken{Name: name, Role: access.Role(role), SHA256: sum}
		if scopes != "" {
			if nt.Scopes, err = access.ParseScopes(strings.Split(scopes, ",")); err != nil {
				t.Fatal(err)
			}
		}
		lines = append(lines, nt.Line())
		ph.token[name] = tok
	}
	if err := os.WriteFile(ph.tokens, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ph.testHub = serveOptions(t, true, Options{
		Settings: Settings{Address: "127.0.0.1:0", Storage: dbPath(t), OperatorToken: testToken, NodeToken: nodeTokenFor(testToken), TokensFile: ph.tokens},
		Logger:   slog.New(slog.DiscardHandler), Version: "test",
	})
	return ph
}

func (ph *principalHub) as(t *testing.T, name, method, path, body string) resp {
	t.Helper()
	return ph.do(t, method, path, body, "Authorization", "Bearer "+ph.token[name])
}

// operatorRoutes are the routes the operator authenticator guards.
func operatorRoutes(h *Hub) []string {
	var out []string
	for _, rt := range h.Routes() {
		if !rt.Public && rt.Auth == nil {
			out = append(out, rt.Method+" "+strings.TrimPrefix(rt.Pattern, APIPrefix))
		}
	}
	return out
}

// TestRoutePermissions: every operator route has a row in the permission
// table, and every row is a route.
func TestRoutePermissions(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	routes := operatorRoutes(th.h)
	for _, r := range routes {
		if _, ok := routePermissions[r]; !ok {
			t.Errorf("route %s has no permission in routePermissions", r)
		}
	}
	for r := range routePermissions {
		if !slices.Contains(routes, r) {
			t.Errorf("routePermissions names %s, which is no route", r)
		}
	}
}

// samplePath fills a route pattern's parameters.
func samplePath(pattern string) string {
	return APIPrefix + strings.NewReplacer("{node_id}", "n1", "{id}", "s1", "{kind}", "input", "{name}", "generate",
		"{upgrade_id}", "u1", "{version}", "v1").Replace(pattern)
}

// TestRouteRoleMatrix walks every operator route with a viewer, an
// operator and an admin token: a route the role does not grant is 403
// forbidden naming the permission, changes nothing, and (a mutation) is
// audited as rejected with the principal as actor; a route it grants is
// neither 401 nor 403.
func TestRouteRoleMatrix(t *testing.T) {
	ph := serveTokens(t, map[string]string{"dash": "viewer", "oncall": "operator", "root": "admin"})
	roles := map[string]access.Role{"dash": access.Viewer, "oncall": access.Operator, "root": access.Admin}
	routes := operatorRoutes(ph.h)
	denied := map[string]int{}
	// Refusals first, so that "changes nothing" can be checked before any
	// allowed write.
	for _, name := range []string{"dash", "oncall", "root"} {
		for _, rt := range routes {
			method, pattern, _ := strings.Cut(rt, " ")
			perm := routePermissions[rt]
			if roles[name].Grants(perm) {
				continue
			}
			if perm == access.Read {
				t.Errorf("%s: %s is refused a read", name, rt)
			}
			r := ph.as(t, name, method, samplePath(pattern), "")
			if r.status != http.StatusForbidden || r.problem(t).Code != "forbidden" || r.problem(t).Details["permission"] != string(perm) {
				t.Errorf("%s %s: %d %s, want 403 forbidden naming %s", name, rt, r.status, r.body, perm)
				continue
			}
			denied[name]++
		}
	}
	if denied["dash"] == 0 || denied["oncall"] == 0 || denied["root"] != 0 {
		t.Fatalf("refusals by principal %v", denied)
	}
	ops := decode[wire.Page[wire.Operation]](t, ph.do(t, "GET", APIPrefix+"/operations", "", bearer...))
	if ops.Total != 0 {
		t.Fatalf("refused requests created %d operations", ops.Total)
	}
	for name, n := range denied {
		rows := decode[wire.Page[wire.AuditRecord]](t, ph.do(t, "GET", APIPrefix+"/audit?page_size=100&outcome=rejected&actor="+name, "", bearer...))
		forbidden := 0
		for _, a := range rows.Items {
			if a.FailureCode == "forbidden" && a.Actor == name && a.Action != "" {
				forbidden++
			}
		}
		if forbidden != n {
			t.Errorf("%s: %d refusals, %d audited as rejected forbidden: %+v", name, n, forbidden, rows.Items)
		}
	}
	for _, name := range []string{"dash", "oncall", "root"} {
		for _, rt := range routes {
			method, pattern, _ := strings.Cut(rt, " ")
			if !roles[name].Grants(routePermissions[rt]) {
				continue
			}
			status := ph.status(t, method, samplePath(pattern), "", "Authorization", "Bearer "+ph.token[name])
			if status == http.StatusForbidden || status == http.StatusUnauthorized {
				t.Errorf("%s %s: %d", name, rt, status)
			}
		}
	}
}

// TestScopedPrincipal: an operator scoped to node n1 acts on n1, is
// refused on n2 with the resource named, and lists only what it may read.
func TestScopedPrincipal(t *testing.T) {
	ph := serveTokens(t, map[string]string{"edge": "operator node:n1", "etl": "operator job:etl-*"})
	body := `{"state":"running","config_version":"v1"}`
	for _, n := range []string{"n1", "n2"} {
		ph.put(t, n, "s1", body, bearer...)
	}
	if r := ph.as(t, "edge", "PUT", APIPrefix+"/nodes/n1/streams/s1/desired-state", `{"state":"stopped"}`); r.status != 202 {
		t.Fatalf("in scope: %d %s", r.status, r.body)
	}
	r := ph.as(t, "edge", "POST", APIPrefix+"/nodes/n2/streams/s1/stop", "")
	if p := r.problem(t); r.status != 403 || p.Details["resource"] != "stream:n2/s1" || p.Details["permission"] != "stream.operate" {
		t.Fatalf("out of scope: %d %s", r.status, r.body)
	}
	if r := ph.as(t, "edge", "GET", APIPrefix+"/nodes/n2/streams/s1", ""); r.status != 403 {
		t.Fatalf("read out of scope: %d %s", r.status, r.body)
	}
	streams := decode[wire.Page[wire.Stream]](t, ph.as(t, "edge", "GET", APIPrefix+"/streams", ""))
	if streams.Total != 1 || streams.Items[0].NodeID != "n1" {
		t.Fatalf("scoped stream list: %+v", streams)
	}
	ops := decode[wire.Page[wire.Operation]](t, ph.as(t, "edge", "GET", APIPrefix+"/operations", ""))
	for _, op := range ops.Items {
		if op.NodeID != "n1" {
			t.Fatalf("scoped operations list shows %+v", op)
		}
	}
	// The scoped token's own write: actor edge, kind token, on the
	// operation and its event.
	mine := slices.IndexFunc(ops.Items, func(op wire.Operation) bool { return op.Actor == "edge" })
	if mine < 0 || ops.Items[mine].ActorKind != string(access.KindToken) {
		t.Fatalf("edge's operation: %+v", ops.Items)
	}
	evs := decode[wire.Page[wire.Event]](t, ph.as(t, "edge", "GET", APIPrefix+"/events?operation_id="+ops.Items[mine].OperationID, ""))
	if !slices.ContainsFunc(evs.Items, func(e wire.Event) bool { return e.Actor == "edge" && e.ActorKind == string(access.KindToken) }) {
		t.Fatalf("events of edge's operation: %+v", evs.Items)
	}
	if len(ops.Items) != 2 {
		t.Fatalf("scoped operations: %d items, want n1's two", len(ops.Items))
	}
	audit := decode[wire.Page[wire.AuditRecord]](t, ph.as(t, "edge", "GET", APIPrefix+"/audit", ""))
	for _, a := range audit.Items {
		if a.NodeID != "n1" {
			t.Fatalf("scoped audit shows %+v", a)
		}
	}
	events := decode[wire.Page[wire.Event]](t, ph.as(t, "edge", "GET", APIPrefix+"/events", ""))
	for _, e := range events.Items {
		if e.NodeID != "" && e.NodeID != "n1" {
			t.Fatalf("scoped events show %+v", e)
		}
	}
	// The accepted write names the principal.
	got := decode[wire.Page[wire.AuditRecord]](t, ph.do(t, "GET", APIPrefix+"/audit?actor=edge", "", bearer...))
	token := string(access.KindToken)
	if !slices.ContainsFunc(got.Items, func(a wire.AuditRecord) bool {
		return a.Outcome == "accepted" && a.NodeID == "n1" && a.ActorKind == token
	}) || !slices.ContainsFunc(got.Items, func(a wire.AuditRecord) bool {
		return a.Outcome == "rejected" && a.FailureCode == "forbidden" && a.NodeID == "n2" && a.ActorKind == token
	}) {
		t.Fatalf("audit of edge: %+v", got.Items)
	}
	// A node scope does not reach jobs; a job scope reaches only its jobs.
	if r := ph.as(t, "edge", "POST", APIPrefix+"/jobs/etl-1/checkpoints", ""); r.status != 403 {
		t.Fatalf("node scope on a job: %d %s", r.status, r.body)
	}
	if r := ph.as(t, "etl", "POST", APIPrefix+"/jobs/billing/checkpoints", ""); r.status != 403 || r.problem(t).Details["resource"] != "job:billing" {
		t.Fatalf("job scope on another job: %d %s", r.status, r.body)
	}
	if r := ph.as(t, "etl", "POST", APIPrefix+"/jobs/etl-1/checkpoints", ""); r.status == 403 || r.status == 401 {
		t.Fatalf("job scope on its job: %d %s", r.status, r.body)
	}
}

// TestWhoami: the principal of each credential, never the credential.
func TestWhoami(t *testing.T) {
	ph := serveTokens(t, map[string]string{"ci": "operator job:etl-*,node:edge-*"})
	r := ph.as(t, "ci", "GET", APIPrefix+"/auth/whoami", "")
	w := decode[Whoami](t, r)
	if r.status != 200 || w.Principal != "ci" || w.Kind != access.KindToken || !slices.Equal(w.Roles, []access.Role{access.Operator}) ||
		!slices.Equal(w.Scopes, []string{"job:etl-*", "node:edge-*"}) || !slices.Contains(w.Permissions, access.StreamOperate) || slices.Contains(w.Permissions, access.JobAdmin) {
		t.Fatalf("whoami: %d %s", r.status, r.body)
	}
	if strings.Contains(string(r.body), ph.token["ci"]) {
		t.Fatal("whoami echoes the token")
	}
	w = decode[Whoami](t, ph.do(t, "GET", APIPrefix+"/auth/whoami", "", bearer...))
	if w.Principal != PrincipalOperator || !slices.Equal(w.Roles, []access.Role{access.Admin}) || len(w.Scopes) != 0 || w.ExpiresAt != nil {
		t.Fatalf("bootstrap whoami: %+v", w)
	}
}

// TestTokensFileReload: a token added to the file works without a
// restart, an expired one is refused, a broken file keeps the last good.
func TestTokensFileReload(t *testing.T) {
	ph := serveTokens(t, map[string]string{"first": "viewer"})
	tok, sum, err := access.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(ph.tokens)
	if err != nil {
		t.Fatal(err)
	}
	_, oldSum, _ := access.NewToken()
	lines := string(old) + access.NamedToken{Name: "second", Role: access.Operator, SHA256: sum}.Line() + "\n" +
		access.NamedToken{Name: "gone", Role: access.Admin, SHA256: oldSum, Expires: time.Now().Add(-time.Minute)}.Line() + "\n"
	if err := os.WriteFile(ph.tokens, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	bump := func(d time.Duration) {
		at := time.Now().Add(d)
		if err := os.Chtimes(ph.tokens, at, at); err != nil {
			t.Fatal(err)
		}
	}
	bump(time.Second)
	works := func() bool {
		return ph.status(t, "GET", APIPrefix+"/auth/whoami", "", "Authorization", "Bearer "+tok) == 200
	}
	deadline := time.Now().Add(10 * time.Second)
	for !works() {
		if time.Now().After(deadline) {
			t.Fatal("the added token never worked")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := os.WriteFile(ph.tokens, []byte("name=broken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bump(2 * time.Second)
	// Two polls later the broken file was read and refused.
	time.Sleep(2*tokensPollInterval + 100*time.Millisecond)
	if !works() || ph.as(t, "first", "GET", APIPrefix+"/auth/whoami", "").status != 200 {
		t.Fatal("a broken tokens file dropped the last good tokens")
	}
}

// TestCredentialsStaySeparate: a node or session credential is refused on
// operator routes, an operator credential (bootstrap or named) on agent
// routes.
func TestCredentialsStaySeparate(t *testing.T) {
	ph := serveTokens(t, map[string]string{"root": "admin"})
	reg := `{"node_id":"n1","boot_id":"b1","version":"test","protocol_version":` + fmt.Sprint(wire.ProtocolVersion) +
		`,"capabilities":["stream_control"],"node_credential":"` + credentialOf("n1") + `"}`
	r := ph.do(t, "POST", APIPrefix+"/agent/register", reg, "Authorization", "Bearer "+nodeTokenFor(testToken))
	if r.status != 200 {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	session := decode[wire.RegisterResponse](t, r).SessionToken
	for _, cred := range []string{nodeTokenFor(testToken), session} {
		for _, path := range []string{"/nodes", "/auth/whoami", "/nodes/n1/drain"} {
			method := "GET"
			if strings.HasSuffix(path, "drain") {
				method = "POST"
			}
			if r := ph.do(t, method, APIPrefix+path, "", "Authorization", "Bearer "+cred); r.status != 401 {
				t.Errorf("node credential on %s %s: %d %s", method, path, r.status, r.body)
			}
		}
	}
	for _, cred := range []string{testToken, ph.token["root"]} {
		if r := ph.do(t, "POST", APIPrefix+"/agent/heartbeat", `{"boot_id":"b1"}`, "Authorization", "Bearer "+cred); r.status != 401 {
			t.Errorf("operator credential on heartbeat: %d %s", r.status, r.body)
		}
		if r := ph.do(t, "POST", APIPrefix+"/agent/register", reg, "Authorization", "Bearer "+cred); r.status != 401 {
			t.Errorf("operator credential on register: %d %s", r.status, r.body)
		}
	}
}
