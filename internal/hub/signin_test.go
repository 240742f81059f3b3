package hub

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/access"
	"github.com/flowplane/flowplane/internal/idp/testop"
	"github.com/flowplane/flowplane/web/console"
)

// otherOrigin is an origin the Hub allows for CORS (bearer callers), whose
// requests must still never be authenticated by the console's cookie.
const otherOrigin = "http://127.0.0.1:1"

// serveSignIn starts a test provider with users ada (admin) and vera
// (viewer), and a Hub on clock whose console signs in through it.
func serveSignIn(t *testing.T, clock *fakeClock) (*testHub, *testop.Provider) {
	t.Helper()
	op, err := testop.Start(testop.Options{Audience: testAudience, Principals: []testop.Principal{
		{Name: "ada", Secret: "ada-secret", Password: "ada-password", Roles: []string{"admin"}},
		{Name: "vera", Secret: "vera-secret", Password: "vera-password", Roles: []string{"viewer"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { op.Close() })
	th := serveOptions(t, true, Options{
		Settings: Settings{Address: "127.0.0.1:0", Storage: dbPath(t), OperatorToken: testToken, NodeToken: nodeTokenFor(testToken),
			CORSOrigins: []string{otherOrigin},
			OIDC:        OIDCSettings{Issuer: op.Issuer, Audience: testAudience, ClientID: testAudience}},
		Logger: slog.New(slog.DiscardHandler), Version: "test", Now: clock.Now,
	})
	return th, op
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects, so that each step of the flow is seen.
func browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// send makes one request; hdr holds header name, value pairs.
func send(t *testing.T, c *http.Client, method, target, body string, hdr ...string) resp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, target, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return roundTrip(t, c, req)
}

// location is r's redirect target, resolved against base.
func location(t *testing.T, r resp, base string) *url.URL {
	t.Helper()
	if r.status != http.StatusFound && r.status != http.StatusSeeOther {
		t.Fatalf("want a redirect, got %d %s", r.status, r.body)
	}
	b, _ := url.Parse(base)
	u, err := b.Parse(r.header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// begin starts a sign-in at the Hub and returns the provider's
// authorization URL it redirects to.
func begin(t *testing.T, c *http.Client, th *testHub) *url.URL {
	t.Helper()
	return location(t, send(t, c, "GET", th.base+signInLoginPath, ""), th.base)
}

// authorize signs user in at the provider's login page and returns the
// Hub callback URL the provider redirects to (with code and state, or an
// error).
func authorize(t *testing.T, c *http.Client, op *testop.Provider, auth *url.URL, user, password string) *url.URL {
	t.Helper()
	login := location(t, send(t, c, "GET", auth.String(), ""), op.Issuer)
	if login.Path != "/login" {
		return login // the provider refused the request: back to the Hub with an error
	}
	if r := send(t, c, "GET", login.String(), ""); r.status != 200 || !strings.Contains(string(r.body), `name="password"`) {
		t.Fatalf("login page: %d %s", r.status, r.body)
	}
	form := url.Values{"id": {login.Query().Get("authRequestID")}, "username": {user}, "password": {password}}
	back := location(t, send(t, c, "POST", op.Issuer+"/login", form.Encode(), "Content-Type", "application/x-www-form-urlencoded"), op.Issuer)
	return location(t, send(t, c, "GET", back.String(), ""), op.Issuer)
}

// signInAs runs the whole flow for user and returns the browser holding
// the session cookie, and the Set-Cookie the Hub answered.
func signInAs(t *testing.T, th *testHub, op *testop.Provider, user, password string) (*http.Client, string) {
	t.Helper()
	c := browser(t)
	cb := authorize(t, c, op, begin(t, c, th), user, password)
	r := send(t, c, "GET", cb.String(), "")
	if to := location(t, r, th.base); r.status != http.StatusSeeOther || to.Path != console.Path {
		t.Fatalf("callback: %d to %s: %s", r.status, to, r.body)
	}
	for _, sc := range r.header.Values("Set-Cookie") {
		if strings.HasPrefix(sc, sessionCookieName+"=") {
			return c, sc
		}
	}
	t.Fatalf("callback set no session cookie: %q", r.header.Values("Set-Cookie"))
	return nil, ""
}

func whoamiOf(t *testing.T, c *http.Client, th *testHub, hdr ...string) (Whoami, resp) {
	t.Helper()
	r := send(t, c, "GET", th.base+APIPrefix+"/auth/whoami", "", hdr...)
	var w Whoami
	if r.status == 200 {
		if err := json.Unmarshal(r.body, &w); err != nil {
			t.Fatal(err)
		}
	}
	return w, r
}

// TestConsoleSignIn: the authorization code flow with PKCE through a real
// provider ends in a session cookie (HttpOnly, SameSite=Strict, Path=/,
// bounded by the token's lifetime) that authenticates the console's calls
// as the user, with the user's role; the user's write is audited with
// their name; a viewer's write is refused; bearer tokens keep working.
func TestConsoleSignIn(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	th, op := serveSignIn(t, clock)
	if r := send(t, browser(t), "GET", th.base+console.Path+"hub.json", ""); r.status != 200 ||
		!strings.Contains(string(r.body), `"sign_in":{"provider":"`+strings.TrimPrefix(op.Issuer, "http://")+`","login":"/ui/auth/login"`) {
		t.Fatalf("hub.json: %d %s", r.status, r.body)
	}
	ada, cookie := signInAs(t, th, op, "ada", "ada-password")
	for _, attr := range []string{"HttpOnly", "SameSite=Strict", "Path=/;", "Max-Age="} {
		if !strings.Contains(cookie+";", attr) {
			t.Errorf("session cookie lacks %s: %s", attr, cookie)
		}
	}
	if strings.Contains(cookie, "Domain=") {
		t.Errorf("session cookie names a Domain: %s", cookie)
	}
	w, r := whoamiOf(t, ada, th)
	if r.status != 200 || w.Principal != "ada" || w.Kind != access.KindOIDC || len(w.Roles) != 1 || w.Roles[0] != access.Admin || w.ExpiresAt == nil {
		t.Fatalf("whoami by cookie: %d %s", r.status, r.body)
	}
	if exp := w.ExpiresAt.Time; exp.Before(clock.Now()) || exp.After(clock.Now().Add(10*time.Minute)) {
		t.Fatalf("session expiry %v is not the token's", exp)
	}
	body := `{"state":"running","config_version":"v1"}`
	if r := send(t, ada, "PUT", th.base+APIPrefix+"/nodes/n1/streams/s1/desired-state", body, "Content-Type", "application/json", "Origin", th.base); r.status != 202 {
		t.Fatalf("admin write by cookie: %d %s", r.status, r.body)
	}
	audit := decode[struct {
		Items []struct {
			Actor, Action, Outcome string
		} `json:"items"`
	}](t, th.do(t, "GET", APIPrefix+"/audit", "", "Authorization", "Bearer "+testToken))
	named := false
	for _, it := range audit.Items {
		named = named || (it.Actor == "ada" && it.Outcome == "accepted")
	}
	if !named {
		t.Fatalf("no accepted audit row names ada: %+v", audit.Items)
	}
	vera, _ := signInAs(t, th, op, "vera", "vera-password")
	if r := send(t, vera, "PUT", th.base+APIPrefix+"/nodes/n1/streams/s1/desired-state", body, "Content-Type", "application/json", "Origin", th.base); r.status != 403 {
		t.Fatalf("viewer write by cookie: %d %s", r.status, r.body)
	}
	if w, r := whoamiOf(t, browser(t), th, "Authorization", "Bearer "+testToken); r.status != 200 || w.Principal != PrincipalOperator {
		t.Fatalf("bearer beside sign-in: %d %s", r.status, r.body)
	}
	// The sign-in routes lie outside the API and its OpenAPI document.
	if r := th.do(t, "GET", APIPrefix+"/openapi.json", "", "Authorization", "Bearer "+testToken); r.status != 200 || strings.Contains(string(r.body), "/auth/login") {
		t.Fatalf("openapi.json with the sign-in routes: %d", r.status)
	}
	// A wrong password stays on the provider's login page.
	c := browser(t)
	login := location(t, send(t, c, "GET", begin(t, c, th).String(), ""), op.Issuer)
	form := url.Values{"id": {login.Query().Get("authRequestID")}, "username": {"ada"}, "password": {"wrong"}}
	if r := send(t, c, "POST", op.Issuer+"/login", form.Encode(), "Content-Type", "application/x-www-form-urlencoded"); r.status != 200 || !strings.Contains(string(r.body), "wrong user name or password") {
		t.Fatalf("wrong password: %d %s", r.status, r.body)
	}
}

// TestConsoleSessionOrigin: the cookie authenticates only the console's
// own origin; a request from another origin (even one allowed for CORS)
// or marked cross-site is refused, and a write must show its origin.
func TestConsoleSessionOrigin(t *testing.T) {
	th, op := serveSignIn(t, &fakeClock{now: time.Now()})
	ada, _ := signInAs(t, th, op, "ada", "ada-password")
	put := th.base + APIPrefix + "/nodes/n1/streams/s1/desired-state"
	body := `{"state":"running","config_version":"v1"}`
	for _, tc := range []struct {
		name, method string
		hdr          []string
		want         int
	}{
		{"write from another origin", "PUT", []string{"Origin", otherOrigin, "Sec-Fetch-Site", "same-site"}, 403},
		{"write without Origin or Sec-Fetch-Site", "PUT", nil, 403},
		{"write marked cross-site", "PUT", []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"read from another origin", "GET", []string{"Origin", otherOrigin}, 403},
		{"read marked same-site", "GET", []string{"Sec-Fetch-Site", "same-site"}, 403},
		{"write marked same-origin", "PUT", []string{"Sec-Fetch-Site", "same-origin"}, 202},
		{"read of the console", "GET", []string{"Sec-Fetch-Site", "same-origin"}, 200},
	} {
		target, b := put, body
		if tc.method == "GET" {
			target, b = th.base+APIPrefix+"/auth/whoami", ""
		}
		hdr := append([]string{"Content-Type", "application/json"}, tc.hdr...)
		if r := send(t, ada, tc.method, target, b, hdr...); r.status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.want)
		}
	}
	// A bearer caller of the allowed origin is not affected.
	if w, r := whoamiOf(t, browser(t), th, "Origin", otherOrigin, "Authorization", "Bearer "+testToken); r.status != 200 || w.Principal != PrincipalOperator {
		t.Fatalf("bearer from an allowed origin: %d %s", r.status, r.body)
	}
}

// TestConsoleSignInRefused: a callback is refused when its state is not
// this browser's, when the ID token's nonce is not this sign-in's, when no
// sign-in is under way (no verifier), and a code is not exchanged without
// its PKCE verifier; a refused sign-in sets no session.
func TestConsoleSignInRefused(t *testing.T) {
	th, op := serveSignIn(t, &fakeClock{now: time.Now()})
	refused := func(t *testing.T, c *http.Client, cb *url.URL, want string) {
		t.Helper()
		r := send(t, c, "GET", cb.String(), "")
		if r.status != 400 || r.problem(t).Code != CodeSignInFailed || !strings.Contains(r.problem(t).Message, want) {
			t.Fatalf("callback: %d %s, want 400 %s ...%s", r.status, r.body, CodeSignInFailed, want)
		}
		if _, r := whoamiOf(t, c, th); r.status != 401 {
			t.Fatalf("whoami after a refused sign-in: %d %s", r.status, r.body)
		}
	}
	t.Run("state mismatch", func(t *testing.T) {
		c := browser(t)
		cb := authorize(t, c, op, begin(t, c, th), "ada", "ada-password")
		q := cb.Query()
		q.Set("state", "not-"+q.Get("state"))
		cb.RawQuery = q.Encode()
		refused(t, c, cb, "state")
	})
	t.Run("state of another browser", func(t *testing.T) {
		// The victim's browser runs the attacker's callback: its own
		// sign-in's state differs.
		attacker, victim := browser(t), browser(t)
		cb := authorize(t, attacker, op, begin(t, attacker, th), "vera", "vera-password")
		begin(t, victim, th)
		refused(t, victim, cb, "state")
	})
	t.Run("nonce mismatch", func(t *testing.T) {
		c := browser(t)
		auth := begin(t, c, th)
		q := auth.Query()
		if q.Get("nonce") == "" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" {
			t.Fatalf("authorization URL lacks nonce, state or an S256 challenge: %s", auth)
		}
		q.Set("nonce", "forged-nonce")
		auth.RawQuery = q.Encode()
		refused(t, c, authorize(t, c, op, auth, "ada", "ada-password"), "nonce")
	})
	t.Run("no sign-in under way", func(t *testing.T) {
		c := browser(t)
		cb := authorize(t, c, op, begin(t, c, th), "ada", "ada-password")
		refused(t, browser(t), cb, "no sign-in is under way")
		// Each sign-in is redeemed once.
		first := send(t, c, "GET", cb.String(), "")
		if first.status != 303 {
			t.Fatalf("first callback: %d %s", first.status, first.body)
		}
		refused(t, browser(t), cb, "no sign-in is under way")
	})
	t.Run("code without verifier", func(t *testing.T) {
		c := browser(t)
		cb := authorize(t, c, op, begin(t, c, th), "ada", "ada-password")
		form := url.Values{"grant_type": {"authorization_code"}, "code": {cb.Query().Get("code")}, "client_id": {testAudience},
			"redirect_uri": {th.base + signInCallbackPath}}
		r := send(t, browser(t), "POST", op.Issuer+"/oauth/token", form.Encode(), "Content-Type", "application/x-www-form-urlencoded")
		if r.status != 400 || !strings.Contains(string(r.body), "code_verifier") {
			t.Fatalf("token without code_verifier: %d %s", r.status, r.body)
		}
	})
	t.Run("authorization without challenge", func(t *testing.T) {
		c := browser(t)
		auth := begin(t, c, th)
		q := auth.Query()
		q.Del("code_challenge")
		q.Del("code_challenge_method")
		auth.RawQuery = q.Encode()
		refused(t, c, authorize(t, c, op, auth, "ada", "ada-password"), "invalid_request")
	})
}

// TestConsoleSessionEnds: logout ends the session at once; a session ends
// when its access token expires.
func TestConsoleSessionEnds(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	th, op := serveSignIn(t, clock)
	ada, cookie := signInAs(t, th, op, "ada", "ada-password")
	value := strings.TrimPrefix(strings.SplitN(cookie, ";", 2)[0], sessionCookieName+"=")
	if r := send(t, ada, "POST", th.base+signInLogoutPath, "", "Origin", otherOrigin); r.status != 403 {
		t.Fatalf("logout from another origin: %d %s", r.status, r.body)
	}
	if r := send(t, ada, "POST", th.base+signInLogoutPath, "", "Origin", th.base); r.status != 204 {
		t.Fatalf("logout: %d %s", r.status, r.body)
	}
	if _, r := whoamiOf(t, browser(t), th, "Cookie", sessionCookieName+"="+value); r.status != 401 {
		t.Fatalf("whoami after logout with the old cookie: %d %s", r.status, r.body)
	}
	ada, _ = signInAs(t, th, op, "ada", "ada-password")
	w, r := whoamiOf(t, ada, th)
	if r.status != 200 || w.ExpiresAt == nil || w.ExpiresAt.After(time.Now().Add(testop.TokenLifetime+time.Second)) {
		t.Fatalf("whoami: %d %s", r.status, r.body)
	}
	clock.set(w.ExpiresAt.Add(-time.Second))
	if _, r := whoamiOf(t, ada, th); r.status != 200 {
		t.Fatalf("whoami a second before the token's expiry: %d %s", r.status, r.body)
	}
	clock.set(w.ExpiresAt.Add(time.Second))
	if _, r := whoamiOf(t, ada, th); r.status != 401 || !strings.Contains(r.problem(t).Message, "session ended") {
		t.Fatalf("whoami past the token's expiry: %d %s", r.status, r.body)
	}
}

// TestSameOriginCaller is the decision of where a cookie may come from.
func TestSameOriginCaller(t *testing.T) {
	for _, tc := range []struct {
		name, method, site, origin string
		ok                         bool
	}{
		{"read, no browser headers", "GET", "", "", true},
		{"read, same-origin", "GET", "same-origin", "", true},
		{"read, typed URL", "GET", "none", "", true},
		{"read, same-site", "GET", "same-site", "", false},
		{"read, cross-site", "GET", "cross-site", "", false},
		{"read, another Origin", "GET", "", "http://127.0.0.1:1", false},
		{"write, same-origin", "POST", "same-origin", "http://hub.test:8090", true},
		{"write, own Origin only", "PUT", "", "http://hub.test:8090", true},
		{"write, Origin of another scheme", "PUT", "", "https://hub.test:8090", false},
		{"write, nothing to show", "DELETE", "", "", false},
		{"write, typed URL", "POST", "none", "", false},
		{"write, same-site", "POST", "same-site", "http://other.hub.test:8090", false},
	} {
		r := httptest.NewRequest(tc.method, "http://hub.test:8090/api/v1/nodes", nil)
		if tc.site != "" {
			r.Header.Set("Sec-Fetch-Site", tc.site)
		}
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if err := sameOriginCaller(r); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
