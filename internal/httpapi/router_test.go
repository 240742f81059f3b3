package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/flowplane/flowplane/internal/httpapi"
)

func table() []httpapi.Route {
	return []httpapi.Route{
		{Method: "GET", Pattern: "/health", Handler: ok, Public: true},
		{Method: "GET", Pattern: "/streams", Handler: ok},
		{Method: "GET", Pattern: "/streams/{id}", Handler: ok},
		{Method: "POST", Pattern: "/streams/{id}/start", Handler: ok},
		{Method: "PUT", Pattern: "/configuration/draft", Handler: ok},
		{Method: "GET", Pattern: "/configuration/draft", Handler: ok},
		{Method: "DELETE", Pattern: "/operations/{id}", Handler: ok},
	}
}

func TestNoRoute(t *testing.T) {
	url := serve(t, table(), httpapi.Options{})
	cases := []struct {
		method, path string
		status       int
		code         string
		allow        string
	}{
		{"GET", "/nope", 404, "not_found", ""},
		{"POST", "/streams/a/b/c", 404, "not_found", ""},
		{"DELETE", "/streams/a", 405, "method_not_allowed", "GET, HEAD"},
		{"GET", "/streams/a/start", 405, "method_not_allowed", "POST"},
		{"POST", "/configuration/draft", 405, "method_not_allowed", "GET, HEAD, PUT"},
		{"OPTIONS", "/streams", 405, "method_not_allowed", "GET, HEAD"},
	}
	for _, tc := range cases {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			resp := do(t, tc.method, url+tc.path, nil)
			if resp.status != tc.status {
				t.Fatalf("status %d, want %d", resp.status, tc.status)
			}
			if p := resp.problem(t); p.Code != tc.code {
				t.Errorf("code %q, want %q", p.Code, tc.code)
			}
			if got := resp.header.Get("Allow"); got != tc.allow {
				t.Errorf("Allow %q, want %q", got, tc.allow)
			}
		})
	}
	t.Run("known routes still answer", func(t *testing.T) {
		for _, p := range []string{"/health", "/streams", "/streams/x"} {
			if resp := do(t, "GET", url+p, nil); resp.status != 200 {
				t.Errorf("GET %s: %d", p, resp.status)
			}
		}
	})
	t.Run("unclean path is redirected, not rewritten", func(t *testing.T) {
		resp := do(t, "GET", url+"/streams//x", nil)
		if resp.status/100 != 3 || resp.header.Get("Location") != "/streams/x" {
			t.Fatalf("got %d Location %q", resp.status, resp.header.Get("Location"))
		}
	})
}

func TestRoutes(t *testing.T) {
	rt := httpapi.NewRouter(table(), httpapi.Options{})
	var got []string
	for _, r := range rt.Routes() {
		got = append(got, r.Method+" "+r.Pattern)
	}
	want := []string{"GET /health", "GET /streams", "GET /streams/{id}", "POST /streams/{id}/start",
		"PUT /configuration/draft", "GET /configuration/draft", "DELETE /operations/{id}"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
}

func TestNewRouterRejectsBadRoutes(t *testing.T) {
	for name, r := range map[string]httpapi.Route{
		"no method":    {Pattern: "/x", Handler: ok},
		"no handler":   {Method: "GET", Pattern: "/x"},
		"method+space": {Method: "GET /y", Pattern: "/x", Handler: ok},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("NewRouter did not panic")
				}
			}()
			httpapi.NewRouter([]httpapi.Route{r}, httpapi.Options{})
		})
	}
}

func TestCorrelationID(t *testing.T) {
	var seen string
	url := serve(t, []httpapi.Route{{Method: "GET", Pattern: "/x", Handler: func(w http.ResponseWriter, r *http.Request) error {
		seen = httpapi.CorrelationID(r.Context())
		return ok(w, r)
	}}}, httpapi.Options{})

	t.Run("generated UUIDv7", func(t *testing.T) {
		resp := do(t, "GET", url+"/x", nil)
		id, err := uuid.Parse(resp.header.Get("X-Correlation-ID"))
		if err != nil || id.Version() != 7 || seen != id.String() {
			t.Fatalf("id %q (%v), handler saw %q", resp.header.Get("X-Correlation-ID"), err, seen)
		}
	})
	t.Run("404 carries a generated id", func(t *testing.T) {
		resp := do(t, "GET", url+"/nope", nil)
		if _, err := uuid.Parse(resp.problem(t).CorrelationID); err != nil {
			t.Fatal(err)
		}
	})
	echo := []string{"abc", "a", strings.Repeat("x", 128), "with space and !~", "0198c1c0-7d2e-7bd4-9a36-25f0c2d0c6a1"}
	for _, v := range echo {
		t.Run("echo "+v[:1], func(t *testing.T) {
			resp := do(t, "GET", url+"/x", nil, "X-Correlation-ID", v)
			if resp.status != 200 || resp.header.Get("X-Correlation-ID") != v || seen != v {
				t.Fatalf("status %d, header %q, handler saw %q", resp.status, resp.header.Get("X-Correlation-ID"), seen)
			}
		})
	}
	reject := map[string][]string{
		"too long":     {strings.Repeat("x", 129)},
		"empty":        {""},
		"non-ASCII":    {"caf\u00e9"},
		"tab":          {"a\tb"},
		"two values":   {"a", "b"},
		"long, 404too": {strings.Repeat("y", 200)},
	}
	for name, vals := range reject {
		t.Run("reject "+name, func(t *testing.T) {
			var hs []string
			for _, v := range vals {
				hs = append(hs, "X-Correlation-ID", v)
			}
			resp := do(t, "GET", url+"/x", nil, hs...)
			if resp.status != 400 {
				t.Fatalf("status %d", resp.status)
			}
			p := resp.problem(t)
			if p.Code != "invalid_header" {
				t.Errorf("code %q", p.Code)
			}
			if _, err := uuid.Parse(p.CorrelationID); err != nil {
				t.Errorf("replacement id %q: %v", p.CorrelationID, err)
			}
		})
	}
}

func TestBodyLimit(t *testing.T) {
	type in struct {
		S string `json:"s"`
	}
	url := serve(t, []httpapi.Route{{Method: "POST", Pattern: "/x", Handler: func(w http.ResponseWriter, r *http.Request) error {
		var v in
		if err := httpapi.DecodeJSON(r, &v, 0); err != nil {
			return err
		}
		return httpapi.WriteJSON(w, 200, v)
	}}}, httpapi.Options{MaxBodyBytes: 32})
	small := `{"s":"0123456789"}`
	big := `{"s":"0123456789012345678901234567890123456789"}`
	cases := []struct {
		name   string
		body   io.Reader
		status int
	}{
		{"fits", str(small), 200},
		{"Content-Length over the cap", str(big), 413},
		{"chunked over the cap", io.MultiReader(str(big)), 413},
		{"chunked fits", io.MultiReader(str(small)), 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(t, "POST", url+"/x", tc.body, "Content-Type", "application/json")
			if resp.status != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.status, tc.status, resp.body)
			}
			if tc.status == 413 {
				if p := resp.problem(t); p.Code != "body_too_large" || p.Details["limit_bytes"] != 32.0 {
					t.Errorf("problem %+v", p)
				}
			}
		})
	}
}
