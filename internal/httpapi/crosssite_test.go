package httpapi_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/flowplane/flowplane/internal/httpapi"
)

// TestCrossSiteMutationsRefused: a web page can send a "simple" POST (no
// preflight) with any Origin and a text/plain body; such a request must not
// run a mutation, with or without a token set. The refusal comes from Origin
// and Sec-Fetch-Site, not from the media type: curl's bodiless POST works.
func TestCrossSiteMutationsRefused(t *testing.T) {
	const allowed = "https://console.example:8443"
	open := serve(t, table(), httpapi.Options{AllowedOrigins: []string{allowed}})
	protected := serve(t, table(), httpapi.Options{AllowedOrigins: []string{allowed}, Auth: httpapi.BearerToken(token, "operator")})
	bearer := "Bearer " + token
	cases := []struct {
		name, url, method, path string
		body                    string
		headers                 []string
		status                  int
		code                    string
	}{
		{"foreign origin, text/plain", open, "POST", "/streams/a/start", "",
			[]string{"Origin", "https://evil.example", "Content-Type", "text/plain"}, 403, "forbidden"},
		{"foreign origin, JSON", open, "POST", "/streams/a/start", "",
			[]string{"Origin", "https://evil.example"}, 403, "forbidden"},
		{"foreign origin, bodiless, no Content-Type", open, "POST", "/streams/a/start", "",
			[]string{"Origin", "https://evil.example", "Content-Type", ""}, 403, "forbidden"},
		{"foreign origin, PUT", open, "PUT", "/configuration/draft", "",
			[]string{"Origin", "https://evil.example"}, 403, "forbidden"},
		{"foreign origin, DELETE", open, "DELETE", "/operations/o1", "",
			[]string{"Origin", "https://evil.example"}, 403, "forbidden"},
		{"foreign origin with the token", protected, "POST", "/streams/a/start", "",
			[]string{"Origin", "https://evil.example", "Authorization", bearer}, 403, "forbidden"},
		{"foreign origin, read: served", open, "GET", "/streams", "",
			[]string{"Origin", "https://evil.example"}, 200, ""},
		{"Sec-Fetch-Site cross-site without Origin", open, "POST", "/streams/a/start", "",
			[]string{"Sec-Fetch-Site", "cross-site", "Content-Type", ""}, 403, "forbidden"},
		{"Sec-Fetch-Site same-site (another port)", open, "POST", "/streams/a/start", "",
			[]string{"Sec-Fetch-Site", "same-site", "Origin", "http://127.0.0.1:1"}, 403, "forbidden"},
		{"Sec-Fetch-Site cross-site with the token", protected, "DELETE", "/operations/o1", "",
			[]string{"Sec-Fetch-Site", "cross-site", "Authorization", bearer}, 403, "forbidden"},
		{"Sec-Fetch-Site cross-site, read: served", open, "GET", "/streams", "",
			[]string{"Sec-Fetch-Site", "cross-site"}, 200, ""},
		{"Sec-Fetch-Site same-origin", open, "POST", "/streams/a/start", "",
			[]string{"Sec-Fetch-Site", "same-origin", "Content-Type", ""}, 200, ""},
		{"Sec-Fetch-Site none (typed in the address bar)", open, "POST", "/streams/a/start", "",
			[]string{"Sec-Fetch-Site", "none"}, 200, ""},
		{"allowed origin", open, "POST", "/streams/a/start", "", []string{"Origin", allowed}, 200, ""},
		{"allowed origin, cross-site", open, "POST", "/streams/a/start", "",
			[]string{"Origin", allowed, "Sec-Fetch-Site", "cross-site"}, 200, ""},
		{"no origin", open, "POST", "/streams/a/start", "", nil, 200, ""},
		{"bodiless POST without Content-Type (curl -X POST)", open, "POST", "/streams/a/start", "",
			[]string{"Content-Type", ""}, 200, ""},
		{"bodiless DELETE without Content-Type", open, "DELETE", "/operations/o1", "",
			[]string{"Content-Type", ""}, 200, ""},
		{"bodiless POST without Content-Type, with the token", protected, "POST", "/streams/a/start", "",
			[]string{"Content-Type", "", "Authorization", bearer}, 200, ""},
		{"body without Content-Type", open, "POST", "/streams/a/start", `{}`,
			[]string{"Content-Type", ""}, 415, "unsupported_media_type"},
		{"PUT body without Content-Type", open, "PUT", "/configuration/draft", `streams: []`,
			[]string{"Content-Type", ""}, 415, "unsupported_media_type"},
		{"bodiless POST, text/plain", open, "POST", "/streams/a/start", "",
			[]string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
		{"form POST", open, "POST", "/streams/a/start", "a=b",
			[]string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
		{"YAML", open, "PUT", "/configuration/draft", "", []string{"Content-Type", "application/yaml"}, 200, ""},
		{"JSON with charset", open, "POST", "/streams/a/start", "",
			[]string{"Content-Type", "application/json; charset=utf-8"}, 200, ""},
		{"without the token: 401 before 415", protected, "POST", "/streams/a/start", "",
			[]string{"Content-Type", "text/plain"}, 401, "unauthorized"},
		{"with the token, text/plain", protected, "POST", "/streams/a/start", "",
			[]string{"Content-Type", "text/plain", "Authorization", bearer}, 415, "unsupported_media_type"},
		{"wrong method without Content-Type: 405 first", open, "PUT", "/streams/a/start", "",
			[]string{"Content-Type", ""}, 405, "method_not_allowed"},
		{"wrong method, text/plain body: 405 first", open, "DELETE", "/streams/a/start", "x",
			[]string{"Content-Type", "text/plain"}, 405, "method_not_allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = str(tc.body)
			}
			resp := do(t, tc.method, tc.url+tc.path, body, tc.headers...)
			if resp.status != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.status, tc.status, resp.body)
			}
			if tc.code != "" {
				if p := resp.problem(t); p.Code != tc.code {
					t.Errorf("code %q, want %q", p.Code, tc.code)
				}
			}
		})
	}
}

// TestHostCheckWithoutToken: without a token, only Host values naming
// loopback or the listener's own address are served (DNS rebinding); with a
// token, and on public routes, any Host is.
func TestHostCheckWithoutToken(t *testing.T) {
	open := serve(t, table(), httpapi.Options{})
	protected := serve(t, table(), httpapi.Options{Auth: httpapi.BearerToken(token, "operator")})
	cases := []struct {
		name, url, method, path, host string
		auth                          bool
		status                        int
	}{
		{"rebound name", open, "GET", "/streams", "evil.example:8080", false, 403},
		{"rebound name, mutation", open, "POST", "/streams/a/start", "evil.example", false, 403},
		{"foreign address", open, "GET", "/streams", "192.0.2.7:8080", false, 403},
		{"localhost", open, "GET", "/streams", "localhost:8080", false, 200},
		{"LOCALHOST", open, "GET", "/streams", "LOCALHOST", false, 200},
		{"127.0.0.1", open, "GET", "/streams", "127.0.0.1:9", false, 200},
		{"127.1.2.3", open, "GET", "/streams", "127.1.2.3", false, 200},
		{"[::1]", open, "GET", "/streams", "[::1]:8080", false, 200},
		{"public route, any Host", open, "GET", "/health", "evil.example", false, 200},
		{"token set: any Host", protected, "GET", "/streams", "evil.example", true, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, tc.url+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = tc.host
			req.Header.Set("Content-Type", "application/json")
			if tc.auth {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("Host %q: status %d, want %d", tc.host, resp.StatusCode, tc.status)
			}
		})
	}
}

// TestAuthBeforeRouting: with a token set, a path that is no public route's
// answers 401 without a valid token whether or not a route exists, so
// routes cannot be enumerated; with the token, 404 and 405 as before.
func TestAuthBeforeRouting(t *testing.T) {
	url := serve(t, table(), httpapi.Options{Auth: httpapi.BearerToken(token, "operator")})
	bearer := []string{"Authorization", "Bearer " + token}
	cases := []struct {
		name, method, path string
		headers            []string
		status             int
		code               string
	}{
		{"unknown path", "GET", "/nope", nil, 401, "unauthorized"},
		{"unknown nested path", "GET", "/api/v1/secret/thing", nil, 401, "unauthorized"},
		{"known path, wrong method", "DELETE", "/streams/a", nil, 401, "unauthorized"},
		{"unknown path, wrong token", "GET", "/nope", []string{"Authorization", "Bearer nope"}, 401, "unauthorized"},
		{"known route", "GET", "/streams", nil, 401, "unauthorized"},
		{"unknown path with the token", "GET", "/nope", bearer, 404, "not_found"},
		{"wrong method with the token", "DELETE", "/streams/a", bearer, 405, "method_not_allowed"},
		{"probe", "GET", "/health", nil, 200, ""},
		{"probe path, wrong method", "POST", "/health", nil, 405, "method_not_allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(t, tc.method, url+tc.path, nil, tc.headers...)
			if resp.status != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.status, tc.status, resp.body)
			}
			if tc.code != "" {
				p := resp.problem(t)
				if p.Code != tc.code {
					t.Errorf("code %q, want %q", p.Code, tc.code)
				}
				if tc.status == 401 && resp.header.Get("WWW-Authenticate") != "Bearer" {
					t.Errorf("WWW-Authenticate %q", resp.header.Get("WWW-Authenticate"))
				}
			}
		})
	}
}

// TestNoIdempotencyKeyRoute: a route whose answer holds a secret refuses
// Idempotency-Key, so the answer is never stored.
func TestNoIdempotencyKeyRoute(t *testing.T) {
	store := httpapi.NewMemoryStore(httpapi.MemoryStoreOptions{})
	url := serve(t, []httpapi.Route{{Method: "POST", Pattern: "/register", NoIdempotencyKey: true,
		Handler: func(w http.ResponseWriter, _ *http.Request) error {
			return httpapi.WriteJSON(w, 200, map[string]string{"session_token": "s3cr3t"})
		}}}, httpapi.Options{Idempotency: store})
	resp := do(t, "POST", url+"/register", str(`{}`), "Idempotency-Key", "k1")
	if resp.status != 400 || resp.problem(t).Code != "invalid_header" {
		t.Fatalf("with a key: %d %s", resp.status, resp.body)
	}
	if store.Len() != 0 {
		t.Fatalf("%d keys stored", store.Len())
	}
	if resp := do(t, "POST", url+"/register", str(`{}`)); resp.status != 200 {
		t.Fatalf("without a key: %d %s", resp.status, resp.body)
	}
}
