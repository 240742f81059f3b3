package hub

import (
	"bytes"
	"encoding/json"
	"flag"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowplane/flowplane/internal/openapi"
	"github.com/flowplane/flowplane/internal/openapi/openapitest"
)

var update = flag.Bool("update", false, "rewrite testdata/openapi.json from the route table")

// checkOpenAPI fails t unless a response of h is one the Hub's OpenAPI
// document allows: every answer the suite's request helpers get goes
// through it.
func checkOpenAPI(t testing.TB, h *Hub, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	if err := openAPIChecker(t, h).Check(req, status, header, body); err != nil {
		t.Error(err)
	}
}

func openAPIChecker(t testing.TB, h *Hub) *openapitest.Checker {
	t.Helper()
	doc, err := h.OpenAPI()
	if err != nil {
		t.Fatalf("OpenAPI: %v", err)
	}
	c, err := openapitest.Cached(doc)
	if err != nil {
		t.Fatalf("the Hub API document: %v", err)
	}
	return c
}

// TestOpenAPIDocument: the served document is the golden one (go test
// ./internal/hub -run TestOpenAPIDocument -update rewrites it), valid
// OpenAPI 3.1 by a real validator, has exactly the operations of the
// route table under the API prefix (what lies outside is the public
// probes, metrics and console), and is served behind the operator token
// with an ETag.
func TestOpenAPIDocument(t *testing.T) {
	th := serve(t, dbPath(t), testToken, true)
	bearer := []string{"Authorization", "Bearer " + testToken}
	r := th.do(t, "GET", APIPrefix+OpenAPIPath, "", bearer...)
	if r.status != 200 {
		t.Fatalf("GET %s: %d %s", OpenAPIPath, r.status, r.body)
	}
	openapitest.Golden(t, filepath.Join("testdata", "openapi.json"), r.body, *update)
	if again, err := th.h.OpenAPI(); err != nil || !bytes.Equal(again, r.body) {
		t.Errorf("a second build differs (err %v)", err)
	}
	if !bytes.Contains(r.body, []byte(`"url": "`+APIPrefix+`"`)) {
		t.Errorf("the servers entry does not name the prefix %s", APIPrefix)
	}

	var routes []string
	for _, rt := range th.h.router.Routes() {
		if !openapi.Documented(APIPrefix, rt.Pattern) {
			if !rt.Public || strings.HasPrefix(rt.Pattern, APIPrefix) {
				t.Errorf("route %s %s is left out of the document", rt.Method, rt.Pattern)
			}
			continue
		}
		routes = append(routes, rt.Method+" "+rt.Pattern)
	}
	openAPIChecker(t, th.h).Covers(t, routes)

	etag := r.header.Get("ETag")
	if etag == "" || r.header.Get("Cache-Control") == "" {
		t.Errorf("headers %v: want ETag and Cache-Control", r.header)
	}
	if r := th.do(t, "GET", APIPrefix+OpenAPIPath, "", append(bearer, "If-None-Match", etag)...); r.status != 304 {
		t.Errorf("If-None-Match: %d", r.status)
	}
	if r := th.do(t, "GET", APIPrefix+OpenAPIPath, ""); r.status != 401 {
		t.Errorf("without the token: %d", r.status)
	}
}

// TestActionRoutesRouteBeforeMediaType: each action is a route of its
// own, so a wrong method on an action path answers 405 with Allow even
// with a foreign Content-Type and a body (no 415 first), and an unknown
// action is the mux's 404.
func TestActionRoutesRouteBeforeMediaType(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	var paths []string
	for _, a := range []string{"start", "stop", "restart"} {
		paths = append(paths, "/nodes/n1/streams/s1/"+a, "/streams/s1/"+a)
	}
	for _, a := range jobActions {
		paths = append(paths, "/jobs/j1/actions/"+a)
	}
	for _, p := range paths {
		for _, method := range []string{"GET", "PUT", "DELETE"} {
			r := th.do(t, method, APIPrefix+p, "stop it", "Content-Type", "text/plain")
			if r.status != 405 || r.header.Get("Allow") != "POST" || r.problem(t).Code != "method_not_allowed" {
				t.Errorf("%s %s: %d Allow %q %s", method, p, r.status, r.header.Get("Allow"), r.body)
			}
		}
	}
	for _, p := range []string{"/nodes/n1/streams/s1/explode", "/streams/s1/explode", "/jobs/j1/actions/explode"} {
		if r := th.do(t, "POST", APIPrefix+p, ""); r.status != 404 || r.problem(t).Code != "not_found" {
			t.Errorf("POST %s: %d %s", p, r.status, r.body)
		}
	}
}

// TestOpenAPIPrefix: under another API prefix the document is served
// there, its servers entry names it, and its paths stay relative.
func TestOpenAPIPrefix(t *testing.T) {
	th := serveOptions(t, true, Options{
		Settings: Settings{Address: "127.0.0.1:0", Storage: dbPath(t), APIPrefix: "/hub/v2"},
		Logger:   slog.New(slog.DiscardHandler), Version: "test",
	})
	r := th.do(t, "GET", "/hub/v2"+OpenAPIPath, "")
	if r.status != 200 {
		t.Fatalf("GET /hub/v2%s: %d %s", OpenAPIPath, r.status, r.body)
	}
	var doc struct {
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
		Paths map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Servers) != 1 || doc.Servers[0].URL != "/hub/v2" || doc.Paths["/nodes/{node_id}/streams/{id}/start"] == nil {
		t.Errorf("servers %+v, %d paths", doc.Servers, len(doc.Paths))
	}
	for p := range doc.Paths {
		if strings.HasPrefix(p, "/hub/v2") || strings.HasPrefix(p, APIPrefix) {
			t.Errorf("path %s is not relative to the prefix", p)
		}
	}
}
