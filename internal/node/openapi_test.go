package node_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/flowplane/flowplane/internal/node"
	"github.com/flowplane/flowplane/internal/openapi/openapitest"
)

var update = flag.Bool("update", false, "rewrite testdata/openapi.json from the route table")

// checkers are the response checkers of the documents harnesses serve, by
// document: building one parses and validates the document.
var checkers sync.Map // string -> *openapitest.Checker

// checker is the response checker of the document h's node serves. A
// listener of the observability endpoints only serves no Node API: its
// answers are not checked.
func (h *harness) checker(t *testing.T) *openapitest.Checker {
	t.Helper()
	if h.ln == nil || h.ln.Kind != "control-plane" {
		return nil
	}
	doc, err := h.n.OpenAPI(h.hopts)
	if err != nil {
		t.Fatalf("OpenAPI: %v", err)
	}
	if c, ok := checkers.Load(string(doc)); ok {
		return c.(*openapitest.Checker)
	}
	c, err := openapitest.New(doc)
	if err != nil {
		t.Fatalf("the Node API document: %v", err)
	}
	checkers.Store(string(doc), c)
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
	golden := filepath.Join("testdata", "openapi.json")
	if *update {
		if err := os.WriteFile(golden, r.Body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./internal/node -run TestOpenAPIDocument -update writes it)", err)
	}
	if !bytes.Equal(r.Body, want) {
		t.Errorf("the document differs from %s: run go test ./internal/node -run TestOpenAPIDocument -update and review the diff", golden)
	}
	again, err := h.n.OpenAPI(h.hopts)
	if err != nil || !bytes.Equal(again, r.Body) {
		t.Errorf("a second build differs (err %v)", err)
	}
	c := h.checker(t)
	var routes []string
	for _, rt := range h.n.Handler(h.hopts).Routes() {
		routes = append(routes, rt.Method+" "+rt.Pattern)
	}
	ops := c.Operations()
	slices.Sort(routes)
	slices.Sort(ops)
	if !slices.Equal(routes, ops) {
		t.Errorf("document operations\n%v\nwant the route table's\n%v", ops, routes)
	}

	etag := r.Header.Get("ETag")
	if etag == "" || r.Header.Get("Cache-Control") == "" {
		t.Errorf("headers %v: want ETag and Cache-Control", r.Header)
	}
	h.expect(t, 304, "GET", node.OpenAPIPath, "", "If-None-Match", etag)
	h.expect(t, 401, "GET", node.OpenAPIPath, "", "Authorization", "")
}
