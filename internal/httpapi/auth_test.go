package httpapi_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/httpapi"
)

const token = "s3cr3t-operator-token-value"

func principalHandler(w http.ResponseWriter, r *http.Request) error {
	return httpapi.WriteJSON(w, 200, map[string]string{"principal": httpapi.Principal(r.Context())})
}

func TestBearerAuth(t *testing.T) {
	routes := []httpapi.Route{
		{Method: "GET", Pattern: "/health", Handler: principalHandler, Public: true},
		{Method: "GET", Pattern: "/streams", Handler: principalHandler},
		{Method: "POST", Pattern: "/streams/{id}/start", Handler: principalHandler},
	}
	url := serve(t, routes, httpapi.Options{Auth: httpapi.BearerToken(token, "operator")})
	cases := []struct {
		name, method, path string
		auth               []string
		status             int
		principal          string
	}{
		{"protected, no header", "GET", "/streams", nil, 401, ""},
		{"protected, wrong token", "GET", "/streams", []string{"Bearer nope"}, 401, ""},
		{"protected, token prefix", "GET", "/streams", []string{"Bearer " + token[:10]}, 401, ""},
		{"protected, token plus suffix", "GET", "/streams", []string{"Bearer " + token + "x"}, 401, ""},
		{"protected, other case", "GET", "/streams", []string{"Bearer " + strings.ToUpper(token)}, 401, ""},
		{"protected, basic scheme", "GET", "/streams", []string{"Basic " + token}, 401, ""},
		{"protected, no scheme", "GET", "/streams", []string{token}, 401, ""},
		{"protected, empty bearer", "GET", "/streams", []string{"Bearer "}, 401, ""},
		{"protected, two headers", "GET", "/streams", []string{"Bearer " + token, "Bearer " + token}, 401, ""},
		{"protected, mutation, no header", "POST", "/streams/a/start", nil, 401, ""},
		{"protected, valid", "GET", "/streams", []string{"Bearer " + token}, 200, "operator"},
		{"protected, scheme case-insensitive", "GET", "/streams", []string{"bearer " + token}, 200, "operator"},
		{"protected, mutation, valid", "POST", "/streams/a/start", []string{"Bearer " + token}, 200, "operator"},
		{"public, no header", "GET", "/health", nil, 200, "anonymous"},
		{"public, wrong token", "GET", "/health", []string{"Bearer nope"}, 200, "anonymous"},
		{"public, valid", "GET", "/health", []string{"Bearer " + token}, 200, "operator"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var hs []string
			for _, a := range tc.auth {
				hs = append(hs, "Authorization", a)
			}
			resp := do(t, tc.method, url+tc.path, nil, hs...)
			if resp.status != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.status, tc.status, resp.body)
			}
			if tc.status == 401 {
				if p := resp.problem(t); p.Code != "unauthorized" {
					t.Errorf("code %q", p.Code)
				}
				if got := resp.header.Get("WWW-Authenticate"); got != "Bearer" {
					t.Errorf("WWW-Authenticate %q", got)
				}
				if strings.Contains(string(resp.body), token) {
					t.Error("token echoed")
				}
				return
			}
			if want := `{"principal":"` + tc.principal + `"}`; strings.TrimSpace(string(resp.body)) != want {
				t.Errorf("body %s, want %s", resp.body, want)
			}
		})
	}
}

// TestEveryProtectedRouteNeedsToken walks the route table, as surface tests do.
func TestEveryProtectedRouteNeedsToken(t *testing.T) {
	rt := httpapi.NewRouter(table(), httpapi.Options{Auth: httpapi.BearerToken(token, "operator")})
	srv := httptest.NewServer(rt)
	t.Cleanup(srv.Close)
	url := srv.URL
	for _, r := range rt.Routes() {
		path := strings.NewReplacer("{id}", "x").Replace(r.Pattern)
		resp := do(t, r.Method, url+path, nil)
		if r.Public != (resp.status != 401) {
			t.Errorf("%s %s (public=%v): status %d", r.Method, r.Pattern, r.Public, resp.status)
		}
	}
}

func TestNoAuthIsAnonymous(t *testing.T) {
	for name, opts := range map[string]httpapi.Options{
		"nil Auth":    {},
		"empty token": {Auth: httpapi.BearerToken("", "operator")},
	} {
		t.Run(name, func(t *testing.T) {
			url := serve(t, []httpapi.Route{{Method: "GET", Pattern: "/x", Handler: principalHandler}}, opts)
			resp := do(t, "GET", url+"/x", nil, "Authorization", "Bearer whatever")
			if resp.status != 200 || !strings.Contains(string(resp.body), `"anonymous"`) {
				t.Fatalf("got %d %s", resp.status, resp.body)
			}
		})
	}
}

// TestRouteAuthOverrides: a route's own Authenticator replaces the router's
// for that route only.
func TestRouteAuthOverrides(t *testing.T) {
	routes := []httpapi.Route{
		{Method: "GET", Pattern: "/operator", Handler: principalHandler},
		{Method: "POST", Pattern: "/agent", Handler: principalHandler, Auth: httpapi.BearerToken("node-token", "node")},
	}
	url := serve(t, routes, httpapi.Options{Auth: httpapi.BearerToken(token, "operator")})
	cases := []struct {
		method, path, auth string
		status             int
		principal          string
	}{
		{"GET", "/operator", "Bearer " + token, 200, "operator"},
		{"GET", "/operator", "Bearer node-token", 401, ""},
		{"POST", "/agent", "Bearer node-token", 200, "node"},
		{"POST", "/agent", "Bearer " + token, 401, ""},
		{"POST", "/agent", "", 401, ""},
	}
	for _, c := range cases {
		var hdr []string
		if c.auth != "" {
			hdr = []string{"Authorization", c.auth}
		}
		resp := do(t, c.method, url+c.path, nil, hdr...)
		if resp.status != c.status || (c.principal != "" && !strings.Contains(string(resp.body), `"`+c.principal+`"`)) {
			t.Errorf("%s %s with %q: %d %s; want %d %s", c.method, c.path, c.auth, resp.status, resp.body, c.status, c.principal)
		}
	}
}

func TestCustomAuthenticatorError(t *testing.T) {
	auth := func(r *http.Request) (string, error) {
		if tok, ok := httpapi.BearerCredential(r); ok && tok == "session-1" {
			return "node:n1", nil
		}
		return "", httpapi.Unauthorized("session_expired", "the session has expired; register again")
	}
	url := serve(t, []httpapi.Route{{Method: "GET", Pattern: "/x", Handler: principalHandler}}, httpapi.Options{Auth: auth})
	resp := do(t, "GET", url+"/x", nil, "Authorization", "Bearer session-0")
	if resp.status != 401 || resp.problem(t).Code != "session_expired" || resp.header.Get("WWW-Authenticate") != "Bearer" {
		t.Fatalf("got %d %v %s", resp.status, resp.header, resp.body)
	}
	resp = do(t, "GET", url+"/x", nil, "Authorization", "Bearer session-1")
	if resp.status != 200 || !strings.Contains(string(resp.body), "node:n1") {
		t.Fatalf("got %d %s", resp.status, resp.body)
	}
}

func TestTokenNeverLogged(t *testing.T) {
	log, logs := newLogger()
	routes := []httpapi.Route{
		{Method: "GET", Pattern: "/fail", Handler: func(http.ResponseWriter, *http.Request) error { return errors.New("boom") }},
		{Method: "GET", Pattern: "/panic", Handler: func(http.ResponseWriter, *http.Request) error { panic("boom") }},
		{Method: "POST", Pattern: "/ok", Handler: ok},
	}
	url := serve(t, routes, httpapi.Options{Logger: log, Auth: httpapi.BearerToken(token, "operator")})
	for _, a := range []string{"Bearer " + token, "Bearer wrong-" + token, token} {
		for _, p := range []string{"/fail", "/panic", "/nope"} {
			do(t, "GET", url+p, nil, "Authorization", a)
		}
		do(t, "POST", url+"/ok", str("{}"), "Authorization", a, "Idempotency-Key", "k-"+a[:3])
	}
	out := logs.String()
	if !strings.Contains(out, "boom") {
		t.Fatalf("expected failures to be logged, got:\n%s", out)
	}
	if strings.Contains(out, token) {
		t.Errorf("token found in logs:\n%s", out)
	}
}
