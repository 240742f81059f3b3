package openapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/openapi"
	"github.com/flowplane/flowplane/internal/openapi/openapitest"
	"github.com/flowplane/flowplane/internal/wire"
)

type base struct {
	ID   string `json:"id"`
	Kind string `json:"kind,omitempty"`
}

type thing struct {
	base
	Name    string            `json:"name"`
	Count   int               `json:"count,omitempty"`
	Ratio   float64           `json:"ratio"`
	Tags    []string          `json:"tags"`
	Labels  map[string]string `json:"labels,omitempty"`
	Parent  *thing            `json:"parent,omitempty"`
	Next    *base             `json:"next"`
	At      wire.Time         `json:"at"`
	Seen    wire.Time         `json:"seen,omitzero"`
	Raw     json.RawMessage   `json:"raw,omitempty"`
	Any     any               `json:"any"`
	Big     int64             `json:"big,string"`
	Skipped string            `json:"-"`
	//lint:ignore U1000 an unexported field, which the schema must leave out
	internal string
}

type marshals struct{}

func (marshals) MarshalJSON() ([]byte, error) { return []byte(`"x"`), nil }

func noop(http.ResponseWriter, *http.Request) error { return nil }

func build(t *testing.T, routes ...httpapi.Route) map[string]any {
	t.Helper()
	b, err := openapi.Build(openapi.Info{Title: "t", Version: "1", Types: openapi.WireTypes}, routes)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func at(doc map[string]any, path ...string) any {
	var v any = doc
	for _, p := range path {
		v = v.(map[string]any)[p]
	}
	return v
}

// TestReflection: json names and options, embedded fields, pointers,
// wire.Time, raw JSON, maps and recursion become the schema encoding/json
// writes.
func TestReflection(t *testing.T) {
	doc := build(t, httpapi.Route{Method: "GET", Pattern: "/things/{id}", Handler: noop, Doc: httpapi.Doc{Response: thing{}}})
	got := at(doc, "components", "schemas", "Thing")
	want := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"id":     map[string]any{"type": "string"},
			"kind":   map[string]any{"type": "string"},
			"name":   map[string]any{"type": "string"},
			"count":  map[string]any{"type": "integer"},
			"ratio":  map[string]any{"type": "number"},
			"tags":   map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			"labels": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
			"parent": map[string]any{"$ref": "#/components/schemas/Thing"},
			"next":   map[string]any{"anyOf": []any{map[string]any{"$ref": "#/components/schemas/Base"}, map[string]any{"type": "null"}}},
			"at":     map[string]any{"type": []any{"string", "null"}, "format": "date-time"},
			"seen":   map[string]any{"type": "string", "format": "date-time"},
			"raw":    map[string]any{},
			"any":    map[string]any{},
			"big":    map[string]any{"type": "string"},
		},
		"required": []any{"any", "at", "big", "id", "name", "next", "ratio", "tags"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("schema of thing (-want +got):\n%s", diff)
	}
	if ref := at(doc, "paths", "/things/{id}", "get", "responses", "200", "content", "application/json", "schema"); !reflect.DeepEqual(ref, map[string]any{"$ref": "#/components/schemas/Thing"}) {
		t.Errorf("response schema %v", ref)
	}
	if _, err := openapi.Build(openapi.Info{}, []httpapi.Route{{Method: "GET", Pattern: "/m", Handler: noop, Doc: httpapi.Doc{Response: marshals{}}}}); err == nil ||
		!strings.Contains(err.Error(), "Info.Types") {
		t.Errorf("a type with its own MarshalJSON and no schema: %v", err)
	}
}

// TestOperation: parameters, security, statuses, request media and the
// prefix.
func TestOperation(t *testing.T) {
	routes := []httpapi.Route{
		{Method: "POST", Pattern: "/api/things/{id}/go", Handler: noop, Doc: httpapi.Doc{Tag: "things", Request: thing{}, RequestMedia: []string{"application/json", "application/yaml"},
			Status: 202, Response: wire.Operation{}, IfMatch: true, Problems: []int{404}, Query: []httpapi.Param{{Name: "mode", Enum: []string{"a", "b"}}}}},
		{Method: "GET", Pattern: "/api/things", Handler: noop, Doc: httpapi.Doc{Paged: true, Response: wire.Page[thing]{}, Security: "other"}},
		{Method: "GET", Pattern: "/health", Handler: noop, Public: true},
	}
	b, err := openapi.Build(openapi.Info{Title: "t", Version: "1", Prefix: "/api", DefaultSecurity: "main", Types: openapi.WireTypes,
		Security: map[string]openapi.SecurityScheme{"main": {}, "other": {}}}, routes)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if s := at(doc, "servers").([]any); len(s) != 1 || s[0].(map[string]any)["url"] != "/api" {
		t.Errorf("servers %v", s)
	}
	if _, ok := at(doc, "paths").(map[string]any)["/health"]; ok {
		t.Error("a route outside the prefix is documented")
	}
	op := at(doc, "paths", "/things/{id}/go", "post").(map[string]any)
	var statuses []string
	for s := range op["responses"].(map[string]any) {
		statuses = append(statuses, s)
	}
	for _, want := range []string{"202", "400", "401", "403", "404", "409", "412", "413", "415", "422", "500"} {
		if !strings.Contains(strings.Join(statuses, ","), want) {
			t.Errorf("POST lacks %s: %v", want, statuses)
		}
	}
	var params []string
	for _, p := range op["parameters"].([]any) {
		params = append(params, p.(map[string]any)["in"].(string)+":"+p.(map[string]any)["name"].(string))
	}
	if diff := cmp.Diff([]string{"path:id", "query:mode", "header:If-Match", "header:Idempotency-Key"}, params); diff != "" {
		t.Errorf("parameters (-want +got):\n%s", diff)
	}
	if media := at(op, "requestBody", "content").(map[string]any); len(media) != 2 || media["application/yaml"] == nil {
		t.Errorf("request media %v", media)
	}
	if sec := op["security"]; !reflect.DeepEqual(sec, []any{map[string]any{"main": []any{}}}) {
		t.Errorf("security %v", sec)
	}
	if sec := at(doc, "paths", "/things", "get", "security"); !reflect.DeepEqual(sec, []any{map[string]any{"other": []any{}}}) {
		t.Errorf("security of a route naming its scheme: %v", sec)
	}
	again, err := openapi.Build(openapi.Info{Title: "t", Version: "1", Prefix: "/api", DefaultSecurity: "main", Types: openapi.WireTypes,
		Security: map[string]openapi.SecurityScheme{"main": {}, "other": {}}}, routes)
	if err != nil || !bytes.Equal(again, b) {
		t.Errorf("a second build differs (err %v)", err)
	}
}

// TestChecker: the validator accepts the document and the answers it
// allows, and refuses a body off its schema, an undocumented status and a
// problem off the envelope.
func TestChecker(t *testing.T) {
	b, err := openapi.Build(openapi.Info{Title: "t", Version: "1", Types: openapi.WireTypes}, []httpapi.Route{
		{Method: "GET", Pattern: "/things/{id}", Handler: noop, Doc: httpapi.Doc{Response: thing{}, Problems: []int{404}}},
		{Method: "GET", Pattern: "/metrics", Handler: noop, Public: true, Doc: httpapi.Doc{ResponseMedia: "text/plain"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := openapitest.New(b)
	if err != nil {
		t.Fatal(err)
	}
	good := `{"id":"a","name":"n","ratio":1,"tags":[],"next":null,"at":"2026-01-02T03:04:05.000Z","big":"1","any":null}`
	jsonH := http.Header{"Content-Type": {"application/json"}}
	for _, c2 := range []struct {
		name, path string
		status     int
		header     http.Header
		body       string
		ok         bool
	}{
		{"good", "/things/a", 200, jsonH, good, true},
		{"missing field", "/things/a", 200, jsonH, strings.Replace(good, `"name":"n",`, "", 1), false},
		{"wrong type", "/things/a", 200, jsonH, strings.Replace(good, `"ratio":1`, `"ratio":"1"`, 1), false},
		{"null array", "/things/a", 200, jsonH, strings.Replace(good, `"tags":[]`, `"tags":null`, 1), false},
		{"bad time", "/things/a", 200, jsonH, strings.Replace(good, `2026-01-02T03:04:05.000Z`, `yesterday`, 1), false},
		{"problem", "/things/a", 404, jsonH, `{"code":"not_found","message":"m","correlation_id":"c"}`, true},
		{"problem without code", "/things/a", 404, jsonH, `{"message":"m","correlation_id":"c"}`, false},
		{"undocumented status", "/things/a", 418, jsonH, `{"code":"x","message":"m","correlation_id":"c"}`, false},
		{"text", "/metrics", 200, http.Header{"Content-Type": {"text/plain; version=0.0.4"}}, "up 1\n", true},
		{"unknown route", "/nowhere", 404, jsonH, `{}`, true},
	} {
		t.Run(c2.name, func(t *testing.T) {
			err := c.Check(httptest.NewRequest("GET", c2.path, nil), c2.status, c2.header, []byte(c2.body))
			if (err == nil) != c2.ok {
				t.Errorf("Check = %v, want ok %v", err, c2.ok)
			}
		})
	}
	if _, err := openapitest.New([]byte(`{"openapi": "3.1.0", "paths": {"/x": {"get": {"responses": 5}}}}`)); err == nil {
		t.Error("an invalid document passed")
	}
}

// TestHandler: the document is served with an ETag, 304 on a match.
func TestHandler(t *testing.T) {
	builds := 0
	h := openapi.Handler(func() ([]byte, error) { builds++; return []byte(`{"openapi":"3.1.0"}`), nil })
	rec := httptest.NewRecorder()
	if err := h(rec, httptest.NewRequest("GET", "/openapi.json", nil)); err != nil || rec.Code != 200 || rec.Header().Get("ETag") == "" {
		t.Fatalf("first: %v %d %v", err, rec.Code, rec.Header())
	}
	req := httptest.NewRequest("GET", "/openapi.json", nil)
	req.Header.Set("If-None-Match", rec.Header().Get("ETag"))
	rec2 := httptest.NewRecorder()
	if err := h(rec2, req); err != nil || rec2.Code != 304 || rec2.Body.Len() != 0 {
		t.Fatalf("revalidation: %v %d %q", err, rec2.Code, rec2.Body)
	}
	if builds != 1 {
		t.Errorf("built %d times", builds)
	}
}
