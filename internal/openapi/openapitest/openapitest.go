package openapitest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/responses"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
)

// Checker validates responses against one document.
type Checker struct {
	model *v3.Document
	resp  responses.ResponseBodyValidator
	// mux maps a request to its documented path: one pattern per
	// operation, its handler the path's key.
	mux    *http.ServeMux
	prefix string
}

// New parses doc, validates it against the OpenAPI 3.1 schema, and
// returns a Checker of responses against it.
func New(doc []byte) (*Checker, error) {
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		return nil, fmt.Errorf("openapitest: parse: %w", err)
	}
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		return nil, fmt.Errorf("openapitest: %w", errors.Join(errs...))
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		return nil, fmt.Errorf("openapitest: the document is not valid OpenAPI: %w", joinValidation(verrs))
	}
	model, merr := d.BuildV3Model()
	if merr != nil {
		return nil, fmt.Errorf("openapitest: model: %w", merr)
	}
	m := &model.Model
	c := &Checker{model: m, resp: responses.NewResponseBodyValidator(m, config.WithFormatAssertions()), mux: http.NewServeMux()}
	if len(m.Servers) > 0 && m.Servers[0].URL != "/" {
		c.prefix = m.Servers[0].URL
	}
	for path, item := range m.Paths.PathItems.FromOldest() {
		for method := range item.GetOperations().FromOldest() {
			c.mux.Handle(strings.ToUpper(method)+" "+c.prefix+path, pathKey(path))
		}
	}
	return c, nil
}

// pathKey is a documented path, as the handler of its pattern.
type pathKey string

func (pathKey) ServeHTTP(http.ResponseWriter, *http.Request) {}

// Operations lists the document's operations as "METHOD /full/path".
func (c *Checker) Operations() []string {
	var out []string
	for path, item := range c.model.Paths.PathItems.FromOldest() {
		for method := range item.GetOperations().FromOldest() {
			out = append(out, strings.ToUpper(method)+" "+c.prefix+path)
		}
	}
	return out
}

// Check validates one response to req: its status must be documented for
// the route, and a body of a documented media type must match its
// schema. A request no documented route matches (an unknown path, a wrong
// method, a HEAD) is not checked: it has no operation to check against.
func (c *Checker) Check(req *http.Request, status int, header http.Header, body []byte) error {
	if req.Method == http.MethodHead {
		return nil
	}
	h, pattern := c.mux.Handler(req)
	key, ok := h.(pathKey)
	if pattern == "" || !ok {
		return nil
	}
	item := c.model.Paths.PathItems.GetOrZero(string(key))
	res := &http.Response{StatusCode: status, Header: header, Body: io.NopCloser(bytes.NewReader(body)), Request: req}
	if ok, errs := c.resp.ValidateResponseBodyWithPathItem(req, res, item, string(key)); !ok {
		return fmt.Errorf("%s %s answered %d against the OpenAPI document: %w\nbody: %.400s", req.Method, req.URL.Path, status, joinValidation(errs), body)
	}
	return nil
}

// cache holds the Checkers Cached built, by document.
var cache sync.Map // string -> *Checker

// Cached is New of doc, built once per document in a process: suites
// check every response against a document their servers build again and
// again.
func Cached(doc []byte) (*Checker, error) {
	if c, ok := cache.Load(string(doc)); ok {
		return c.(*Checker), nil
	}
	c, err := New(doc)
	if err != nil {
		return nil, err
	}
	cache.Store(string(doc), c)
	return c, nil
}

// Golden fails t unless doc equals the golden file at path, which update
// rewrites first (go test -run <test> -update).
func Golden(t testing.TB, path string, doc []byte, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	if !bytes.Equal(doc, want) {
		t.Errorf("the OpenAPI document differs from %s: run the test with -update and review the diff", path)
	}
}

// Covers fails t unless the document's operations are exactly routes
// ("METHOD /pattern", the server prefix included).
func (c *Checker) Covers(t testing.TB, routes []string) {
	t.Helper()
	ops := c.Operations()
	routes = slices.Clone(routes)
	slices.Sort(routes)
	slices.Sort(ops)
	if !slices.Equal(routes, ops) {
		t.Errorf("document operations\n%v\nwant the route table's\n%v", ops, routes)
	}
}

func joinValidation(errs []*verrors.ValidationError) error {
	var out []error
	for _, e := range errs {
		msg := e.Message
		if e.Reason != "" {
			msg += ": " + e.Reason
		}
		for _, se := range e.SchemaValidationErrors {
			msg += fmt.Sprintf("\n  %s: %s", se.FieldPath, se.Reason)
		}
		out = append(out, errors.New(msg))
	}
	return errors.Join(out...)
}
