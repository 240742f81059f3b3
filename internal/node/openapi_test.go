package node_test

import (
	"bytes"
	"flag"
	"path/filepath"
	"testing"

	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/openapi/openapitest"
)

var update = flag.Bool("update", false, "rewrite testdata/openapi.json from the route table")

// checker is the response checker of the document h's node serves. A
// listener of the observability endpoints only serves no Node API: its
// answers are not checked.
func (h *harness) checker(t *testing.T) *openapitest.Checker {
	t.Helper()
	if h.ln == nil || h.ln.Kind != "control-plane" {
		return nil
	}
	c, err := h.openapi()
	if err != nil {
		t.Fatalf("the Node API document: %v", err)
	}
	return c
}

// TestOpenAPIDocument: the served document is the golden one (go test
// -run TestOpenAPIDocument -update rewrites it), valid OpenAPI 3.1 by a
// real validator, has exactly the route table's operations, and is served
// behind the token with an ETag.
func TestOpenAPIDocument(t *testing.T) {
	h := newHarness(t, securedDoc())
	h.token = testToken
	r := h.expect(t, 200, "GET", node.OpenAPIPath, "")
	openapitest.Golden(t, filepath.Join("testdata", "openapi.json"), r.Body, *update)
	again, err := h.n.OpenAPI(h.hopts)
	if err != nil || !bytes.Equal(again, r.Body) {
		t.Errorf("a second build differs (err %v)", err)
	}
	var routes []string
	for _, rt := range h.n.Handler(h.hopts).Routes() {
		routes = append(routes, rt.Method+" "+rt.Pattern)
	}
	h.checker(t).Covers(t, routes)

	etag := r.Header.Get("ETag")
	if etag == "" || r.Header.Get("Cache-Control") == "" {
		t.Errorf("headers %v: want ETag and Cache-Control", r.Header)
	}
	h.expect(t, 304, "GET", node.OpenAPIPath, "", "If-None-Match", etag)
	h.expect(t, 401, "GET", node.OpenAPIPath, "", "Authorization", "")
}
