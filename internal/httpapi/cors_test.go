package httpapi_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/httpapi"
)

func TestCORS(t *testing.T) {
	const allowed = "https://console.example:8443"
	opts := httpapi.Options{
		AllowedOrigins: []string{allowed},
		Auth:           httpapi.BearerToken(token, "operator"),
	}
	url := serve(t, table(), opts)
	emptyURL := serve(t, table(), httpapi.Options{})
	corsHeaders := []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Methods",
		"Access-Control-Allow-Headers", "Access-Control-Expose-Headers", "Access-Control-Max-Age", "Vary"}
	cases := []struct {
		name    string
		url     string
		method  string
		path    string
		headers []string
		status  int
		code    string
		want    map[string]string // every CORS header, "" = absent
	}{
		{
			name: "allowed simple request", url: url, method: "GET", path: "/streams",
			headers: []string{"Origin", allowed, "Authorization", "Bearer " + token}, status: 200,
			want: map[string]string{"Access-Control-Allow-Origin": allowed, "Vary": "Origin",
				"Access-Control-Expose-Headers": "ETag, Location, X-Correlation-ID, Idempotent-Replayed"},
		},
		{
			name: "allowed origin still needs the token", url: url, method: "GET", path: "/streams",
			headers: []string{"Origin", allowed}, status: 401, code: "unauthorized",
			want: map[string]string{"Access-Control-Allow-Origin": allowed, "Vary": "Origin",
				"Access-Control-Expose-Headers": "ETag, Location, X-Correlation-ID, Idempotent-Replayed"},
		},
		{
			name: "allowed preflight skips auth", url: url, method: "OPTIONS", path: "/configuration/draft",
			headers: []string{"Origin", allowed, "Access-Control-Request-Method", "PUT",
				"Access-Control-Request-Headers", "authorization, if-match"}, status: 204,
			want: map[string]string{"Access-Control-Allow-Origin": allowed,
				"Access-Control-Allow-Methods": "GET, PUT",
				"Access-Control-Allow-Headers": "Authorization, Content-Type, If-Match, Idempotency-Key, X-Correlation-ID",
				"Access-Control-Max-Age":       "600",
				"Vary":                         "Origin"},
		},
		{
			// With a token set, a preflight (which carries none) must not
			// tell known paths from unknown ones.
			name: "allowed preflight, unknown path", url: url, method: "OPTIONS", path: "/nope",
			headers: []string{"Origin", allowed, "Access-Control-Request-Method", "GET"}, status: 204,
			want: map[string]string{"Access-Control-Allow-Origin": allowed,
				"Access-Control-Allow-Methods": "DELETE, GET, POST, PUT",
				"Access-Control-Allow-Headers": "Authorization, Content-Type, If-Match, Idempotency-Key, X-Correlation-ID",
				"Access-Control-Max-Age":       "600",
				"Vary":                         "Origin"},
		},
		{
			name: "disallowed simple request: served, no CORS headers", url: url, method: "GET", path: "/health",
			headers: []string{"Origin", "https://evil.example"}, status: 200,
			want: map[string]string{"Vary": "Origin"},
		},
		{
			name: "disallowed preflight", url: url, method: "OPTIONS", path: "/streams",
			headers: []string{"Origin", "https://evil.example", "Access-Control-Request-Method", "GET"}, status: 403, code: "forbidden",
			want: map[string]string{"Vary": "Origin"},
		},
		{
			name: "empty allow list denies preflight", url: emptyURL, method: "OPTIONS", path: "/streams",
			headers: []string{"Origin", allowed, "Access-Control-Request-Method", "GET"}, status: 403, code: "forbidden",
			want: map[string]string{},
		},
		{
			name: "empty allow list, simple request", url: emptyURL, method: "GET", path: "/streams",
			headers: []string{"Origin", allowed}, status: 200, want: map[string]string{},
		},
		{
			name: "same origin (no Origin header)", url: url, method: "GET", path: "/health",
			status: 200, want: map[string]string{},
		},
		{
			// Browsers send Origin on same-origin mutations too (the Hub's
			// console): the request's own origin is not cross-origin.
			name: "same origin with an Origin header: a mutation passes", url: url, method: "PUT", path: "/configuration/draft",
			headers: []string{"Origin", url, "Authorization", "Bearer " + token, "Content-Type", "application/json"}, status: 200,
			want: map[string]string{},
		},
		{
			name: "same host, other scheme: cross-origin", url: url, method: "PUT", path: "/configuration/draft",
			headers: []string{"Origin", strings.Replace(url, "http://", "https://", 1), "Authorization", "Bearer " + token, "Content-Type", "application/json"},
			status:  403, code: "forbidden", want: map[string]string{"Vary": "Origin"},
		},
		{
			name: "OPTIONS without request method is not a preflight", url: url, method: "OPTIONS", path: "/streams",
			headers: []string{"Origin", allowed, "Authorization", "Bearer " + token}, status: 405, code: "method_not_allowed",
			want: map[string]string{"Access-Control-Allow-Origin": allowed, "Vary": "Origin",
				"Access-Control-Expose-Headers": "ETag, Location, X-Correlation-ID, Idempotent-Replayed"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(t, tc.method, tc.url+tc.path, nil, tc.headers...)
			if resp.status != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.status, tc.status, resp.body)
			}
			if tc.code != "" {
				if p := resp.problem(t); p.Code != tc.code {
					t.Errorf("code %q, want %q", p.Code, tc.code)
				}
			}
			got := map[string]string{}
			for _, h := range corsHeaders {
				if v := resp.header.Values(h); len(v) > 0 {
					got[h] = v[0]
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CORS headers (-want +got):\n%s", diff)
			}
		})
	}
}
